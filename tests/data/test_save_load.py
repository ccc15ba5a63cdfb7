"""Dataset.save / load / snapshot (TensorFlow's save_test, load_test, snapshot_test cases, in our format)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.errors import NotFoundError
from tpustrategy.testing import assert_iterator_checkpointing

D = tpsd.Dataset


def values(ds):
    out = []
    for e in ds:
        if isinstance(e, dict):
            out.append({k: (v if isinstance(v, bytes) else np.asarray(v).tolist()) for k, v in e.items()})
        elif isinstance(e, tuple):
            out.append(tuple(v if isinstance(v, bytes) else np.asarray(v).tolist() for v in e))
        else:
            out.append(e if isinstance(e, bytes) else np.asarray(e).tolist())
    return out


@pytest.mark.parametrize("compression", [None, "GZIP", "ZLIB"])
def test_save_then_load_gives_the_same_elements_in_order(tmp_path, compression):
    ds = D.range(42).map(lambda x: {"i": x, "s": b"x" * int(x % 5), "v": np.arange(x % 4, dtype=np.float32)})
    ds.save(str(tmp_path / "saved"), compression=compression)
    loaded = D.load(str(tmp_path / "saved"), compression=compression)
    assert values(loaded) == values(ds)
    assert loaded.cardinality() == 42
    assert loaded.element_spec["s"] == tpsd.TensorSpec((), object)
    assert loaded.element_spec["v"].shape == (None,)
    meta = json.loads((tmp_path / "saved" / "dataset_spec.json").read_text())
    assert meta["num_elements"] == 42 and meta["format"] == "tpsd-save-1"


def test_tuples_and_string_arrays_round_trip(tmp_path):
    ds = D.from_tensor_slices((np.arange(6).reshape(3, 2), np.array([[b"a", b"bb"], [b"", b"c"], [b"d", b"e"]], object)))
    ds.save(str(tmp_path))
    assert values(D.load(str(tmp_path))) == values(ds)


def test_shard_func_decides_the_files_and_reader_func_the_order(tmp_path):
    ds = D.range(10)
    ds.save(str(tmp_path), shard_func=lambda x: x % 3)
    assert sorted(os.listdir(tmp_path)) == ["dataset_spec.json", "shard_00000.tfrecord", "shard_00001.tfrecord",
                                            "shard_00002.tfrecord"]
    seq = D.load(str(tmp_path), reader_func=lambda shards: shards.flat_map(lambda d: d))
    assert [int(x) for x in seq] == [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]
    assert sorted(int(x) for x in D.load(str(tmp_path))) == list(range(10))


def test_load_checks_the_path_the_spec_and_the_compression(tmp_path):
    with pytest.raises(NotFoundError, match="holds no saved dataset"):
        D.load(str(tmp_path / "nothing"))
    D.range(3).save(str(tmp_path))
    assert [int(x) for x in D.load(str(tmp_path), element_spec=tpsd.TensorSpec((), np.int64))] == [0, 1, 2]
    with pytest.raises(ValueError, match="does not match the saved spec"):
        D.load(str(tmp_path), element_spec=tpsd.TensorSpec((), np.float32))
    with pytest.raises(ValueError, match="saved with"):
        D.load(str(tmp_path), compression="GZIP")
    with pytest.raises(ValueError, match="infinite"):
        D.range(3).repeat().save(str(tmp_path / "inf"))


def test_experimental_save_and_load_functions(tmp_path):
    tpsd.experimental.save(D.range(5), str(tmp_path))
    assert [int(x) for x in tpsd.experimental.load(str(tmp_path))] == list(range(5))


def test_a_loaded_dataset_resumes_from_every_state(tmp_path):
    D.range(2500).map(lambda x: (x, x * 2)).save(str(tmp_path), compression="GZIP")
    out = assert_iterator_checkpointing(D.load(str(tmp_path)).shuffle(50, seed=1), max_elements=3000,
                                        num_checkpoints=25)
    assert sorted(int(a) for a, _ in out) == list(range(2500))


def test_loaded_shards_are_split_across_pipelines_by_file(tmp_path):
    from tpustrategy.data.experimental import auto_shard_dataset

    D.range(12).save(str(tmp_path))
    parts = [sorted(int(x) for x in auto_shard_dataset(D.load(str(tmp_path)), 2, i)) for i in range(2)]
    assert parts == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 11]]


def test_elements_are_decoded_without_pickle(tmp_path):
    D.from_tensors(np.array([1.5, 2.5], np.float64)).save(str(tmp_path))
    data = (tmp_path / "shard_00000.tfrecord").read_bytes()
    assert b"pickle" not in data and b"<f8" in data


# ----------------------------------------------------------------- snapshot


def _counted(calls, n=20):
    def f(x):
        calls.append(int(x))
        return x * 10

    return D.range(n).map(f)


def test_snapshot_writes_on_the_first_pass_and_reads_afterwards(tmp_path):
    calls: list[int] = []
    snap = _counted(calls).snapshot(str(tmp_path))
    first = [int(x) for x in snap]
    assert first == [10 * i for i in range(20)]
    read = len(calls)  # 20, plus the calls that traced the element spec
    second = [int(x) for x in snap]
    assert second == first and len(calls) == read
    assert len(os.listdir(tmp_path)) == 1
    assert [int(x) for x in snap.repeat(2)] == first * 2 and len(calls) == read


def test_a_different_pipeline_gets_its_own_snapshot(tmp_path):
    list(D.range(5).snapshot(str(tmp_path)))
    assert [int(x) for x in D.range(7).snapshot(str(tmp_path))] == list(range(7))
    assert len(os.listdir(tmp_path)) == 2


def test_an_abandoned_pass_writes_no_snapshot(tmp_path):
    calls: list[int] = []
    snap = _counted(calls).snapshot(str(tmp_path), compression="GZIP")
    it = iter(snap)
    next(it)
    it.close()
    assert os.listdir(tmp_path) == []
    assert [int(x) for x in snap] == [10 * i for i in range(20)]


@pytest.mark.parametrize("written", [False, True])
def test_snapshot_resumes_from_every_state(tmp_path, written):
    snap = D.range(300).map(lambda x: x + 1).snapshot(str(tmp_path))
    if written:
        list(snap)
    assert_iterator_checkpointing(snap, num_checkpoints=20)


def test_snapshot_rejects_an_unknown_compression(tmp_path):
    with pytest.raises(ValueError, match="compression must be"):
        D.range(3).snapshot(str(tmp_path), compression="LZ4")
    assert [int(x) for x in D.range(3).apply(tpsd.experimental.snapshot(str(tmp_path)))] == [0, 1, 2]


# TensorFlow's snapshot_test, ported (read after the source files are gone; shard_func; reader_func).


def _records(tmp_path):
    names = []
    for f in range(10):
        p = tmp_path / f"tf-{f}.tfrecord"
        with tpsd.TFRecordWriter(str(p)) as w:
            for r in range(100):
                w.write(b"Record %d of file %d" % (r, f))
        names.append(str(p))
    return names


EXPECTED = [b"Record %d of file %d" % (r, f) for f in range(10) for r in range(100)]


def test_a_snapshot_is_read_once_its_source_files_are_gone(tmp_path):
    names = _records(tmp_path)
    snap_dir = str(tmp_path / "snap")
    assert list(tpsd.TFRecordDataset(names).snapshot(path=snap_dir)) == EXPECTED
    assert len(os.listdir(snap_dir)) == 1
    for n in names:
        os.remove(n)
    assert list(tpsd.TFRecordDataset(names).snapshot(path=snap_dir)) == EXPECTED


def test_snapshot_with_a_custom_shard_func_and_reader_func(tmp_path):
    names = _records(tmp_path)
    snap_dir = str(tmp_path / "snap")
    ds = tpsd.TFRecordDataset(names).snapshot(path=snap_dir, shard_func=lambda _: np.int64(0))
    assert list(ds) == EXPECTED
    (fp,) = os.listdir(snap_dir)
    assert sorted(os.listdir(os.path.join(snap_dir, fp))) == ["dataset_spec.json", "shard_00000.tfrecord"]
    reread = tpsd.TFRecordDataset(names).snapshot(
        path=snap_dir, reader_func=lambda datasets: datasets.interleave(lambda x: x, cycle_length=3))
    assert list(reread) == EXPECTED
