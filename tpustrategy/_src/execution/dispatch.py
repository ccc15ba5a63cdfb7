"""Bounds the number of compiled programs in flight.

On fake CPU devices, XLA's CPU collectives deadlock when dozens of programs
with collectives are queued without waiting (measured: > ~32 in flight locks
up the runtime). After each dispatch we keep one output of the program; when
more than ``TPS_MAX_IN_FLIGHT`` are outstanding we wait on the oldest. Waiting
on an old program costs nothing when it already finished, so on fast devices
the bound is free.
"""

from __future__ import annotations

import collections
from typing import Any

import jax

from tpustrategy._src import config
from tpustrategy._src.jax_shims.array_type import ARRAY_IMPL as _ArrayImpl

_pending: collections.deque[Any] = collections.deque()
_limit: int | None = None


def _max_in_flight() -> int:
    global _limit
    if _limit is None:
        if config.MAX_IN_FLIGHT is not None:
            _limit = int(config.MAX_IN_FLIGHT)
        else:
            _limit = 4 if jax.default_backend() == "cpu" else 32
    return _limit


def wait(arr: Any) -> None:
    """Blocks on one program's result; a lost or stuck peer surfaces as the named tps error."""
    if arr.is_deleted():
        return   # donated to a later program (Keras donates its state): that program waits on this one
    try:
        arr.block_until_ready()
    except jax.errors.JaxRuntimeError as e:
        from tpustrategy._src.cluster.health import translate

        named = translate(e)
        if named is e:
            raise
        raise named from e


def track(outputs: Any) -> None:
    """Records one dispatched program (by any one of its array outputs)."""
    for leaf in jax.tree_util.tree_leaves(outputs):
        if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer):
            track_array(leaf)
            return


def track_array(token: Any) -> None:
    """Records one dispatched program by one of its output arrays (tracers are ignored)."""
    if type(token) is not _ArrayImpl and (not isinstance(token, jax.Array) or isinstance(token, jax.core.Tracer)):
        return
    limit = _limit if _limit is not None else _max_in_flight()
    # deque.append / popleft are atomic: threads may record programs concurrently.
    _pending.append(token)
    while len(_pending) > limit:
        try:
            oldest = _pending.popleft()
        except IndexError:  # another thread took it
            return
        wait(oldest)
