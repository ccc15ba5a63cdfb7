"""``TFRecordDataset(files).batch(n).map(fn, parallel)`` read in worker processes (`sources.record_spans`).

Every case runs the pipeline with the workers forced on and compares it with the same pipeline
in this process (``experimental_worker_processes=False``): the elements, the errors and where
they come, and checkpoints taken in one and restored into the other. The map functions live at
module level so that the workers can import them.
"""

from __future__ import annotations

import gc
import os
import struct
import threading
import time
import warnings

import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tests.data.test_parallel_processes import children, no_process_left_behind, wait_for  # noqa: F401 (autouse)
from tpustrategy._src.data.parallel import channel, processes
from tpustrategy._src.data.parallel.threads import cpu_count
from tpustrategy._src.data.sources import record_spans

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not processes.AVAILABLE, reason="worker processes need Linux (memfd)"),
]


# --------------------------------------------------------------------------- files and pipelines


def record(i: int, size: int) -> bytes:
    """Record ``i``: its index, then ``size - 4`` bytes that depend on it."""
    return struct.pack("<I", i) + bytes((i * 7 + k) % 251 for k in range(size - 4))


def write(path, sizes, start=0) -> list[bytes]:
    recs = [record(start + k, s) for k, s in enumerate(sizes)]
    with tpsd.TFRecordWriter(str(path)) as w:
        for r in recs:
            w.write(r)
    return recs


def summary(batch):
    """A batch of records as arrays (big enough for shared memory): every byte and every length."""
    lengths = np.array([len(r) for r in batch], np.int64)
    return np.frombuffer(b"".join(batch), np.uint8).copy(), lengths


def failing_on_7(batch):
    if any(struct.unpack_from("<I", r)[0] == 7 for r in batch):
        raise ValueError("record 7 is in this batch")
    return summary(batch)


def exits_on_7(batch):
    if any(struct.unpack_from("<I", r)[0] == 7 for r in batch):
        os._exit(3)
    return summary(batch)


def pipeline(files, fn=summary, batch=8, drop=False, on=True):
    ds = tpsd.TFRecordDataset([str(f) for f in files]).batch(batch, drop_remainder=drop)
    ds = ds.map(fn, num_parallel_calls=2)
    opts = tpsd.Options()
    opts.threading.experimental_worker_processes = on
    return ds.with_options(opts)


def outcome(it, limit=10_000):
    """The elements an iterator gives, then the error that ended it (type and message) or None."""
    got = []
    try:
        for _ in range(limit):
            got.append(next(it))
    except StopIteration:
        return got, None
    except Exception as e:  # the error, where it came
        return got, (type(e), str(e).split("\n")[0])
    return got, None


def same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert len(x) == len(y)
        for u, v in zip(x, y):
            assert u.dtype == v.dtype and np.array_equal(u, v)


def used_workers(files, fn=summary, batch=8, drop=False):
    """The pipeline's outcome with workers forced, after checking that workers read the batches."""
    before = processes.STATS["worker_elements"]
    it = iter(pipeline(files, fn, batch, drop))
    got = outcome(it)
    assert processes.STATS["worker_elements"] > before, "no batch was read in a worker"
    return got


def uniform_files(tmp_path, size, counts):
    """Files of equal-sized records (the size guessed from the first header); file k's records are
    numbered from 100 * k."""
    files = [tmp_path / f"u{k}.tfrecord" for k in range(len(counts))]
    for k, (f, count) in enumerate(zip(files, counts)):
        write(f, [size] * count, start=100 * k)
    return files


def mixed_files(tmp_path, seed, max_size, counts):
    """Files of records of many sizes (framed in this process); a count of 0 is an empty file."""
    rng = np.random.default_rng(seed)
    files = [tmp_path / f"m{k}.tfrecord" for k in range(len(counts))]
    for k, (f, count) in enumerate(zip(files, counts)):
        write(f, rng.integers(4, max_size, count).tolist(), start=100 * k)
    return files


@pytest.fixture
def uniform(tmp_path):
    return uniform_files(tmp_path, 1200, [37, 42, 47])


@pytest.fixture
def mixed(tmp_path):
    """One empty file among them."""
    return mixed_files(tmp_path, 0, 3000, [29, 0, 51])


