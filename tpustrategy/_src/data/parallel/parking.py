"""Parked pools: the idle worker pool of an iterator that ended normally, kept for the next one.

A worker's start costs ~0.5 s of CPU (a fresh interpreter importing NumPy and tpustrategy.data), so
the pool of a parallel map whose iterator ended is parked for `PARK_S` seconds; the next parallel
map with as many workers (the next epoch or pass, the same pipeline built again) adopts it and loads
its own function into it (`ProcessPool.retask`).
"""

from __future__ import annotations

import threading

from tpustrategy._src.data.parallel.processes import ProcessPool, WorkerStartError

# How long the pool of an iterator that ended normally waits for the next iterator. A worker's start
# costs ~0.5 s of CPU (a fresh interpreter importing NumPy and tpustrategy.data): a training loop's next
# epoch or pass, or the same pipeline built again, usually comes within seconds (on a loaded machine, an
# evaluation pass in between can take tens of seconds).
PARK_S = 30.0
_PARK_LOCK = threading.Lock()
_PARKED: dict[tuple[int, int | None], tuple[ProcessPool, threading.Timer]] = {}


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
    """Ends every parked pool now (tests that count child processes; a program that wants them gone)."""
    with _PARK_LOCK:
        parked = list(_PARKED.values())
        _PARKED.clear()
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
