"""Parked pools: the idle worker pool of an iterator that ended normally, kept for the next one.

A worker's start costs ~0.5 s of CPU (a fresh interpreter importing NumPy and tpustrategy.data), so
the pool of a parallel map whose iterator ended is parked for `PARK_S` seconds; the next parallel
map with as many workers (the next epoch or pass, the same pipeline built again) adopts it and loads
its own function into it (`ProcessPool.retask`).
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from tpustrategy._src.data.parallel.processes import ProcessPool, WorkerStartError

# How long the pool of an iterator that ended normally waits for the next iterator. A worker's start
# costs ~0.5 s of CPU (a fresh interpreter importing NumPy and tpustrategy.data): a training loop's next
# epoch or pass, or the same pipeline built again, usually comes within seconds (on a loaded machine, an
# evaluation pass in between can take tens of seconds).
PARK_S = 30.0
_PARK_LOCK = threading.Lock()
_PARKED: dict[tuple[int, int | None], tuple[ProcessPool, threading.Timer]] = {}
# Pools still starting whose iterator ended (parked once started, unless the next iterator adopts them).
_STARTING: dict[tuple[int, int | None], PoolHandle] = {}


def park_pool(pool: ProcessPool) -> None:
    """Keeps an idle pool for `PARK_S` seconds: the next parallel map (the next epoch, the next pass,
    the same pipeline built again) with as many workers adopts it and skips the start-up."""
    key = (pool._n, pool._intra_op)
    timer = threading.Timer(PARK_S, _drop_parked, (pool,))
    timer.name = "tpsd-map-pool-park"
    timer.daemon = True
    with _PARK_LOCK:
        old, _PARKED[key] = _PARKED.get(key), (pool, timer)
    if old is not None:
        old[1].cancel()
        if old[0] is not pool:
            old[0].close()
    timer.start()


def _drop_parked(pool: ProcessPool) -> None:
    key = (pool._n, pool._intra_op)
    with _PARK_LOCK:
        got = _PARKED.get(key)
        if got is None or got[0] is not pool:
            return
        del _PARKED[key]
    pool.close()


def close_parked_pools() -> None:
    """Ends every parked pool now, and every pool still starting to be parked (tests that count child
    processes; a program that wants them gone)."""
    with _PARK_LOCK:
        parked = list(_PARKED.values())
        _PARKED.clear()
        starting = list(_STARTING.values())
        _STARTING.clear()
    for handle in starting:
        with handle._lock:
            handle._park_when_started = False
        handle.pool.close()  # a pool still starting is ended as it comes up
    for pool, timer in parked:
        timer.cancel()
        timer.join()
        pool.close()


def adopt_pool(task: bytes, n: int, intra_op: int | None) -> ProcessPool | None:
    """A parked pool of ``n`` live workers, loaded with ``task``; None if there is none (or it failed)."""
    with _PARK_LOCK:
        got = _PARKED.pop((n, intra_op), None)
    if got is None:
        return None
    pool, timer = got
    timer.cancel()
    if not pool.healthy(n, intra_op):
        pool.close()
        return None
    try:
        pool.retask(task)
    except WorkerStartError:
        return None  # closed by retask; the caller starts a fresh pool, which reports the error
    return pool


def _adopt_starting(n: int, intra_op: int | None) -> PoolHandle | None:
    """The handle of a pool of ``n`` workers still starting for an iterator that has ended (it would
    be parked once started), now given up by it; None if there is none."""
    with _PARK_LOCK:
        handle = _STARTING.pop((n, intra_op), None)
    if handle is None:
        return None
    with handle._lock:
        if handle._started:  # it has just come up: it is being parked (adopt_pool finds it)
            return None
        handle._park_when_started = False
    return handle


class PoolHandle:
    """The worker pool of one iterator: adopted from the parked ones (or from an ended iterator whose
    pool is still starting), or started in a background thread while the iterator goes on without it;
    closed with the iterator (its weakref finaliser, `close`, a crash), parked for the next iterator
    at a normal end -- once started, if it still is.

    Attributes:
      pool: the `ProcessPool`.
      error: what stopped it from starting (its `start` closed it), or None.
    """

    def __init__(self, owner: Any, pool: ProcessPool, start: bool, *, after: PoolHandle | None = None,
                 task: bytes = b""):
        self.pool = pool
        self.error: BaseException | None = None
        self._finalizer = weakref.finalize(owner, pool.close)
        self._lock = threading.Lock()
        self._started = not (start or after)
        self._park_when_started = False
        self._thread: threading.Thread | None = None
        if start or after:
            self._thread = threading.Thread(target=self._start, args=(after, task), name="tpsd-map-pool-start",
                                            daemon=True)
            self._thread.start()

    @classmethod
    def get(cls, owner: Any, task: bytes, n: int, intra_op: int | None, start: bool = True) -> PoolHandle | None:
        """A parked pool of ``n`` workers loaded with ``task`` (ready at once); else the pool an ended
        iterator left starting (ready once it has started and loaded ``task``); else, with ``start``, a
        fresh one starting in the background; else None.

        Each pass of a short stream (a benchmark's, an evaluation's) would otherwise start a pool of
        its own while the last pass's is still starting: twice or three times the start-up's CPU,
        spent on the cores the stream runs on.
        """
        pool = adopt_pool(task, n, intra_op)
        if pool is not None:
            return cls(owner, pool, start=False)
        starting = _adopt_starting(n, intra_op)
        if starting is not None:
            return cls(owner, starting.pool, start=False, after=starting, task=task)
        if start:
            pool = adopt_pool(task, n, intra_op)  # one that came up meanwhile
            if pool is not None:
                return cls(owner, pool, start=False)
        return cls(owner, ProcessPool(task, n, intra_op), start=True) if start else None

    def _start(self, after: PoolHandle | None, task: bytes) -> None:
        try:
            if after is None:
                self.pool.start()
            else:  # adopted while starting: it comes up, then takes this iterator's function
                after.wait()
                if after.error is not None:
                    raise after.error
                if self.pool.closed:
                    raise WorkerStartError("the worker pool was closed while it started")
                self.pool.retask(task)
        except BaseException as e:  # the iterator reports it (a warning) and goes on without workers
            self.error = e
        with self._lock:
            self._started = True
            park = self._park_when_started and self.error is None
        key = (self.pool._n, self.pool._intra_op)
        with _PARK_LOCK:
            if _STARTING.get(key) is self:
                del _STARTING[key]
        if park:
            park_pool(self.pool)

    def ready(self) -> bool:
        """Whether the pool has started (or failed to)."""
        return self._thread is None or not self._thread.is_alive()

    def wait(self) -> None:
        """Waits until the pool has started (or failed to)."""
        if self._thread is not None:
            self._thread.join()

    def usable(self) -> bool:
        """Started, and neither failed nor closed."""
        return self.ready() and self.error is None and not self.pool.closed

    def close(self) -> None:
        """Ends the workers (idempotent; a pool still starting is ended as it comes up)."""
        self._finalizer()

    def park(self) -> None:
        """At a normal end: the pool waits for the next iterator if it is idle and healthy (once
        started, if it still is: meanwhile the next iterator may adopt it as it is); otherwise it is
        closed."""
        with self._lock:
            if not self._started:
                self._finalizer.detach()
                self._park_when_started = True
                with _PARK_LOCK:
                    _STARTING[(self.pool._n, self.pool._intra_op)] = self
                return
        pool = self.pool
        if self.error is not None or pool.closed or any(w.cids or w.dead for w in pool.workers):
            self.close()
            return
        self._finalizer.detach()
        park_pool(pool)


class PoolUser:
    """Mixin of the iterators that feed a `PoolHandle` (``_pool``) through a runner (``_runner``)."""

    _pool: PoolHandle | None = None
    _runner: Any = None

    def _end_processes(self) -> None:
        """Ends the workers (also a pool still starting); the runner goes with them."""
        self._runner = None
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def _park(self) -> None:
        """At the normal end: the pool (once started) waits for the next iterator."""
        self._runner = None
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.park()

    def _pool_failed(self, owner: Any) -> bool:
        """Whether the started pool cannot run the function (then it is ended, and ``owner``, the
        map, warns once that the function stays in this process)."""
        pool = self._pool
        assert pool is not None
        if pool.usable():
            return False
        self._end_processes()
        owner._warn_threads(f"a worker process could not load it: {pool.error}")
        return True


def next_chunk(it: Any) -> tuple[Any, list[Any], BaseException | None]:
    """``it._runner``'s next chunk; an error getting it (a crash, Ctrl-C) ends ``it``'s workers and
    its stream (``it._done``) before it propagates."""
    assert it._runner is not None
    try:
        return it._runner.next_chunk()  # type: ignore[no-any-return]
    except BaseException:
        it._done = True
        it._end_processes()
        raise
