"""A parallel ``map``'s iterator: worker threads, and worker processes for costly Python/NumPy
functions (`ParallelMapIterator`; the pool itself is `data.parallel.processes`).

Threads start mapping at once and measure the function's CPU time per element; from
`PROCESS_MIN_ELEM_S` (and where the dataset allows processes) a pool starts in the background
and the stream moves to it at a chunk boundary. Results come in input order with the input's
state before each chunk, so checkpoints are exact whichever side mapped them.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.iterator import NodeIterator, check_state
from tpustrategy._src.data.parallel import parking, processes
from tpustrategy._src.data.parallel.threads import (
    ChunkConsumer,
    ElementError,
    FailedChunk,
    WorkerOwner,
    read_chunk,
    shutdown_workers,
    start_thread,
    stop_workers,
)
from tpustrategy._src.data.transformations.calling import call_map_fn

PROCESS_MIN_ELEM_S = 20e-6  # CPU time per element from which worker processes pay off
_PROBE_MIN_ELEMS = 8
_PROBE_MIN_S = 0.002
# AUTOTUNE on threads measures the stream, as its consumer sees it, for TUNE_WINDOW_S with the worker
# threads and then as long mapping in the consumer's own thread, and keeps the faster. A function
# that holds the interpreter lock gains nothing from threads and pays their hand-offs (batches of
# 3 KB records, parse_example + decode_raw: 2 threads 240-256k records/s, inline 295-318k on 2 CPUs);
# one that releases it (large NumPy work) runs ~2x faster on 2 threads. The consumer must be waiting
# for the map (TUNE_WAIT_SHARE of the window) for the comparison to be made at all. The threads must
# win clearly (TUNE_INLINE_MARGIN): two 50 ms windows on a shared 2-core VM vary by +-15 %, and with
# 0.98 the threads were kept on one core in half the trials where the consumer's thread was faster
# (3 KB images, batched: inline 290-330k records/s, threads 200-300k).
TUNE_WINDOW_S = 0.05
TUNE_WAIT_SHARE = 0.2
TUNE_INLINE_MARGIN = 0.9  # inline is kept at this share of the threads' rate or more


class _MapShared:
    """State shared by a `ParallelMapIterator` and its worker threads."""

    def __init__(self, it: NodeIterator, fn: Callable[..., Any], workers: int, probe: bool = False,
                 min_elem_s: float = 0.0):
        self.cond = threading.Condition()
        self.input_lock = threading.Lock()
        self.it, self.fn = it, fn
        self.next_id = 0
        self.results: dict[int, tuple[Any, list[Any], BaseException | None]] = {}
        self.inflight = 0
        self.max_inflight = 2 * workers
        self.input_done = False
        self.stop = False
        self.chunk = 1
        self.threads: list[threading.Thread] = []
        self.active = workers  # worker i takes chunks only while i < active (0: the consumer maps)
        # Measuring fn (CPU time, not wall time: waiting for the GIL is not fn's cost) to choose processes.
        self.probe = probe
        self.min_elem_s = min_elem_s or PROCESS_MIN_ELEM_S
        self.probe_warm = True
        self.probe_n = 0
        self.probe_t = 0.0
        self.switch = False  # fn is costly: the rest of the stream goes to processes
        self.per_elem = 0.0
        self.pool: processes.ProcessPool | None = None
        self.pool_state: str | None = None  # "starting", "ready" (the threads stop reading), "failed"
        self.pool_error: BaseException | None = None


def _start_pool(sh: _MapShared) -> None:
    """Starts ``sh.pool`` (in a thread: the map threads go on meanwhile); at ready, the threads stop reading."""
    assert sh.pool is not None
    err: BaseException | None = None
    try:
        sh.pool.start()
    except BaseException as e:  # reported by the consumer (a warning), which stays on threads
        err = e
    with sh.cond:
        sh.pool_error = err
        sh.pool_state = "failed" if err is not None else "ready"
        if err is None:
            sh.input_done = True
        sh.cond.notify_all()


def _handover_due(sh: _MapShared) -> bool:
    return sh.switch and sh.pool_state != "starting"


def _probe(sh: _MapShared, n: int, cpu: float) -> None:
    """Adds a chunk's CPU time to the measurement; asks for processes when ``fn`` is costly enough."""
    with sh.cond:
        if not sh.probe:
            return
        if sh.probe_warm:  # the first call pays for imports and caches
            sh.probe_warm = False
            return
        sh.probe_n += n
        sh.probe_t += cpu
        if sh.probe_n >= _PROBE_MIN_ELEMS or sh.probe_t >= _PROBE_MIN_S:
            sh.probe = False
            sh.per_elem = sh.probe_t / max(1, sh.probe_n)
            if sh.per_elem >= sh.min_elem_s:
                sh.switch = True  # the consumer starts a pool; the threads go on until it is ready
                sh.cond.notify_all()


