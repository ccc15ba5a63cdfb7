"""Fault diagnosis: what a symptom seen by one process says about its peers, in words.

The link set (``links``) sees symptoms — a link closed without a goodbye, a peer
silent for ``heartbeat_timeout``, a peer that said goodbye — and the execution
core sees raw JAX runtime errors. This module turns each into a ``Fault`` that
names the processes (``faults.Peer.describe()``) and says why, and ``translate``
turns a raw runtime error into the ``tps.errors`` exception it stands for. It
keeps no state and starts nothing: the monitor (``health``) decides when to ask
and records the first fault.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from tpustrategy._src.cluster import current, faults
from tpustrategy._src.cluster.faults import Fault, Peer
from tpustrategy._src.errors import DeadlineExceededError, UnavailableError


def fault(peers: Mapping[int, Peer], reporter: int, kind: str, culprits: Sequence[int],
          detail: str, peer_error: str | None = None) -> Fault:
    """The fault of ``kind`` that ``reporter`` found in ``culprits`` (described from ``peers``)."""
    return Fault(kind=kind, culprits=tuple(culprits),
                 described=tuple(peers[p].describe() for p in culprits),
                 addresses=tuple(peers[p].address for p in culprits),
                 detail=detail, reporter=reporter, peer_error=peer_error)


def own_error(peers: Mapping[int, Peer], task: int, error: BaseException) -> Fault:
    """The fault that process ``task``'s own uncaught ``error`` is, for its peers."""
    first = (str(error).strip().splitlines() or [""])[0][:300]
    text = f"{type(error).__name__}: {first}" if first else type(error).__name__
    return fault(peers, task, faults.ERROR, [task], f"failed: its own code raised {text}",
                 peer_error=text)


def lost(peers: Mapping[int, Peer], reporter: int, peer: int) -> Fault:
    """``peer``'s link closed without a goodbye."""
    return fault(peers, reporter, faults.LOST, [peer], "was lost: its connection to this "
                 "process closed without a goodbye (it was killed, crashed, or its host went "
                 "down)")


def silent(peers: Mapping[int, Peer], reporter: int, seconds: Mapping[int, float],
           heartbeat_timeout: float) -> Fault:
    """The peers in ``seconds`` (peer -> seconds of silence) sent nothing for too long."""
    return fault(peers, reporter, faults.STUCK, sorted(seconds),
                 f"has not answered for {max(seconds.values()):.0f} s "
                 f"(heartbeat_timeout={heartbeat_timeout:g} s): it is stuck (stopped, or hung "
                 "with the interpreter blocked), or its host is unreachable")


def behind_collective(peers: Mapping[int, Peer], reporter: int, kind: str,
                      departed: Sequence[int], quiet: Sequence[int]) -> Fault | None:
    """The peer fault behind a raw collective error of ``kind`` (``"lost"``/``"timeout"``).

    Args:
      peers: what is known about every process.
      reporter: this process.
      kind: what ``faults.classify`` says of the raw error.
      departed: peers that said goodbye and left.
      quiet: linked peers that have stopped answering (a few heartbeats missed).

    Returns:
      A lost collective with peers gone is theirs (they *left*); a timed-out one with
      quiet peers is theirs (*stuck*); else None (no one to blame).
    """
    if kind == faults.LOST and departed:
        return fault(peers, reporter, faults.LEFT, departed, "finished its program and "
                     "exited while this process still needed it in a collective")
    if kind != faults.LOST and quiet:
        return fault(peers, reporter, faults.STUCK, quiet, "did not reach a collective within "
                     "the collective timeout and has stopped answering this process")
    return None


def left_at_end(peers: Mapping[int, Peer], task: int, code: int | None, wait: float) -> Fault:
    """What process ``task`` tells its peers when it leaves the exit barrier before them.

    ``code`` is the code its program asked for with ``sys.exit`` (None at a normal end).
    """
    left = fault(peers, task, faults.LEFT, [task], f"{_ended(code)} and left after waiting "
                 f"{wait:g} s at the end for the other processes")
    return left if code is None else dataclasses.replace(left, fix=faults.DEFAULT_FIX[faults.LOST])


def late_at_end(peers: Mapping[int, Peer], task: int, late: Sequence[int], code: int | None,
                wait: float, shutdown_timeout: float) -> Fault:
    """The peers in ``late`` did not reach the exit barrier within ``wait`` s of ``task``."""
    late_fault = fault(peers, task, faults.MISSING, late,
                       f"did not reach the end of the program within {wait:g} s "
                       f"(shutdown_timeout={shutdown_timeout:g} s) after process {task} "
                       f"{_ended(code)}")
    return dataclasses.replace(late_fault, fix=_LATE_FIX)


def _ended(code: int | None) -> str:
    return "finished its program" if code is None else f"exited with code {code}"


_LATE_FIX = ("Fix: make every process run the same steps (same number of batches and "
             "collectives); raise tps.initialize(shutdown_timeout=...) if some processes "
             "legitimately finish much later than others.")


def translate(error: BaseException) -> BaseException:
    """Returns the ``tps.errors`` exception that a raw JAX runtime error stands for.

    Call it where a compiled program's result or a cross-process collective is
    awaited: ``except jax.errors.JaxRuntimeError as e: raise translate(e) from e``.
    A connection closed or reset by a peer becomes ``UnavailableError`` naming
    the lost process; a collective timeout becomes ``DeadlineExceededError``
    naming the processes that stopped answering. Errors that say nothing about
    peers (a shape error, an out-of-memory) come back unchanged.

    Args:
      error: the caught exception.

    Returns:
      The named exception (its ``__cause__`` is ``error``), or ``error`` itself.
    """
    if isinstance(error, (UnavailableError, DeadlineExceededError)):
        return error
    if not faults.is_runtime_error(error):
        return error
    kind = faults.classify(error)
    if kind is None:
        return error
    monitor = current.get()
    found: Fault | None = monitor.explain(kind) if monitor is not None else None
    if found is not None:
        named = found.exception()
    elif kind == faults.LOST:
        named = UnavailableError(
            "A collective across processes failed: the connection to a peer process closed "
            f"or was refused ({_first_line(error)}). Which process is not known here "
            "(tps.initialize was not used, or the peer had already said goodbye).\nFix: read "
            "the other processes' logs for the one that ended first; start the job with "
            "tps.initialize so that faults name the process.")
    else:
        named = DeadlineExceededError(
            "A collective across processes timed out (tps.initialize(collective_timeout=...)) "
            f"({_first_line(error)}), but every peer process is alive and answering: one of "
            "them runs different code (another number of steps or collectives) or is much "
            "slower.\nFix: make every process run the same steps in the same order; raise "
            "collective_timeout if a process is legitimately busy that long (compiling, "
            "loading data, writing a checkpoint).")
    named.__cause__ = error
    return named


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
