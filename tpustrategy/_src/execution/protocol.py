"""What the execution core needs of a strategy: a small ``Protocol``, not the strategy classes.

The execution package sits below ``strategy/`` (tests/test_package_graph.py): it builds
and calls programs over a strategy's mesh and never imports the user-facing classes.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import jax


@runtime_checkable
class ReplicaStrategy(Protocol):
    """The part of a strategy the execution core uses."""

    @property
    def mesh(self) -> jax.sharding.Mesh:
        """Axis ``"replica"`` (and ``"core"`` when a replica has several cores)."""

    @property
    def num_replicas_in_sync(self) -> int:
        """Replicas over the whole job."""

    @property
    def worker_devices(self) -> tuple[jax.Device, ...]:
        """This process's replica devices (each replica's first core), in replica order."""

    @property
    def first_local_replica(self) -> int:
        """The global id of this process's first replica."""

    @property
    def _is_default(self) -> bool:
        """The default strategy (no scope entered): one replica, nothing distributed."""