# --------------------------------------------------------------------------- the stream


@pytest.mark.parametrize("kind", ["uniform", "mixed"])
@pytest.mark.parametrize("batch,drop", [(8, False), (8, True), (50, False), (1, False)])
def test_batches_equal_the_unfused_pipeline(kind, batch, drop, request):
    files = request.getfixturevalue(kind)
    want = outcome(iter(pipeline(files, batch=batch, drop=drop, on=False)))
    got = used_workers(files, batch=batch, drop=drop)
    assert got[1] is None and want[1] is None
    same(got[0], want[0])
    sizes = [len(b[1]) for b in got[0]]
    assert all(s == batch for s in sizes[:-1]) and (sizes[-1] == batch if drop else sizes[-1] <= batch)


def test_batches_held_by_the_consumer_keep_their_values(uniform):
    """Results are lent from the workers' shared memory: holding every batch must neither change
    one nor stall the workers (how many results are lent and how many copied depends on the
    chunking; the channel's own test counts them)."""
    want = outcome(iter(pipeline(uniform, batch=2, on=False)))[0]
    got = used_workers(uniform, batch=2)[0]
    assert len(got) > 2 * channel.RESULT_SLOTS
    gc.collect()
    same(got, want)


def test_a_file_that_only_looks_uniform_is_read_right(tmp_path):
    """The first record's size divides the file, but the records differ: the workers find it out."""
    f = tmp_path / "looks_uniform.tfrecord"
    recs = write(f, [10] + [36] * 20)  # 26 + 20 * 52 bytes: a whole number of 26-byte records
    assert os.path.getsize(f) % (10 + 16) == 0
    got = used_workers([f], batch=4)
    want = outcome(iter(pipeline([f], batch=4, on=False)))
    assert got[1] is None
    same(got[0], want[0])
    assert sum(len(b[1]) for b in got[0]) == len(recs)


# --------------------------------------------------------------------------- errors


def corrupt(path, offset):
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("where", ["data", "length", "truncated"])
@pytest.mark.parametrize("kind", ["uniform", "mixed"])
def test_damage_is_reported_where_the_unfused_pipeline_reports_it(kind, where, request):
    files = request.getfixturevalue(kind)
    target = str(files[2])
    sizes = [len(r) + 16 for _, r in zip(range(40), tpsd.TFRecordDataset(target))]
    at = sum(sizes[:9])  # record 9 of the last file
    if where == "data":
        corrupt(target, at + 12 + 5)
    elif where == "length":
        corrupt(target, at + 2)
    else:
        os.truncate(target, at + 12 + 3)
    want = outcome(iter(pipeline(files, on=False)))
    got = outcome(iter(pipeline(files)))
    assert want[1] is not None and issubclass(want[1][0], tps.errors.DataLossError)
    assert got[1] == want[1]
    same(got[0], want[0])


def test_a_missing_file_is_reported_where_the_unfused_pipeline_reports_it(uniform, tmp_path):
    files = [uniform[0], tmp_path / "missing.tfrecord", uniform[1]]
    want = outcome(iter(pipeline(files, on=False)))
    got = outcome(iter(pipeline(files)))
    assert want[1] is not None and got[1] == want[1]
    same(got[0], want[0])


def test_a_function_error_comes_in_its_place(uniform):
    want = outcome(iter(pipeline(uniform, fn=failing_on_7, on=False)))
    got = outcome(iter(pipeline(uniform, fn=failing_on_7)))
    assert want[1] == (ValueError, "record 7 is in this batch") == got[1]
    same(got[0], want[0])


def test_a_crashed_worker_is_a_named_error(uniform):
    with pytest.raises(processes.WorkerCrashedError, match="exit code 3"):
        list(pipeline(uniform, fn=exits_on_7))


