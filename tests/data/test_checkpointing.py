"""Checkpointable iterators: every transformation and reader resumes exactly from any state."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy._src.data.sources.writer import TFRecordWriter
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset


def ragged(x):
    return np.arange(int(x) % 4, dtype=np.int32)


PIPELINES = {
    "range": lambda: Dataset.range(3, 40, 3),
    "from_tensors": lambda: Dataset.from_tensors({"a": np.arange(3), "b": b"x"}),
    "from_tensor_slices": lambda: Dataset.from_tensor_slices((np.arange(12).reshape(6, 2), ["a", "b", "c", "d", "e", "f"])),
    "from_generator": lambda: Dataset.from_generator(lambda: iter(range(15)), output_types=np.int64),
    "list_files_like_shuffle": lambda: Dataset.from_tensor_slices([f"f{i}" for i in range(9)]).shuffle(9, seed=2),
    "zip": lambda: Dataset.zip((Dataset.range(10), Dataset.range(5, 30).shuffle(4, seed=1))),
    "enumerate": lambda: Dataset.from_tensor_slices(["a", "b", "c"]).enumerate(start=3),
    "map": lambda: Dataset.range(20).map(lambda x: x * x),
    "parallel_map": lambda: Dataset.range(60).map(lambda x: x + 1, num_parallel_calls=3),
    "parallel_map_autotune_then_batch": lambda: Dataset.range(50).map(lambda x: -x, num_parallel_calls=tpsd.AUTOTUNE).batch(7),
    "batch": lambda: Dataset.range(23).batch(5),
    "batch_drop_remainder": lambda: Dataset.range(23).batch(5, drop_remainder=True),
    "parallel_batch": lambda: Dataset.range(23).batch(4, num_parallel_calls=2),
    "padded_batch": lambda: Dataset.range(15).map(ragged).padded_batch(4),
    "unbatch": lambda: Dataset.range(17).batch(5).unbatch(),
    "unbatch_then_batch": lambda: Dataset.range(17).batch(5).unbatch().batch(3),
    "shard": lambda: Dataset.range(31).shard(4, 3),
    "repeat": lambda: Dataset.range(4).repeat(3),
    "repeat_forever": lambda: Dataset.range(3).repeat(),
    "shuffle": lambda: Dataset.range(30).shuffle(8, seed=5),
    "shuffle_reshuffle_each_iteration_repeat": lambda: Dataset.range(10).shuffle(10, seed=5).repeat(3),
    "shuffle_fixed_order_repeat": lambda: Dataset.range(10).shuffle(4, seed=5, reshuffle_each_iteration=False).repeat(2),
    "shuffle_unseeded": lambda: Dataset.range(10).shuffle(6).repeat(2),
    "repeat_then_shuffle": lambda: Dataset.range(6).repeat(3).shuffle(5, seed=9),
    "take": lambda: Dataset.range(100).take(7),
    "skip": lambda: Dataset.range(12).skip(5),
    "skip_all": lambda: Dataset.range(12).skip(-1),
    "filter": lambda: Dataset.range(40).filter(lambda x: x % 3 == 1),
    "flat_map": lambda: Dataset.range(6).flat_map(lambda x: Dataset.range(x)),
    "interleave": lambda: Dataset.range(1, 6).interleave(
        lambda x: Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4
    ),
    "parallel_interleave": lambda: Dataset.range(1, 8).interleave(
        lambda x: Dataset.range(x * 10, x * 10 + x), cycle_length=3, block_length=2, num_parallel_calls=3
    ),
    "interleave_of_shuffles": lambda: Dataset.range(4).interleave(
        lambda x: Dataset.range(x * 10, x * 10 + 5).shuffle(3, seed=1), cycle_length=2
    ),
    "prefetch": lambda: Dataset.range(40).prefetch(3),
    "prefetch_autotune": lambda: Dataset.range(40).map(lambda x: x * 2).prefetch(tpsd.AUTOTUNE),
    "cache": lambda: Dataset.range(8).cache().repeat(3),
    "cache_of_shuffle": lambda: Dataset.range(8).shuffle(8, seed=3).cache().repeat(3),
    "concatenate": lambda: Dataset.range(5).concatenate(Dataset.range(100, 104)),
    "with_options": lambda: Dataset.range(5).with_options(tpsd.Options()),
    "everything": lambda: Dataset.range(200)
    .shuffle(16, seed=1)
    .map(lambda x: (x, x % 5), num_parallel_calls=2)
    .filter(lambda x, y: y != 0)
    .batch(6)
    .prefetch(2)
    .unbatch()
    .batch(5, drop_remainder=True)
    .repeat(2),
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_every_transformation_resumes_exactly_from_every_state(name):
    assert_iterator_checkpointing(PIPELINES[name](), max_elements=120, num_checkpoints=40)


def test_shuffle_restored_in_a_fresh_pipeline_object_resumes_exactly():
    def build():
        return Dataset.range(30).shuffle(10, seed=7).repeat(2).batch(4)

    it = iter(build())
    for _ in range(6):
        next(it)
    state = json.loads(json.dumps(it.get_state()))
    rest = [b.tolist() for b in it]
    fresh = iter(build())
    fresh.set_state(state)
    assert [b.tolist() for b in fresh] == rest


@pytest.fixture
def record_files(tmp_path):
    paths = []
    for i in range(3):
        path = str(tmp_path / f"r{i}.tfrecord.gz")
        with TFRecordWriter(path, "GZIP") as w:
            for j in range(7 + i):
                w.write(f"f{i}-r{j}".encode() * (j + 1))
        paths.append(path)
    return paths


def test_tfrecord_reader_with_gzip_resumes_from_every_state(record_files):
    assert_iterator_checkpointing(tpsd.TFRecordDataset(record_files, compression_type="GZIP"), num_checkpoints=None)


def test_tfrecord_reader_with_parallel_reads_resumes_from_every_state(record_files):
    ds = tpsd.TFRecordDataset(record_files, compression_type="GZIP", num_parallel_reads=2)
    assert_iterator_checkpointing(ds, num_checkpoints=None)


def test_tfrecord_reader_over_shuffled_file_names_then_batch_resumes(record_files):
    files = Dataset.from_tensor_slices(record_files).shuffle(3, seed=4)
    ds = tpsd.TFRecordDataset(files, compression_type="GZIP").map(lambda r: r[:4]).batch(4)
    assert_iterator_checkpointing(ds.repeat(2), num_checkpoints=None)


def test_interleaved_readers_resume_from_every_state(record_files):
    files = Dataset.from_tensor_slices(record_files)
    ds = files.interleave(lambda f: tpsd.TFRecordDataset(f, compression_type="GZIP"), cycle_length=2, block_length=3)
    assert_iterator_checkpointing(ds, num_checkpoints=None)


def test_tfrecord_reader_resumes_inside_a_large_chunk(tmp_path):
    path = str(tmp_path / "big.tfrecord")
    with TFRecordWriter(path) as w:
        for i in range(3000):
            w.write(i.to_bytes(4, "little"))
    assert_iterator_checkpointing(tpsd.TFRecordDataset(path), max_elements=3000, num_checkpoints=12)
    assert_iterator_checkpointing(tpsd.TFRecordDataset(path).batch(512), num_checkpoints=None)


def test_text_line_reader_with_gzip_resumes_from_every_state(tmp_path):
    paths = []
    for i in range(2):
        path = tmp_path / f"t{i}.txt.gz"
        path.write_bytes(gzip.compress("".join(f"file{i} line{j}\n" for j in range(9)).encode()))
        paths.append(str(path))
    assert_iterator_checkpointing(tpsd.TextLineDataset(paths, compression_type="GZIP"), num_checkpoints=None)


def test_fixed_length_reader_with_gzip_resumes_from_every_state(tmp_path):
    path = tmp_path / "f.bin.gz"
    path.write_bytes(gzip.compress(b"HDR" + bytes(range(60)) + b"FT"))
    ds = tpsd.FixedLengthRecordDataset(str(path), 6, header_bytes=3, footer_bytes=2, compression_type="GZIP")
    assert len(assert_iterator_checkpointing(ds, num_checkpoints=None)) == 10


def test_state_is_json_and_a_finished_iterator_stays_finished():
    it = iter(Dataset.range(2))
    list(it)
    state = it.get_state()
    json.dumps(state)
    fresh = iter(Dataset.range(2))
    fresh.set_state(state)
    assert list(fresh) == []


def test_set_state_with_a_foreign_state_explains_the_fix():
    it = iter(Dataset.range(3).batch(2))
    with pytest.raises(ValueError, match="(?s)must be a dict with keys.*Fix: pass a state returned by get_state"):
        it.set_state({"iteration": 0, "done": False, "pipeline": {"next": 1}})
    with pytest.raises(ValueError, match="keys \\['done', 'iteration', 'pipeline'\\]"):
        it.set_state([1, 2])


def test_the_checkpointing_helper_reports_a_pipeline_that_does_not_resume():
    class Forgetful(tpsd.Dataset):
        def __init__(self):
            super().__init__(())

        def _make_iterator(self, ctx):
            from tpustrategy._src.data.core.iterator import NodeIterator

            class It(NodeIterator):
                i = 0

                def __next__(self):
                    if self.i >= 5:
                        raise StopIteration
                    self.i += 1
                    return np.int64(self.i)

                def get_state(self):
                    return {}

                def set_state(self, state):
                    pass

            return It()

    with pytest.raises(AssertionError, match="restored from the state before element 1: element 1 differs"):
        assert_iterator_checkpointing(Forgetful(), num_checkpoints=None)


def _counting_shuffle(calls, size=100_000, buffer_size=100):
    def identity(x):
        calls.append(int(x))
        return x

    return Dataset.range(size).map(identity).shuffle(buffer_size, seed=3)


def test_restoring_a_shuffle_late_in_an_epoch_produces_only_the_buffered_elements():
    for position in (0, 150, 60_000):
        calls: list[int] = []
        it = iter(_counting_shuffle(calls))
        for _ in range(position):
            next(it)
        state = json.loads(json.dumps(it.get_state()))
        expected = [int(next(it)) for _ in range(300)]
        calls.clear()
        fresh = iter(_counting_shuffle(calls))
        fresh.set_state(state)
        produced_by_restore = len(calls)
        assert [int(next(fresh)) for _ in range(300)] == expected
        # The input elements skipped on the way are never mapped; only the buffer is rebuilt.
        assert produced_by_restore == (0 if position == 0 else 100)


def test_a_shuffle_state_from_before_buffer_positions_were_recorded_still_resumes():
    def build():
        return Dataset.range(30).shuffle(8, seed=5)

    it = iter(build())
    seed = it.get_state()["pipeline"]["seed"]
    for _ in range(11):
        next(it)
    rest = [int(x) for x in it]
    legacy = {"iteration": 0, "done": False, "pipeline": {
        "seed": seed, "start": iter(Dataset.range(30)).get_state()["pipeline"], "produced": 11}}
    fresh = iter(build())
    fresh.set_state(legacy)
    assert [int(x) for x in fresh] == rest
