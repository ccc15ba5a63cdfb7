"""Rendezvous of the eager path's replica threads.

Each collective (``all_reduce``, ``all_gather``, ``merge_call``) is one
exchange: every replica thread deposits its value and waits until all have;
then each gets the list of all values. A thread that finishes its replica
function while others wait, or that arrives at a different kind of collective,
turns into TensorFlow's RuntimeError instead of a hang; a thread that never
arrives turns into ``DeadlineExceededError`` after the configured timeout.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tpustrategy._src.errors import DeadlineExceededError

MISMATCH_MESSAGE = (
    "Some replicas made a different number of replica_context().merge_call() calls."
)


class Rendezvous:
    """A reusable barrier that also exchanges one value per replica."""

    def __init__(self, num_replicas: int, timeout: float):
        self._n = num_replicas
        self._timeout = timeout
        self._cond = threading.Condition()
        self._slots: list[Any] = [None] * num_replicas
        self._arrived: set[int] = set()
        self._generation = 0
        self._results: tuple[int, list[Any]] | None = None
        self._finished: set[int] = set()
        self._error: BaseException | None = None
        # id(result) -> (replica, n-th collective of that replica): results of the same
        # collective on every replica are equal, so ``run`` returns them as Mirrored.
        self._invariant: dict[int, tuple[int, int]] = {}
        self._collectives = [0] * num_replicas

    def exchange(self, replica_id: int, kind: str, value: Any) -> list[Any]:
        """Deposits ``value`` and returns every replica's value, in replica order."""
        with self._cond:
            if self._error is not None:
                raise self._error
            if self._finished:
                self._fail(RuntimeError(MISMATCH_MESSAGE))
                raise self._error  # type: ignore[misc]
            generation = self._generation
            self._slots[replica_id] = (kind, value)
            self._arrived.add(replica_id)
            if len(self._arrived) == self._n:
                kinds = {k for k, _ in self._slots}
                if len(kinds) > 1:
                    self._fail(
                        RuntimeError(
                            f"{MISMATCH_MESSAGE} Replicas reached different collectives at the "
                            f"same point: {sorted(kinds)}. Every replica must call the same "
                            "collectives in the same order."
                        )
                    )
                    raise self._error  # type: ignore[misc]
                self._results = (generation, [v for _, v in self._slots])
                self._slots = [None] * self._n
                self._arrived = set()
                self._generation += 1
                self._cond.notify_all()
                return self._results[1]
            deadline = time.monotonic() + self._timeout
            while self._generation == generation and self._error is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    missing = sorted(set(range(self._n)) - self._arrived)
                    self._fail(
                        DeadlineExceededError(
                            f"eager replica threads: replicas {missing} did not reach the "
                            f"{kind} within {self._timeout:g} s (TPS_EAGER_TIMEOUT).",
                            missing=tuple(missing),
                        )
                    )
                    break
                self._cond.wait(remaining)
            if self._error is not None:
                raise self._error
            assert self._results is not None and self._results[0] == generation
            return self._results[1]

    def waiting(self) -> set[int]:
        """Replicas waiting at the current collective."""
        with self._cond:
            return set(self._arrived)

    def progressed(self) -> bool:
        """Whether a collective completed since the last call (for the caller's own timeout)."""
        with self._cond:
            seen = getattr(self, "_seen_generation", 0)
            self._seen_generation = self._generation
            return self._generation != seen

    def mark_invariant(self, replica_id: int, results: list[Any]) -> None:
        n = self._collectives[replica_id]
        self._collectives[replica_id] = n + 1
        for k, r in enumerate(results):
            self._invariant[id(r)] = (n, k)

    def invariant_token(self, value: Any) -> tuple[int, int] | None:
        return self._invariant.get(id(value))

    def finish(self, replica_id: int) -> None:
        """Marks a replica thread as done (normally or by an exception)."""
        with self._cond:
            self._finished.add(replica_id)
            if self._arrived and self._error is None:
                self._fail(RuntimeError(MISMATCH_MESSAGE))

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._cond.notify_all()

    @property
    def error(self) -> BaseException | None:
        return self._error