def test_a_function_that_cannot_go_to_a_worker_runs_here_with_one_warning(uniform):
    lock = threading.Lock()

    def with_lock(batch):
        with lock:
            return summary(batch)

    want = outcome(iter(pipeline(uniform, on=False)))[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = outcome(iter(pipeline(uniform, fn=with_lock)))
    assert got[1] is None
    same(got[0], want)
    assert [w.category for w in caught] == [processes.ThreadFallbackWarning]


# --------------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("kind", ["uniform", "mixed"])
@pytest.mark.parametrize("at", [0, 1, 5, 11])
@pytest.mark.parametrize("saved_on,restored_on", [(True, True), (True, False), (False, True)])
def test_a_checkpoint_resumes_exactly_in_either_pipeline(kind, at, saved_on, restored_on, request):
    files = request.getfixturevalue(kind)
    want = outcome(iter(pipeline(files, batch=6, on=False)))[0]
    it = iter(pipeline(files, batch=6, on=saved_on))
    head = [next(it) for _ in range(at)]
    state = it.get_state()
    it.close()
    again = iter(pipeline(files, batch=6, on=restored_on))
    again.set_state(state)
    rest, err = outcome(again)
    assert err is None
    same(head + rest, want)


def test_the_span_source_states_restore_into_the_reader(mixed):
    """A span source's state, at every batch, is a position the reader itself resumes from."""
    names = tpsd.Dataset.from_tensor_slices(np.array([str(f).encode() for f in mixed], dtype=object))
    src = record_spans.SpanSource(names._make_iterator(None), 5, False, 1 << 12)
    records = list(tpsd.TFRecordDataset([str(f) for f in mixed]))
    seen = 0
    while True:
        state = src.get_state()
        reader = tpsd.TFRecordDataset([str(f) for f in mixed])._make_iterator(None)
        reader.set_state(state["input"])
        assert list(reader) == records[seen:]
        try:
            span = next(src)
        except StopIteration:
            break
        got = record_spans.read_span(span)
        assert got == records[seen : seen + len(got)]
        seen += len(got)
    assert seen == len(records)


@pytest.mark.skipif(cpu_count() < 2, reason="by itself a map moves to worker processes from 2 CPUs")
def test_the_next_pass_adopts_the_pool_the_last_pass_parked(uniform):
    """By itself ("auto") a pipeline starts a pool only once its stream ran a while, but it adopts
    a parked pool -- the last pass's, the last epoch's -- from the first batch."""
    want = outcome(iter(pipeline(uniform, on=False)))[0]
    used_workers(uniform)  # forced on: its pool is parked at the end
    before = processes.STATS["worker_elements"]
    ds = tpsd.TFRecordDataset([str(f) for f in uniform]).batch(8).map(summary, num_parallel_calls=2)
    got = outcome(iter(ds))
    assert got[1] is None
    same(got[0], want)
    assert processes.STATS["worker_elements"] > before


@pytest.mark.skipif(cpu_count() < 2, reason="by itself a map moves to worker processes from 2 CPUs")
def test_passes_shorter_than_a_pool_start_share_one_pool(uniform, monkeypatch):
    """Each pass ends before its pool is up: the next pass takes the pool still starting instead of
    starting another one (a pool per pass spent two or three starts' CPU on the stream's cores)."""
    monkeypatch.setattr(record_spans, "POOL_AFTER_S", 0.0)  # a pool is wanted from the second batch on
    starts = []
    start = processes.ProcessPool.start

    def counted(pool):
        starts.append(pool)
        start(pool)

    monkeypatch.setattr(processes.ProcessPool, "start", counted)
    want = outcome(iter(pipeline(uniform, on=False)))[0]
    before = processes.STATS["worker_elements"]
    ds = tpsd.TFRecordDataset([str(f) for f in uniform]).batch(8).map(summary, num_parallel_calls=2)
    for _ in range(4):
        got = outcome(iter(ds))
        assert got[1] is None
        same(got[0], want)
    assert len(starts) == 1
    deadline = time.monotonic() + 60
    while processes.STATS["worker_elements"] == before and time.monotonic() < deadline:
        got = outcome(iter(ds))  # the pool comes up during one of these passes, which moves to it
        same(got[0], want)
    assert processes.STATS["worker_elements"] > before and len(starts) == 1


def test_no_worker_outlives_an_iterator_left_early(uniform):
    before = children()
    it = iter(pipeline(uniform, batch=4))
    next(it)
    next(it)
    assert children() - before  # the workers run
    del it  # a `break` out of the loop, then the iterator is garbage
    gc.collect()
    assert wait_for(lambda: not (children() - before)), "workers outlived their iterator"
