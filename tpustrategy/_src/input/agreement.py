"""Multi-host input: the processes agree on each step through the coordination service.

Each step of a distributed iterator, every process publishes a small row —
whether it still has data, and its replicas' piece sizes — under a key of
JAX's coordination-service key-value store, and reads every other process's
row. From the rows each process knows whether the step exists anywhere (the
epoch ends only when no process has data) and every replica's piece size
(so ragged steps get the same program everywhere). The store is independent
of the devices' collectives, so this runs on the prefetch thread while the
previous step computes, without racing the compiled programs' collectives.

A peer that does not publish its row in time raises ``DeadlineExceededError``
naming it. Keys are namespaced by iterator (creation order, the same on every
process of an SPMD program), by restart (``set_state``) and by step; a process
deletes its own key of step n-2 once it has read every row of step n-1 (by
then every process has read step n-2).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import numpy as np

from tpustrategy._src.errors import DeadlineExceededError

_iterators = itertools.count()
DEFAULT_TIMEOUT_S = 300.0


def _client() -> Any:
    from jax._src import distributed

    return distributed.global_state.client


class StepAgreement:
    """One iterator's per-step exchange of rows between the processes."""

    def __init__(self, timeout_s: float | None = None):
        import jax

        self._id = next(_iterators)
        self._restart = 0
        self._step = 0
        self._process = jax.process_index()
        self._count = jax.process_count()
        self._timeout_ms = int(1000 * (timeout_s or DEFAULT_TIMEOUT_S))

    def _key(self, step: int, process: int) -> str:
        return f"tps/input/{self._id}/{self._restart}/{step}/{process}"

    def restart(self) -> None:
        """Every process restarts its iterator at the same point (``set_state``): new key space."""
        self._restart += 1
        self._step = 0

    def exchange(self, row: list[int]) -> np.ndarray:
        """Publishes ``row`` and returns every process's row (``[num_processes, len(row)]``)."""
        client = _client()
        step = self._step
        client.key_value_set(self._key(step, self._process), json.dumps([int(v) for v in row]))
        rows = []
        for process in range(self._count):
            key = self._key(step, process)
            try:
                rows.append(json.loads(client.blocking_key_value_get(key, self._timeout_ms)))
            except Exception as e:  # the coordination service's deadline (a JaxRuntimeError)
                from tpustrategy._src.cluster import health

                monitor = health.current()
                if monitor is not None and monitor.fault is not None:
                    raise monitor.fault.exception() from e
                if "deadline" not in str(e).lower() and "timed out" not in str(e).lower():
                    raise
                raise DeadlineExceededError(
                    f"distributed input: process {process} did not publish its piece sizes for step {step} within "
                    f"{self._timeout_ms / 1000:g} s (process {self._process} of {self._count} waited); it may have "
                    "died, be stuck, or have created its distributed iterators in another order.\nFix: check "
                    f"process {process}'s log; every process must iterate its distributed datasets in the same order.",
                    missing=(process,),
                ) from e
        if step >= 2:
            try:
                client.key_value_delete(self._key(step - 2, self._process))
            except Exception:  # a best-effort clean-up; the job goes on without it
                pass
        self._step += 1
        return np.asarray(rows, np.int64)
