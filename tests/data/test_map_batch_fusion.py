"""``map(fn, num_parallel_calls).batch(n)`` fused in worker processes (TensorFlow's map_and_batch_fusion).

The fused pipeline must give what the unfused one gives (``map_and_batch_fusion = False``, or
``experimental_worker_processes = False``): the same batches, errors in the same places, the same
``ignore_errors`` result, ``drop_remainder``, and checkpoints that restore into either. The map
functions live at module level so that the workers can import them.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest
from test_parallel_processes import (  # noqa: F401 - the autouse fixture checks no worker is left behind
    children,
    decode_like,
    no_process_left_behind,
    processes_on,
)

import tpustrategy.data as tpsd
from tpustrategy._src.data.core.iterator import NodeIterator
from tpustrategy._src.data.parallel import processes
from tpustrategy._src.data.transformations.batch import BatchIterator
from tpustrategy._src.data.transformations.map_batch import MapBatchIterator

Dataset = tpsd.Dataset
pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(not processes.AVAILABLE, reason="worker processes need Linux (memfd)"),
]


def image_and_pid(x):
    img, label = decode_like(x)
    return {"image": img, "label": label, "pid": np.int64(os.getpid())}


def fail_on_4_mod_5(x):
    if int(x) % 5 == 4:
        raise ValueError(f"bad element {int(x)}")
    return x * 10


def ragged_at_13(x):
    return np.zeros(2 if int(x) == 13 else 1, np.int64) + x


def exit_at_70(x):
    if int(x) == 70:
        os._exit(5)
    return x


def unfused(ds):
    opts = tpsd.Options()
    opts.experimental_optimization.map_and_batch_fusion = False
    return ds.with_options(opts)


def batches(ds):
    return [{k: np.asarray(v) for k, v in b.items()} if isinstance(b, dict) else np.asarray(b) for b in ds]


def values(got):
    return [{k: v.tolist() for k, v in b.items() if k != "pid"} if isinstance(b, dict) else b.tolist() for b in got]


def collect(it):
    out = []
    while True:
        try:
            out.append(("ok", np.asarray(next(it)).tolist()))
        except StopIteration:
            return out
        except Exception as e:
            out.append(("error", type(e).__name__, str(e)))


def fused_iterator(ds):
    it = iter(ds)
    return it, it._tree()


@pytest.mark.parametrize("drop_remainder", [False, True])
@pytest.mark.parametrize("n", [300, 256, 40])
def test_the_batches_equal_the_unfused_pipeline_and_come_from_the_workers(n, drop_remainder):
    ds = Dataset.range(n).map(image_and_pid, num_parallel_calls=2).batch(64, drop_remainder=drop_remainder)
    expected = values(batches(unfused(ds)))
    assert len(expected) == (n // 64 if drop_remainder else -(-n // 64))
    it, tree = fused_iterator(processes_on(ds))
    assert isinstance(tree, MapBatchIterator)
    got = batches(it)
    assert values(got) == expected
    assert all(b["image"].dtype == np.uint8 and b["image"].shape[1:] == (32, 32, 3) for b in got)
    pids = {int(p) for b in got for p in b["pid"]}
    assert os.getpid() not in pids and (pids or not got)  # processes from the first element (option True)


def test_a_worker_maps_and_stacks_whole_batches():
    task = processes.MapBatchTask(decode_like, 4)
    outs, fatal = task.map_chunk(list(range(10)))
    assert fatal is None and type(outs) is processes.Batches
    assert [count for count, _ in outs] == [4, 4, 2]
    images, labels = outs[2][1]
    assert images.shape == (2, 32, 32, 3) and images.dtype == np.uint8 and labels.dtype == np.int64
    assert np.array_equal(images[1], decode_like(9)[0]) and labels[1] == decode_like(9)[1]
    # A failing element, or elements that do not stack: element by element, for the parent to batch.
    outs, fatal = processes.MapBatchTask(fail_on_4_mod_5, 4).map_chunk(list(range(8)))
    assert type(outs) is list and isinstance(outs[4], processes.RemoteError) and outs[5] == 50
    outs, _ = processes.MapBatchTask(ragged_at_13, 4).map_chunk(list(range(12, 16)))
    assert type(outs) is list and [o.tolist() for o in outs] == [[12], [13, 13], [14], [15]]


def test_one_message_per_chunk_of_whole_batches_crosses_back():
    it = iter(processes_on(Dataset.range(2048).map(decode_like, num_parallel_calls=2).batch(128)))
    before = dict(processes.STATS)
    got = list(it)
    assert sum(len(b[1]) for b in got) == 2048
    mapped = processes.STATS["worker_elements"] - before["worker_elements"]
    messages = processes.STATS["shm_messages"] - before["shm_messages"]
    assert mapped == 2048  # every element mapped in a worker
    assert 1 <= messages <= 2048 // 128  # whole batches per message


def test_errors_are_in_the_same_places_and_ignore_errors_skips_the_same_batches():
    ds = Dataset.range(40).map(fail_on_4_mod_5, num_parallel_calls=2).batch(4)
    expected = collect(iter(unfused(processes_on(ds))))
    assert expected[:2] == [("ok", [0, 10, 20, 30]), ("error", "ValueError", "bad element 4")]
    assert collect(iter(processes_on(ds))) == expected
    kept = [b.tolist() for b in processes_on(ds.ignore_errors())]
    assert kept == [b.tolist() for b in unfused(processes_on(ds.ignore_errors()))]
    # Batches start after each failed element, as without fusion: [50, 60, 70, 80], [100, ...]
    assert kept[:3] == [[0, 10, 20, 30], [50, 60, 70, 80], [100, 110, 120, 130]]


def test_elements_that_do_not_stack_raise_batchs_own_error_in_place():
    ds = Dataset.range(40).map(ragged_at_13, num_parallel_calls=2).batch(8)
    expected = collect(iter(unfused(processes_on(ds))))
    got = collect(iter(processes_on(ds)))
    assert got == expected
    assert [g[0] for g in got] == ["ok", "error"]
    assert "Dataset.batch" in got[1][2]


def test_checkpoints_restore_into_the_fused_and_the_unfused_pipeline():
    ds = Dataset.range(700).map(decode_like, num_parallel_calls=2).batch(50)
    reference = [b[1].tolist() for b in unfused(ds)]
    for stop in (0, 3, 9, 14):
        it = iter(processes_on(ds))
        for _ in range(stop):
            next(it)
        state = it.get_state()
        for target in (processes_on(ds), unfused(ds)):
            again = iter(target)
            again.set_state(state)
            assert [b[1].tolist() for b in again] == reference[stop:]
        # and the other way: an unfused checkpoint restores into the fused pipeline
        u = iter(unfused(ds))
        for _ in range(stop):
            next(u)
        fused = iter(processes_on(ds))
        fused.set_state(u.get_state())
        assert [b[1].tolist() for b in fused] == reference[stop:]
        del it, again, u, fused


def test_a_running_fused_iterator_restored_drops_its_chunks_in_flight():
    ds = processes_on(Dataset.range(2000).map(decode_like, num_parallel_calls=2).batch(100))
    reference = [b[1].tolist() for b in unfused(ds)]
    it = iter(ds)
    for _ in range(3):
        next(it)
    state = it.get_state()
    for _ in range(8):
        next(it)
    it.set_state(state)
    assert [b[1].tolist() for b in it] == reference[3:]


def test_fusion_off_and_threads_only_keep_the_unfused_pipeline():
    ds = Dataset.range(100).map(image_and_pid, num_parallel_calls=2).batch(10)
    it = iter(unfused(processes_on(ds)))  # element-wise worker processes, batched here
    assert not isinstance(it._tree(), MapBatchIterator)
    assert os.getpid() not in {int(p) for b in it for p in b["pid"]}
    it = iter(processes_on(ds, False))  # threads of this process
    assert not isinstance(it._tree(), MapBatchIterator)
    assert {int(p) for b in it for p in b["pid"]} == {os.getpid()}
    # Without num_parallel_calls there is nothing to fuse.
    it = iter(processes_on(Dataset.range(10).map(image_and_pid).batch(5)))
    assert not isinstance(it._tree(), MapBatchIterator)


def cheap(x):
    return x + 1


def test_auto_mode_on_one_cpu_keeps_the_unfused_thread_pipeline(monkeypatch):
    from tpustrategy._src.data.transformations import map as map_module

    assert map_module.FUSED_PROCESSES_MIN_CPUS == 2
    monkeypatch.setattr(map_module, "cpu_count", lambda: 1)
    it, tree = fused_iterator(Dataset.range(100).map(image_and_pid, num_parallel_calls=2).batch(32))
    assert not isinstance(tree, MapBatchIterator)
    assert {int(p) for b in it for p in b["pid"]} == {os.getpid()}


def test_auto_mode_moves_a_costly_function_to_processes_and_keeps_a_cheap_one(monkeypatch):
    import time

    from tpustrategy._src.data.transformations import map as map_module
    from tpustrategy._src.data.transformations import map_batch

    monkeypatch.setattr(map_batch, "cpu_count", lambda: 4)
    monkeypatch.setattr(map_module, "cpu_count", lambda: 4)
    it = iter(Dataset.range(10**9).map(image_and_pid, num_parallel_calls=2).batch(32))
    pids = {int(p) for p in next(it)["pid"]}
    assert pids == {os.getpid()}  # the first batch is mapped here and timed
    deadline = time.monotonic() + 120
    while os.getpid() in pids and time.monotonic() < deadline:
        pids = {int(p) for p in next(it)["pid"]}
    assert os.getpid() not in pids  # then a worker maps them
    del it
    it, tree = fused_iterator(Dataset.range(100).map(cheap, num_parallel_calls=2).batch(32))
    got = [b.tolist() for b in it]
    assert got == [list(range(1 + 32 * i, min(101, 33 + 32 * i))) for i in range(4)]
    assert tree._pool is None and tree._delegate is not None  # on threads, no pool started


def test_a_crashed_worker_is_a_named_error_after_the_batches_before_it():
    it = iter(processes_on(Dataset.range(200).map(exit_at_70, num_parallel_calls=2).batch(10)))
    seen = []
    with pytest.raises(tpsd.experimental.WorkerCrashedError) as info:
        for b in it:
            seen.append(b.tolist())
    assert info.value.exitcode == 5
    assert seen == [list(range(10 * i, 10 * i + 10)) for i in range(len(seen))] and len(seen) <= 7
    with pytest.raises(StopIteration):
        next(it)


def test_the_public_names_are_the_ones_raised_and_warned():
    assert tpsd.experimental.WorkerCrashedError is processes.WorkerCrashedError
    assert tpsd.experimental.ThreadFallbackWarning is processes.ThreadFallbackWarning
    assert issubclass(tpsd.experimental.WorkerCrashedError, tpsd_internal_error())
    assert issubclass(tpsd.experimental.ThreadFallbackWarning, UserWarning)


def tpsd_internal_error():
    import tpustrategy as tps

    return tps.errors.InternalError


def test_a_pipeline_built_again_adopts_the_parked_pool():
    def build():
        return processes_on(Dataset.range(256).map(image_and_pid, num_parallel_calls=2).batch(64))

    first = {int(p) for b in build() for p in b["pid"]} - {os.getpid()}
    second = {int(p) for b in build() for p in b["pid"]} - {os.getpid()}
    assert first and second == first  # the same workers (the parked pool): no new start


def test_records_and_string_batches_travel_packed_and_come_back_equal():
    import socket

    from tpustrategy._src.data.parallel.channel import Channel, PackedBytes, pack_elements

    recs = [bytes([i % 256]) * (100 + i) for i in range(300)] + [b""]
    assert type(pack_elements(recs)) is PackedBytes
    assert pack_elements([b"a", 1] * 8) == [b"a", 1] * 8  # not all strings: unchanged
    column = np.empty(301, dtype=object)
    column[:] = recs
    grid = column[:300].reshape(2, 150)
    a, b = socket.socketpair()
    left, right = Channel(a), Channel(b)
    try:
        before = processes.STATS["shm_bytes"]
        left.send((7, pack_elements(recs), grid, [b"x", b"y"]))
        cid, got, got_grid, small = right.recv()
        assert processes.STATS["shm_bytes"] - before >= sum(map(len, recs))  # the strings went through shm
    finally:
        left.close()
        right.close()
    assert cid == 7 and type(got) is list and got == recs
    assert got_grid.dtype == object and got_grid.shape == (2, 150) and got_grid.ravel().tolist() == recs[:300]
    assert small == [b"x", b"y"]


class Unpicklable:
    def __init__(self, v):
        self.v = v
        self.lock = threading.Lock()  # pickle refuses locks


def value_of(x):
    return np.int64(x.v)


class ListIterator(NodeIterator):
    def __init__(self, items):
        self.items, self.i = items, 0

    def __next__(self):
        if self.i >= len(self.items):
            raise StopIteration
        self.i += 1
        return self.items[self.i - 1]

    def get_state(self):
        return {"i": self.i}

    def set_state(self, state):
        self.i = state["i"]


def test_elements_that_cannot_be_sent_are_mapped_here_with_the_same_batches():
    owner = Dataset.range(1).map(value_of, num_parallel_calls=2)
    it = MapBatchIterator(ListIterator([Unpicklable(i) for i in range(50)]), value_of, 8, False, 2, "on", owner,
                          batcher=lambda inner: BatchIterator(inner, 8, False))
    got = [b.tolist() for b in it]
    assert got == [list(range(i, min(50, i + 8))) for i in range(0, 50, 8)]
    assert it._delegate is not None  # handed to the unfused pipeline at the first chunk
    it.close()