def map_chunk(fn: Callable[..., Any], elems: list[Any]) -> tuple[list[Any], BaseException | None]:
    """``fn`` on each element of a chunk: the outputs (a `FailedChunk` with an `ElementError` in
    the place of each element whose call raised an Exception), and an error that ends the stream
    (KeyboardInterrupt, SystemExit), which stops the chunk there."""
    outs: list[Any] = []
    failed = False
    for x in elems:
        try:
            outs.append(call_map_fn(fn, x))
        except Exception as e:  # fails only this element (TensorFlow's rule)
            outs.append(ElementError(e))
            failed = True
        except BaseException as e:
            return (FailedChunk(outs) if failed else outs), e
    return (FailedChunk(outs) if failed else outs), None


def _size_chunk(sh: _MapShared, wall: float, n: int) -> None:
    """Chunks of about a millisecond of mapping (a hand-off costs 100-200 µs)."""
    sh.chunk = int(min(1024, max(1, 0.001 / max(wall / max(1, n), 1e-7))))


# The trial's outcome per map function (its code: closures made by one ``def`` share it), so that
# the next epoch's iterator -- or a pipeline built again around the same function -- starts there.
_CHOICES: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _choice_key(fn: Any) -> Any:
    return getattr(fn, "__code__", fn)


class _Tuner:
    """AUTOTUNE's trial of the worker threads against mapping in the consumer's thread.

    Phases: "warm" (the first chunk: thread start, imports), "threads" (the threads' rate over
    `TUNE_WINDOW_S`), "draining" (the threads finish the chunks they took), "inline" (the
    consumer's own rate), "done". ``inline`` is the choice, kept by a restored iterator and
    remembered for the function (`_CHOICES`).
    """

    __slots__ = ("phase", "t0", "n", "waited", "threads_rate", "inline", "fn")

    def __init__(self, fn: Any) -> None:
        self.phase = "warm"
        self.t0 = 0.0
        self.n = 0
        self.waited = 0.0
        self.threads_rate = 0.0
        self.inline = False
        self.fn = fn
        try:
            known = _CHOICES.get(_choice_key(fn))
        except TypeError:  # not weakly referable: tried per iterator
            known = None
        if known is not None:
            self.phase, self.inline = "done", known

    def _remember(self) -> None:
        try:
            _CHOICES[_choice_key(self.fn)] = self.inline
        except TypeError:
            pass

    def tick(self, sh: _MapShared, n: int, waited: float, workers: int) -> None:
        """Counts a delivered chunk of ``n`` elements (``waited``: the consumer's wait for it)."""
        now = time.perf_counter()
        if self.phase == "warm":
            # The threads' rate counts what they map in the window: the elements already mapped
            # and waiting when it opens are not theirs to count (a backlog inflated the threads'
            # rate by up to a third, and kept threads on one core where the consumer's thread
            # was 20 % faster).
            self.phase, self.t0, self.n, self.waited = "threads", now, -_waiting(sh), 0.0
            return
        if self.phase not in ("threads", "inline"):
            return
        self.n += n
        self.waited += waited
        span = now - self.t0
        if span < TUNE_WINDOW_S:
            return
        if self.phase == "threads":
            if self.waited < TUNE_WAIT_SHARE * span:
                self.phase = "done"  # the consumer, not the map, sets the pace: threads stay
                return
            self.threads_rate = (self.n + _waiting(sh)) / span  # delivered, and mapped since
            self.phase = "draining"
            with sh.cond:
                sh.active = 0
                sh.cond.notify_all()
            return
        self.phase = "done"
        self.inline = self.n / span >= TUNE_INLINE_MARGIN * self.threads_rate
        self._remember()
        if self.inline:
            return
        with sh.cond:  # the threads were faster: they map again from here
            sh.active = workers
            sh.cond.notify_all()

    def start_inline(self) -> None:
        if self.phase == "draining":
            self.phase, self.t0, self.n = "inline", time.perf_counter(), 0


