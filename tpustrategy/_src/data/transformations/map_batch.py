"""``map(fn, num_parallel_calls).batch(n)`` fused: worker processes map *and* stack whole batches.

TensorFlow rewrites ``map`` followed by ``batch`` into one ``MapAndBatchDataset``
(``Options().experimental_optimization.map_and_batch_fusion``, on by default).
Here the fusion is what lets worker processes pay on few cores: a worker maps
the elements of whole batches and stacks each batch itself, so one array per
batch and component crosses the process boundary instead of one per element.

`MapBatchIterator` gives exactly the elements, errors and checkpoints of
``BatchIterator(ParallelMapIterator(...))``:

* Its state has that pair's layout (``{"input": {"input": s, "skip": k},
  "done": d}``), so a checkpoint restores into the fused or the unfused
  pipeline alike.
* With ``experimental_worker_processes=True`` the workers map from the first
  batch. By default the first batch is mapped in this process and timed; a
  function costing `FUSED_MIN_ELEM_S` of CPU per element or more moves to
  worker processes, which start in the background while this process keeps
  mapping batches; a cheaper one goes on in the unfused thread pipeline.
* A batch in which an element fails, or whose elements do not stack, hands
  the stream, from the start of that chunk, to the unfused thread pipeline
  (``delegate``): errors, the batches after them and ``ignore_errors`` behave
  exactly as without fusion (the chunk's elements are mapped again there).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.iterator import NodeIterator, check_state, pull
from tpustrategy._src.data.core.structure import stack
from tpustrategy._src.data.parallel import parking, processes
from tpustrategy._src.data.parallel.threads import cpu_count
from tpustrategy._src.data.transformations.calling import call_map_fn
from tpustrategy._src.data.transformations.parallel_map import ParallelMapIterator

# CPU time per element from which fused batches go to worker processes (measured on 2 cores:
# benchmarks/data_parallel_scaling.py and docs/pending/workers.md).
FUSED_MIN_ELEM_S = 10e-6
_API = "Dataset.batch"


class _Fallback(Exception):
    """This batch must be delivered by the unfused pipeline (an element failed or did not stack)."""


class MapBatchIterator(parking.PoolUser, NodeIterator):
    """Batches of ``batch_size`` mapped elements, mapped and stacked in worker processes.

    Args:
      it: the map's input iterator (owned).
      fn: the map function.
      batch_size, drop_remainder: the batch's arguments.
      workers: worker processes (the map's resolved ``num_parallel_calls``).
      mode: "on" (processes from the first element: waits for the pool) or "auto" (the first
        batch is mapped here and timed; processes if ``fn`` is costly).
      owner: the `MapDataset` (pickles ``fn``, warns, parks and adopts pools).
      intra_op: threads NumPy/BLAS may use inside one worker process.
      batcher: builds the unfused batch iterator over a map iterator (``BatchIterator``, passed in
        by ``batch``, which imports this module's importer).
      feed: where the input is a reader or an interleave of readers (``_record_feed``): makes, at an
        input state, the iterator of byte ranges of ``batch_size`` records that the workers read
        themselves (this process then neither reads nor sends the records); None (or a None it
        makes, or a `SpanFallback` it raises) keeps the reading here.
    """

    def __init__(self, it: NodeIterator, fn: Callable[..., Any], batch_size: int, drop_remainder: bool,
                 workers: int, mode: str, owner: Any, intra_op: int | None = None,
                 batcher: Callable[[NodeIterator], NodeIterator] | None = None,
                 feed: Callable[[Any], NodeIterator | None] | None = None):
        self._it, self._fn, self._n, self._drop = it, fn, batch_size, drop_remainder
        assert batcher is not None, "MapBatchIterator needs the unfused batch iterator's builder"
        self._batcher = batcher
        self._workers, self._mode, self._owner, self._intra_op = workers, mode, owner, intra_op
        self._delegate: NodeIterator | None = None
        self._feed_of = feed
        self._feed: NodeIterator | None = None  # the workers' input while they read the records
        self._pool: parking.PoolHandle | None = None
        self._runner: processes.ProcessMapRunner | None = None
        self._batches: list[tuple[int, Any]] = []
        self._pos = 0
        self._chunk_state: Any = None
        self._done = False  # the batch iterator's flag: a short batch was delivered, or the end
        self._started = False

    # ------------------------------------------------------------------ the stream

    def __next__(self) -> Any:
        if self._delegate is not None:
            return self._delegate.__next__()
        if self._done:
            raise StopIteration
        if self._pos >= len(self._batches):
            if not self._fill():
                self._done = True
                raise StopIteration
            if self._delegate is not None:
                return self._delegate.__next__()
        count, batch = self._batches[self._pos]
        self._pos += 1
        if count < self._n:  # the short last batch: the end of the stream
            self._done = True
            self._park()
            if self._drop:
                raise StopIteration
        return batch

    def _fill(self) -> bool:
        """The next chunk of batches in ``_batches``; False at the end (or after handing over)."""
        if not self._started:
            self._started = True
            self._chunk_state = self._it.get_state()
            if self._mode == "on":  # processes from the first element: wait for the pool
                self._launch_pool(wait=True)
        if self._runner is None and self._pool is not None and self._pool.ready():
            self._pool_ready()
        if self._pending_delegate is not None:
            self._delegate, self._pending_delegate = self._pending_delegate, None
            self._batches, self._pos = [], 0
            return True
        if self._runner is not None:
            return self._fill_from_processes()
        return self._fill_inline()

    def _fill_inline(self) -> bool:
        """Maps one batch in this process (timing it, while no pool is ready)."""
        state = self._it.get_state()
        try:
            elems = pull(self._it, self._n)
        except Exception:  # an input element's error: the unfused pipeline raises it in its place
            return self._hand_over(state)
        if not elems:
            return False
        fn = self._fn
        c0 = time.thread_time()
        try:
            outs = []
            for x in elems:
                try:
                    outs.append(call_map_fn(fn, x))
                except Exception as e:
                    raise _Fallback from e
            cpu = time.thread_time() - c0
            try:
                batch = stack(outs, _API)
            except Exception as e:
                raise _Fallback from e
        except _Fallback:
            return self._hand_over(state)
        self._chunk_state, self._batches, self._pos = state, [(len(elems), batch)], 0
        if len(elems) < self._n:
            pass  # the end of the stream: nothing left to decide for
        elif self._mode == "auto":
            self._decide(cpu / len(elems))
        return True

    def _decide(self, per_elem: float) -> None:
        """After the first batch: processes for a costly ``fn``, the unfused thread pipeline otherwise."""
        self._mode = "decided"
        if per_elem >= FUSED_MIN_ELEM_S and self._workers >= 2 and cpu_count() >= 2:
            self._launch_pool()
            if self._pool is not None:
                return
        self._delegate_at_boundary()

    def _fill_from_processes(self) -> bool:
        state, outs, err = parking.next_chunk(self)
        if type(outs) is processes.Batches:
            self._chunk_state, self._batches, self._pos = state, outs, 0
            if err is not None:  # not expected: a fused chunk that failed comes back element by element
                self._done = True
                self._end_processes()
                raise err
            return True
        if outs:  # an element failed or did not stack: the unfused pipeline redoes this chunk
            return self._hand_over(processes.restart_state(outs, state))
        if err is not None:  # a crashed worker, an error reading the input
            self._done = True
            self._end_processes()
            raise err
        self._park()
        self._close_feed()
        return False

    # ------------------------------------------------------------------ the unfused pipeline

    def _unfused(self) -> NodeIterator:
        return self._batcher(ParallelMapIterator(self._it, self._fn, self._workers, "off"))

    def _hand_over(self, state: Any) -> bool:
        """From the chunk that starts at ``state``, the unfused thread pipeline delivers the stream."""
        self._end_processes()
        self._close_feed()
        d = self._unfused()
        d.set_state({"input": {"input": state, "skip": 0}, "done": False})
        self._delegate = d
        self._batches, self._pos = [], 0
        return True

    def _delegate_at_boundary(self) -> None:
        """The unfused thread pipeline goes on after the batches already delivered or held."""
        d = self._unfused()
        d.set_state({"input": {"input": self._it.get_state(), "skip": 0}, "done": False})
        self._pending_delegate = d

    _pending_delegate: NodeIterator | None = None

    # ------------------------------------------------------------------ the pool

    def _launch_pool(self, wait: bool = False) -> None:
        """Adopts a parked pool or starts one: in the background (the batches go on in this process
        meanwhile), or ``wait`` for it."""
        payload = self._owner._worker_task(batch_size=self._n)
        if payload is None:  # warned: the unfused thread pipeline goes on from here
            self._delegate_at_boundary()
            return
        self._pool = pool = parking.PoolHandle.get(self, payload, self._workers, self._intra_op)
        assert pool is not None
        if wait:
            pool.wait()
        if pool.ready():
            self._pool_ready()

    def _pool_ready(self) -> None:
        """The pool started (or failed): the next chunks go to it (or stay here, after one warning)."""
        pool = self._pool
        assert pool is not None
        if self._pool_failed(self._owner):
            self._delegate_at_boundary()
            return
        # Started at a batch boundary: every batch read so far is mapped (or held in _batches).
        self._feed = self._open_feed(self._it.get_state())
        if self._feed is not None:  # one range (a batch) per element
            self._runner = processes.ProcessMapRunner(pool.pool, self._feed)
        else:
            self._runner = processes.ProcessMapRunner(pool.pool, self._it, self._n, unit=self._n)

    def _open_feed(self, state: Any) -> NodeIterator | None:
        """The workers' feed of record ranges at the input state ``state``, or None (the records are
        read here: no feed for this input, or it cannot start there)."""
        if self._feed_of is None:
            return None
        try:
            return self._feed_of(state)
        except processes.SpanFallback:
            return None

    def _close_feed(self) -> None:
        feed, self._feed = self._feed, None
        if feed is not None:
            feed.close()

    # ------------------------------------------------------------------ checkpoints

    def get_state(self) -> dict[str, Any]:
        if self._delegate is not None:
            return self._delegate.get_state()
        if self._chunk_state is None:
            return {"input": {"input": self._it.get_state(), "skip": 0}, "done": self._done}
        return {"input": {"input": self._chunk_state, "skip": self._pos * self._n}, "done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "done"), "batch")
        inner = check_state(state["input"], ("input", "skip"), "parallel map")
        if self._pending_delegate is not None:
            self._delegate, self._pending_delegate = self._pending_delegate, None
        if self._delegate is not None:
            self._delegate.set_state(state)
            return
        if self._runner is not None:
            self._runner.reset()  # chunks in flight are dropped; the pool stays
        feed = self._feed
        if feed is not None:
            try:
                feed.set_state(inner["input"])
                feed._skip(int(inner["skip"]))
            except processes.SpanFallback:  # not by ranges from there: the unfused pipeline goes on
                self._end_processes()
                self._close_feed()
                self._delegate = self._unfused()
                self._delegate.set_state(state)
                return
        else:
            self._it.set_state(inner["input"])
            self._it._skip(int(inner["skip"]))
        self._batches, self._pos = [], 0
        self._done = bool(state["done"])
        self._started = True
        self._chunk_state = (feed or self._it).get_state()
        if self._mode == "on" and self._pool is None and self._pending_delegate is None:
            self._launch_pool(wait=True)

    def close(self) -> None:
        self._done = True
        self._end_processes()
        self._close_feed()
        if self._delegate is not None:
            self._delegate.close()
        elif self._pending_delegate is not None:
            self._pending_delegate.close()
        else:
            self._it.close()
