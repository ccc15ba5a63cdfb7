"""Tests of the reader datasets: TFRecordDataset, TextLineDataset, FixedLengthRecordDataset."""

from __future__ import annotations

import gzip
import json
import os
import pathlib
import zlib

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy._src.data.sources.writer import TFRecordWriter
from tpustrategy.errors import DataLossError

Dataset = tpsd.Dataset
GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden" / "tf_golden_cases.json"


def write_tfrecords(path, records, compression_type=None):
    with TFRecordWriter(str(path), compression_type) as w:
        for r in records:
            w.write(r)
    return str(path)


def golden_case(case_id):
    cases = json.loads(GOLDEN.read_text())["cases"]
    return next(c for c in cases if c["id"] == case_id)


@pytest.fixture
def four_files(tmp_path):
    """The 4 files of the auto-shard golden cases: a{i}.tfrecord holding a{i}_r0..a{i}_r2."""
    files = golden_case("shard_tfrecord4_FILE_W2")["input"]["files"]
    return [write_tfrecords(tmp_path / name, [r.encode() for r in recs]) for name, recs in sorted(files.items())]


def test_tfrecord_dataset_reads_files_in_order_as_bytes(four_files):
    out = list(tpsd.TFRecordDataset(four_files))
    assert out == [f"a{i}_r{j}".encode() for i in range(4) for j in range(3)]
    assert all(type(r) is bytes for r in out)


def test_records_keep_trailing_zero_bytes_through_batch(tmp_path):
    records = [b"x\x00\x00", b"\x00", b"", b"\x00\x01\x00"]
    path = write_tfrecords(tmp_path / "z.tfrecord", records)
    batch = next(iter(tpsd.TFRecordDataset(path).batch(8)))
    assert batch.dtype == object and batch.tolist() == records


def test_reader_element_spec_is_a_scalar_string():
    assert tpsd.TFRecordDataset("a").element_spec == tpsd.TensorSpec((), object)
    assert tpsd.TFRecordDataset("a").batch(4).element_spec == tpsd.TensorSpec((None,), object)


@pytest.mark.parametrize("compression_type", ["", "GZIP", "ZLIB"])
def test_tfrecord_dataset_reads_compressed_files(tmp_path, compression_type):
    records = [os.urandom(n) for n in range(0, 3000, 97)]
    path = write_tfrecords(tmp_path / "c.tfrecord", records, compression_type)
    assert list(tpsd.TFRecordDataset(path, compression_type=compression_type)) == records


def test_filenames_may_be_a_string_pathlike_bytes_list_or_dataset(four_files):
    expected = [b"a0_r0", b"a0_r1", b"a0_r2"]
    assert list(tpsd.TFRecordDataset(four_files[0])) == expected
    assert list(tpsd.TFRecordDataset(pathlib.Path(four_files[0]))) == expected
    assert list(tpsd.TFRecordDataset([os.fsencode(four_files[0])])) == expected
    assert list(tpsd.TFRecordDataset(Dataset.from_tensor_slices(four_files[:1]))) == expected


def test_filenames_are_a_dataset_node_that_a_shard_can_be_put_on(four_files):
    reader = tpsd.TFRecordDataset(four_files)
    assert reader.inputs == (reader.filenames,)
    assert list(reader.filenames) == [os.fsencode(f) for f in four_files]


def test_file_sharding_matches_the_tensorflow_golden_case(four_files):
    case = golden_case("shard_tfrecord4_FILE_W2")
    reader = tpsd.TFRecordDataset(four_files)
    for worker in case["output"]["workers"]:
        sharded = reader.with_inputs(reader.filenames.shard(2, worker["worker"]))
        assert [r.decode() for r in sharded] == worker["elements"]


def test_data_sharding_matches_the_tensorflow_golden_case(four_files):
    case = golden_case("shard_tfrecord4_DATA_W3")
    for worker in case["output"]["workers"]:
        sharded = tpsd.TFRecordDataset(four_files).shard(3, worker["worker"])
        assert [r.decode() for r in sharded] == worker["elements"]


