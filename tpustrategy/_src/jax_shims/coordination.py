"""The job's coordination-service client and the state of ``jax.distributed``.

``jax.distributed.initialize`` keeps the job's coordination-service client (a
key-value store, barriers, counters shared by every process) and the values it
was started with in ``jax._src.distributed.global_state``: JAX has no public
accessor for the client. This module is the only place that reads that state.

Public alternatives: ``jax.distributed.is_initialized()`` (used here),
``jax.process_index()`` / ``jax.process_count()`` (they start the backend, so
they cannot serve checks made before it starts), and
``jax.experimental.multihost_utils`` for barriers and all-gathers over devices.
When the private name moves, ``check()`` raises and ``tests/jax_shims`` fails.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tpustrategy._src.jax_shims import supported

_WHERE = "jax._src.distributed.global_state"


@dataclasses.dataclass(frozen=True)
class RunningJob:
    """What ``jax.distributed.initialize`` was started with in this process."""

    coordinator_address: str | None
    num_processes: int
    process_id: int


def _state() -> Any:
    try:
        from jax._src import distributed
    except ImportError as err:  # pragma: no cover - only when JAX changes
        raise RuntimeError(_moved("jax._src.distributed")) from err
    state = getattr(distributed, "global_state", None)
    if state is None:  # pragma: no cover - only when JAX changes
        raise RuntimeError(_moved(_WHERE))
    return state


def _moved(name: str) -> str:
    return (f"tpustrategy: {name} moved in this JAX version; multi-process jobs need the "
            "coordination-service client it holds.\n" + supported.FIX)


def check() -> None:
    """Raises ``RuntimeError`` when the private names this module reads are gone."""
    state = _state()
    for field in ("client", "num_processes", "process_id", "coordinator_address",
                  "preemption_sync_manager"):
        if not hasattr(state, field):
            raise RuntimeError(_moved(f"{_WHERE}.{field}"))


def is_initialized() -> bool:
    """Whether this process joined a job (public: ``jax.distributed.is_initialized``)."""
    import jax

    return bool(jax.distributed.is_initialized())


def client() -> Any:
    """The coordination-service client of this process's job, or None (no job started).

    Read at every call, never cached: the client exists only after
    ``jax.distributed.initialize`` and is gone after ``jax.distributed.shutdown``.
    """
    return getattr(_state(), "client", None)


def running_job() -> RunningJob | None:
    """The values ``jax.distributed`` runs with (None before it is initialized)."""
    if not is_initialized():
        return None
    state = _state()
    return RunningJob(coordinator_address=state.coordinator_address,
                      num_processes=int(state.num_processes), process_id=int(state.process_id))


def preemption_sync_available() -> bool:
    """Whether JAX's preemption sync manager runs (a job was started with a client)."""
    state = _state()
    return state.client is not None and getattr(state, "preemption_sync_manager", None) is not None
