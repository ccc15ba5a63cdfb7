"""Bounds the number of compiled programs in flight.

Why (XLA's CPU client, jaxlib 0.10): a program over several devices is launched by one task
per device on the client's thread pool, which has exactly as many threads as devices ("enough
threads for one collective"); each device admits at most 32 computations in flight, and a
launch beyond that blocks *its pool thread* until one finishes. With more than ~32 programs
queued behind a running one, up to 8 pool threads sit blocked in launches while the program
they wait for needs those threads for its own per-device parts: its all-reduce never gathers
every device, and after 40 s XLA aborts the process (SIGABRT, exit 134: "Expected 8 threads to
join the rendezvous, but only 5 of them arrived on time"). Measured on 8 CPU devices: 28
programs queued behind an 8 s program finish, 40 abort.

After each dispatch we keep one output of the program (a compiled ``Program`` keeps its smallest:
a kept output keeps its buffers, and a large one makes later programs write to fresh memory); when more than ``TPS_MAX_IN_FLIGHT``
are outstanding, the oldest half of them are let go and we wait on the newest of those (programs
over one device set end in the order they were dispatched), so a loop asks about readiness once
every ``limit // 2`` calls instead of every call (a readiness query on a CPU array over 8
devices costs about as much as the rest of a call's Python). Waiting on an old program costs
nothing when it already finished, so on fast devices the bound is free. A kept output may since have been
donated to a later program (Keras donates its state every step): a deleted array cannot be
waited on, so the wait goes to the oldest output still alive — a later program, whose end
implies the donated one's. (Skipping deleted outputs instead let a chain of donating programs
— each program's kept output donated to the next — pile up without bound and abort.)
"""

from __future__ import annotations

import collections
from typing import Any

import jax

from tpustrategy._src import config
from tpustrategy._src.jax_shims.array_protocol import ARRAY_IMPL as _ArrayImpl

_pending: collections.deque[Any] = collections.deque()
_limit: int | None = None


def _max_in_flight() -> int:
    global _limit
    if _limit is None:
        if config.MAX_IN_FLIGHT is not None:
            _limit = int(config.MAX_IN_FLIGHT)
        else:
            # The CPU client's bound protects its collectives (above); one device has none.
            _limit = 8 if jax.default_backend() == "cpu" and jax.device_count() > 1 else 32
    return _limit


def wait(arr: Any) -> None:
    """Blocks on one program's result; a lost or stuck peer surfaces as the named tps error.

    An array donated to a later program (deleted) is not waited on here: ``track_array``
    waits on a later program's output instead.
    """
    if not arr.is_deleted():
        _block(arr)


def _block(arr: Any) -> None:
    try:
        arr.block_until_ready()
    except jax.errors.JaxRuntimeError as e:
        _raise_named(e)


def _raise_named(e: Exception) -> None:
    """Re-raises a runtime error of a wait, as the named tps error when it is a peer's fault."""
    from tpustrategy._src.cluster.health import translate

    named = translate(e)
    if named is e:
        raise e
    raise named from e


def track(outputs: Any) -> None:
    """Records one dispatched program (by any one of its array outputs)."""
    for leaf in jax.tree_util.tree_leaves(outputs):
        if isinstance(leaf, jax.Array) and not isinstance(leaf, jax.core.Tracer):
            track_array(leaf)
            return


def tracker() -> tuple[collections.deque[Any], int, Any]:
    """``(pending, limit, settle)`` for generated call code (``specialised.compile_call``):
    ``pending.append(token)`` then ``settle()`` when ``len(pending) > limit`` is
    ``track_array(token)`` for a concrete array, without the call."""
    return _pending, _max_in_flight(), _settle


def _oldest_alive() -> Any:
    """The oldest recorded output not yet donated, or None."""
    for token in list(_pending):   # a snapshot: other threads may record or take tokens meanwhile
        if not token.is_deleted():
            return token
    return None


def track_array(token: Any) -> None:
    """Records one dispatched program by one of its output arrays (tracers are ignored)."""
    if type(token) is not _ArrayImpl and (not isinstance(token, jax.Array) or isinstance(token, jax.core.Tracer)):
        return
    # deque.append / popleft are atomic: threads may record programs concurrently.
    _pending.append(token)
    if len(_pending) > (_limit if _limit is not None else _max_in_flight()):
        _settle()


def _settle() -> None:
    """Over the limit: lets the oldest half of the recorded programs go, waiting on the newest
    of them."""
    half = (_limit if _limit is not None else _max_in_flight()) // 2 or 1
    popleft = _pending.popleft
    newest = None
    try:
        for _ in range(half):
            newest = popleft()
    except IndexError:  # another thread took it
        pass
    if newest is not None and not newest.is_deleted():
        try:  # ``_block``, inline: a loop waits here every ``half`` calls
            newest.block_until_ready()
        except jax.errors.JaxRuntimeError as e:
            _raise_named(e)
        return
    # The newest output let go was donated to a later program, which ends after it did: wait on
    # the oldest output still alive (kept in the queue: it still counts as in flight).
    alive = _oldest_alive()
    if alive is not None:
        _block(alive)