def test_parallel_reads_cycle_over_files_one_record_at_a_time(four_files):
    ds = tpsd.TFRecordDataset(four_files, num_parallel_reads=2)
    expected = ["a0_r0", "a1_r0", "a0_r1", "a1_r1", "a0_r2", "a1_r2", "a2_r0", "a3_r0", "a2_r1", "a3_r1", "a2_r2", "a3_r2"]
    assert [r.decode() for r in ds] == expected


def test_parallel_reads_autotune_reads_as_tensorflow_does(four_files, monkeypatch):
    # TensorFlow 2.21 reads num_parallel_reads=AUTOTUNE through interleave(num_parallel_calls=
    # AUTOTUNE): ceil(cores / 17) files at a time. Recorded with TensorFlow 2.21 on 2 cores: six
    # files of three records read in file order; with 4 explicit reads, a record of each in turn.
    from tpustrategy._src.data.transformations import interleave

    in_order = [f"a{f}_r{r}" for f in range(4) for r in range(3)]
    for cores in (2, 16):
        monkeypatch.setattr(interleave, "cpu_count", lambda cores=cores: cores)
        got = [r.decode() for r in tpsd.TFRecordDataset(four_files, num_parallel_reads=tpsd.AUTOTUNE)]
        assert got == in_order, cores
    monkeypatch.setattr(interleave, "cpu_count", lambda: 18)  # 2 files at a time from 18 cores
    got = [r.decode() for r in tpsd.TFRecordDataset(four_files, num_parallel_reads=tpsd.AUTOTUNE)]
    assert got == ["a0_r0", "a1_r0", "a0_r1", "a1_r1", "a0_r2", "a1_r2", "a2_r0", "a3_r0", "a2_r1", "a3_r1", "a2_r2", "a3_r2"]


def test_parallel_reads_with_file_sharding_match_the_golden_sets(four_files):
    case = golden_case("shard_tfrecord_parallel_reads_FILE_W2_sets")
    reader = tpsd.TFRecordDataset(four_files, num_parallel_reads=2)
    for worker in case["output"]["workers"]:
        sharded = reader.with_inputs(reader.filenames.shard(2, worker["worker"]))
        assert sorted(r.decode() for r in sharded) == worker["elements"]


def test_text_line_dataset_strips_line_endings(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"first\nsecond\r\n\nlast")
    assert list(tpsd.TextLineDataset(str(path))) == [b"first", b"second", b"", b"last"]


def test_text_line_dataset_reads_gzip_and_several_files(tmp_path):
    a = tmp_path / "a.txt.gz"
    a.write_bytes(gzip.compress(b"a1\na2\n"))
    b = tmp_path / "b.txt.gz"
    b.write_bytes(gzip.compress(b"b1\n"))
    ds = tpsd.TextLineDataset([str(a), str(b)], compression_type="GZIP")
    assert list(ds) == [b"a1", b"a2", b"b1"]


def test_text_line_dataset_matches_the_golden_file_sharding(tmp_path):
    case = golden_case("shard_textline7_AUTO_W3")
    names = []
    for i in range(7):
        path = tmp_path / f"u{i}.txt"
        path.write_text(f"u{i}_l0\n")
        names.append(str(path))
    reader = tpsd.TextLineDataset(names)
    for worker in case["output"]["workers"]:
        sharded = reader.with_inputs(reader.filenames.shard(3, worker["worker"]))
        assert [r.decode() for r in sharded] == worker["elements"]


def test_fixed_length_record_dataset_skips_header_and_footer(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"HH" + b"aaa" + b"b\x00\x00" + b"ccc" + b"F")
    ds = tpsd.FixedLengthRecordDataset(str(path), 3, header_bytes=2, footer_bytes=1)
    assert list(ds) == [b"aaa", b"b\x00\x00", b"ccc"]