def _waiting(sh: _MapShared) -> int:
    """The elements the worker threads have mapped that the consumer has not taken yet."""
    with sh.cond:
        return sum(len(r[1]) for r in sh.results.values())


def _map_worker(sh: _MapShared, i: int) -> None:
    while True:
        with sh.cond:
            while not sh.stop and not sh.input_done and (sh.inflight >= sh.max_inflight or i >= sh.active):
                sh.cond.wait()
            if sh.stop or sh.input_done:
                return
            sh.inflight += 1
        with sh.input_lock:
            if sh.stop or sh.input_done:
                with sh.cond:
                    sh.inflight -= 1
                    sh.cond.notify_all()
                return
            if i >= sh.active:  # the consumer maps now (AUTOTUNE's trial or choice)
                with sh.cond:
                    sh.inflight -= 1
                    sh.cond.notify_all()
                continue
            cid = sh.next_id
            sh.next_id += 1
            state, elems, read_err = read_chunk(sh.it, sh.chunk)
            if read_err is not None or type(elems) is FailedChunk:  # delivered in its place
                with sh.cond:
                    sh.results[cid] = (state, elems, read_err)
                    if read_err is not None:
                        sh.input_done = True
                    sh.cond.notify_all()
                if read_err is not None:
                    return
                continue
            if not elems:
                sh.input_done = True
        t0 = time.perf_counter()
        c0 = time.thread_time() if sh.probe else 0.0
        outs, err = map_chunk(sh.fn, elems)
        _size_chunk(sh, time.perf_counter() - t0, len(outs))
        if sh.probe and outs:
            _probe(sh, len(outs), time.thread_time() - c0)
        with sh.cond:
            sh.results[cid] = (state, outs, err)
            if err is not None or not elems:
                sh.input_done = True
            sh.cond.notify_all()
        if err is not None or not elems:
            return


