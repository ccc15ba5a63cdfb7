"""Combining host values across the processes of a multi-host job.

Compiled programs span every process through the global mesh. Values that
live on the host (per-replica pieces built from NumPy, the eager path's
collectives) are combined here with ``jax.experimental.multihost_utils``,
which runs one small collective program over all processes. Every process
must call these functions in the same order (SPMD), as with any collective.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from tpustrategy._src.cluster.health import translate


def multi_process() -> bool:
    return jax.process_count() > 1


def barrier(name: str) -> None:
    """Waits until every process of the job reached the barrier ``name`` (nothing with one process)."""
    if multi_process():
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def allgather(x: Any) -> np.ndarray:
    """``[num_processes, ...]``: every process's ``x`` (same shape everywhere).

    Raises:
      UnavailableError: a peer process was lost (killed, crashed, or its own code
        raised); the message names it.
      DeadlineExceededError: a peer did not take part within the collective
        timeout (``tps.initialize(collective_timeout=...)``); the message names
        the processes that stopped answering, if any.
    """
    from jax.experimental import multihost_utils

    try:
        # jit on: the eager path's replica threads run under jax.disable_jit(), where
        # process_allgather's resharding program would not run and each process would
        # keep only its own part.
        with jax.disable_jit(False):
            return np.asarray(multihost_utils.process_allgather(np.asarray(x)))
    except jax.errors.JaxRuntimeError as e:
        named = translate(e)
        if named is e:
            raise
        raise named from e


def sum_over_processes(x: Any) -> np.ndarray:
    return allgather(x).sum(axis=0)


def concat_over_processes(x: np.ndarray, axis: int) -> np.ndarray:
    """Concatenates every process's ``x`` along ``axis`` (sizes along it may differ)."""
    x = np.asarray(x)
    sizes = allgather(np.int64(x.shape[axis])).astype(int).tolist()
    longest = max(sizes)
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, longest - x.shape[axis])
    gathered = allgather(np.pad(x, pad))
    parts = [np.take(g, np.arange(n), axis=axis) for g, n in zip(gathered, sizes)]
    return np.concatenate(parts, axis=axis)


def shapes_over_processes(shapes: list[tuple[int, ...]]) -> list[list[tuple[int, ...]]]:
    """Every process's list of ``shapes`` (ranks may differ), in process order.

    One all-gather of a padded ``[count, ranks..., dims...]`` row per process.
    """
    local = [tuple(int(d) for d in s) for s in shapes]
    flat = np.asarray([len(local)] + [len(s) for s in local] + [d for s in local for d in s], np.int64)
    width = int(allgather(np.int64(flat.size)).max())
    every = allgather(np.pad(flat, (0, width - flat.size)))
    per_process = []
    for row in every:
        count = int(row[0])
        ranks = row[1:1 + count].tolist()
        dims, found, pos = row[1 + count:], [], 0
        for r in ranks:
            found.append(tuple(int(d) for d in dims[pos:pos + r]))
            pos += r
        per_process.append(found)
    return per_process