def test_fixed_length_record_dataset_reads_zlib(tmp_path):
    path = tmp_path / "f.zz"
    path.write_bytes(zlib.compress(bytes(range(12))))
    ds = tpsd.FixedLengthRecordDataset(str(path), 4, compression_type="ZLIB")
    assert list(ds) == [bytes(range(0, 4)), bytes(range(4, 8)), bytes(range(8, 12))]


def test_fixed_length_record_dataset_batches_into_an_object_array(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(np.arange(8, dtype=np.uint8).tobytes())
    batch = next(iter(tpsd.FixedLengthRecordDataset(str(path), 2).batch(4)))
    assert batch.dtype == object and [np.frombuffer(r, np.uint8).tolist() for r in batch][3] == [6, 7]


def test_a_corrupt_record_raises_data_loss_after_every_good_record_once(tmp_path):
    records = [f"record-{i}".encode() * 10 for i in range(20)]
    path = write_tfrecords(tmp_path / "bad.tfrecord", records)
    data = bytearray(pathlib.Path(path).read_bytes())
    per = len(data) // 20
    data[per * 12 + 20] ^= 0xFF  # inside the payload of record 12
    pathlib.Path(path).write_bytes(bytes(data))
    it = iter(tpsd.TFRecordDataset(path))
    got = []
    with pytest.raises(DataLossError) as info:
        for r in it:
            got.append(r)
    assert got == records[:12]
    assert info.value.filename == path
    with pytest.raises(StopIteration):
        next(it)


def test_a_missing_file_is_reported_when_iterating(tmp_path):
    ds = tpsd.TFRecordDataset(str(tmp_path / "nope.tfrecord"))
    with pytest.raises(FileNotFoundError, match="nope.tfrecord"):
        list(ds)


def test_reader_argument_errors_name_the_reader_and_the_argument():
    with pytest.raises(ValueError, match="TFRecordDataset: compression_type must be one of"):
        tpsd.TFRecordDataset("a", compression_type="gzip")
    with pytest.raises(TypeError, match="TextLineDataset: `filenames` must be a string, a list of strings"):
        tpsd.TextLineDataset(3)
    with pytest.raises(TypeError, match="every file name must be a str, bytes or os.PathLike; item 1"):
        tpsd.TFRecordDataset(["a", 3])
    with pytest.raises(TypeError, match="must be a Dataset of scalar strings"):
        tpsd.TFRecordDataset(Dataset.range(3))
    with pytest.raises(ValueError, match="record_bytes must be >= 1; received record_bytes=0"):
        tpsd.FixedLengthRecordDataset("a", 0)
    with pytest.raises(ValueError, match="num_parallel_reads must be >= 1 or AUTOTUNE"):
        tpsd.TFRecordDataset("a", num_parallel_reads=0)
    with pytest.raises(ValueError, match="buffer_size must be >= 0"):
        tpsd.TFRecordDataset("a", buffer_size=-3)


def test_an_empty_file_list_is_an_empty_dataset():
    assert list(tpsd.TFRecordDataset([])) == []


def test_reading_records_then_parsing_examples(tmp_path):
    from tpustrategy._src.data.parsing.example_proto import make_example

    path = write_tfrecords(
        tmp_path / "ex.tfrecord",
        [make_example({"x": np.array([i, i + 1], np.float32), "y": np.array([i], np.int64)}).SerializeToString() for i in range(5)],
    )
    features = {"x": tpsd.FixedLenFeature([2], np.float32), "y": tpsd.FixedLenFeature([], np.int64)}
    ds = tpsd.TFRecordDataset(path).batch(2).map(lambda b: tpsd.parse_example(b, features))
    first = next(iter(ds))
    assert first["x"].tolist() == [[0.0, 1.0], [1.0, 2.0]] and first["y"].tolist() == [0, 1]