class ParallelMapIterator(ChunkConsumer, WorkerOwner, NodeIterator):
    """Maps chunks of elements in ``workers`` threads or processes, delivering them in order.

    Args:
      it: the input iterator (owned).
      fn: the map function.
      workers: the number of workers.
      mode: "off" (threads), "on" (processes from the start) or "auto"
        (threads, moving to processes when ``fn`` is measured to be costly).
      task: returns ``fn`` pickled for the workers, or None (after warning).
      intra_op: threads NumPy/BLAS may use inside one worker process.
      warn: warns (once per dataset) that ``fn`` stays on threads, and why.
      owner: unused (kept for the callers' signature).
      min_elem_s: in "auto" mode, the CPU time per element from which the
        stream moves to processes (default `PROCESS_MIN_ELEM_S`).
    """

    def __init__(self, it: NodeIterator, fn: Callable[..., Any], workers: int, mode: str = "off",
                 task: Callable[[], bytes | None] | None = None, intra_op: int | None = None,
                 warn: Callable[[str], None] | None = None, owner: Any = None, min_elem_s: float = 0.0,
                 tune: bool = False):
        self._it, self._fn, self._workers = it, fn, workers
        self._min_elem_s = min_elem_s
        self._owner = owner
        self._mode = mode if task is not None else "off"
        self._tune = _Tuner(fn) if tune and self._mode == "off" else None
        self._task, self._intra_op, self._warn = task, intra_op, warn
        self._sh: _MapShared | None = None
        self._finalizer: Any = None
        self._runner: processes.ProcessMapRunner | None = None
        self._pool_finalizer: Any = None
        self._take_id = 0
        self._chunk: list[Any] = []
        self._pos = 0
        self._chunk_state: Any = None
        self._done = False

    def _start(self) -> None:
        self._chunk_state = self._it.get_state()
        if self._mode == "on" and self._start_processes(1):
            return
        self._start_threads()

    def _start_threads(self) -> _MapShared:
        sh = _MapShared(self._it, self._fn, self._workers, probe=self._mode == "auto", min_elem_s=self._min_elem_s)
        self._take_id = 0
        tune = self._tune
        if tune is not None:
            if tune.inline:  # the consumer maps: no worker thread is needed
                sh.active = 0
                self._sh = sh
                self._finalizer = weakref.finalize(self, shutdown_workers, sh)
                return sh
            if tune.phase != "done":
                tune.phase = "warm"  # a trial cut short by set_state starts again
        for i in range(self._workers):
            sh.threads.append(start_thread(_map_worker, (sh, i), f"tpsd-map-{i}"))
        self._sh = sh
        self._finalizer = weakref.finalize(self, shutdown_workers, sh)
        return sh

    def _start_processes(self, chunk: int) -> bool:
        """Starts the worker processes (at a chunk boundary); False (threads from now on) if they cannot run ``fn``."""
        self._mode = "off"  # one try per iterator
        payload = self._task() if self._task is not None else None
        if payload is None:
            return False
        pool = parking.adopt_pool(payload, self._workers, self._intra_op)
        if pool is not None:
            self._runner = processes.ProcessMapRunner(pool, self._it, chunk)
            self._pool_finalizer = weakref.finalize(self, pool.close)
            return True
        pool = processes.ProcessPool(payload, self._workers, self._intra_op)
        try:
            pool.start()
        except processes.WorkerStartError as e:
            if self._warn is not None:
                self._warn(f"a worker process could not load it: {e}")
            return False
        self._runner = processes.ProcessMapRunner(pool, self._it, chunk)
        self._pool_finalizer = weakref.finalize(self, pool.close)
        return True

    def _end_processes(self) -> None:
        """Closes the pool (running or starting), if any."""
        self._runner = None
        if self._pool_finalizer is not None:
            self._pool_finalizer()  # runs pool.close once

    def _park(self) -> None:
        """At the normal end: hands an idle, healthy pool to the dataset for its next iterator."""
        runner = self._runner
        if runner is None:
            return
        pool = runner.pool
        if pool.closed or any(w.cids or w.dead for w in pool.workers):
            return
        self._runner = None
        self._pool_finalizer.detach()
        self._pool_finalizer = None
        parking.park_pool(pool)

    def _stop(self) -> None:
        sh = self._sh
        super()._stop()
        if sh is not None and sh.pool is not None and self._runner is None:
            self._end_processes()  # a pool still starting is not handed over

    def _launch_pool(self, sh: _MapShared) -> None:
        """Starts a pool in the background while the threads go on, or stays on threads (after one warning)."""
        payload = self._task() if self._task is not None else None
        if payload is None:
            self._mode, sh.switch = "off", False
            return
        pool = parking.adopt_pool(payload, self._workers, self._intra_op)
        if pool is not None:
            self._pool_finalizer = weakref.finalize(self, pool.close)
            with sh.cond:
                sh.pool, sh.pool_state, sh.input_done = pool, "ready", True
                sh.cond.notify_all()
            return
        pool = processes.ProcessPool(payload, self._workers, self._intra_op)
        self._pool_finalizer = weakref.finalize(self, pool.close)
        with sh.cond:
            sh.pool, sh.pool_state = pool, "starting"
        sh.threads.append(start_thread(_start_pool, (sh,), "tpsd-map-pool-start"))

    def _switch_step(self, sh: _MapShared) -> bool:
        """One step of moving to processes (launch, give up, stop the threads, hand over); True if it acted."""
        if sh.pool_state is None:
            self._launch_pool(sh)
            return True
        if sh.pool_state == "starting":
            return False  # the threads go on meanwhile
        if sh.pool_state == "failed":
            self._mode, sh.switch = "off", False
            self._end_processes()
            if self._warn is not None:
                self._warn(f"a worker process could not load it: {sh.pool_error}")
            return True
        if sh.threads:  # ready: the threads finish the chunks they took (their results stay in order)
            stop_workers(sh)
            return True
        if self._take_id in sh.results:
            return False  # deliver what the threads mapped first
        # Every chunk read before the pool was ready is delivered: the rest goes to processes.
        self._finalizer.detach()
        self._sh = None
        assert sh.pool is not None
        chunk = int(processes.TARGET_CHUNK_S / max(sh.per_elem, 1e-7))
        self._runner = processes.ProcessMapRunner(sh.pool, self._it, chunk)
        return True

    def _fill(self) -> bool:
        if self._done:
            return False
        while True:
            if self._runner is not None:
                return self._fill_from_processes()
            sh = self._sh
            if sh is None:
                self._start()
                continue
            if sh.switch and self._switch_step(sh):
                continue
            tune = self._tune
            if tune is not None and sh.active == 0:
                inline = self._fill_inline(sh, tune)
                if inline is not None:
                    return inline
            t_wait = time.perf_counter() if tune is not None else 0.0
            with sh.cond:
                while self._take_id not in sh.results and not sh.stop and not _handover_due(sh):
                    sh.cond.wait()
                got = sh.results.pop(self._take_id, None)
                if got is not None:
                    self._take_id += 1
                    sh.inflight -= 1
                    sh.cond.notify_all()
            if got is not None:
                if tune is not None and tune.phase != "done":
                    tune.tick(sh, len(got[1]), time.perf_counter() - t_wait, self._workers)
                break
            if sh.switch:
                continue
            self._done = True
            return False
        state, outs, err = got
        return self._take(state, outs, err)

    def _fill_inline(self, sh: _MapShared, tune: _Tuner) -> bool | None:
        """The next chunk read and mapped in this thread (the workers idle), or None while the
        workers still owe chunks they took (they are delivered first, in order)."""
        with sh.input_lock:  # a worker that took a turn before active fell to 0 backs off here
            if self._take_id != sh.next_id:
                return None
            state, elems, read_err = read_chunk(self._it, sh.chunk)
        tune.start_inline()
        if read_err is not None or type(elems) is FailedChunk or not elems:
            return self._take(state, elems, read_err)
        t0 = time.perf_counter()
        outs, err = map_chunk(self._fn, elems)
        _size_chunk(sh, time.perf_counter() - t0, len(outs))
        if tune.phase != "done":
            tune.tick(sh, len(outs), 0.0, self._workers)
        return self._take(state, outs, err)

    def _fill_from_processes(self) -> bool:
        state, outs, err = parking.next_chunk(self)
        if err is not None and not outs:
            self._end_processes()
        return self._take(state, outs, err)

    def _take(self, state: Any, outs: list[Any], err: BaseException | None) -> bool:
        if err is not None:
            if outs:
                self._pending = err
            else:
                self._done = True
                raise err
        elif not outs:
            self._done = True
            self._park()
            return False
        self._set_chunk(state, outs)
        return True

    def _raise_pending(self) -> None:
        self._end_processes()
        super()._raise_pending()

    def get_state(self) -> dict[str, Any]:
        return self._position(self._sh is not None or self._runner is not None)

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "skip"), "parallel map")
        self._stop()
        if self._runner is not None:
            self._runner.reset()  # chunks in flight are dropped; the pool stays
        self._restore_position(state)
        if self._runner is not None:
            self._chunk_state = self._it.get_state()

    def close(self) -> None:
        self._end_processes()
        super().close()
