"""The contracts between packages: what lower layers may ask of a strategy, a replica
context and a distributed variable, by public names only.

The bottom of the package graph, so every package can name them without importing the
classes above it. Each is a ``runtime_checkable`` ``Protocol``; the user-facing classes
implement it publicly (``Strategy``, ``ReplicaContext``, ``tps.Variable``), and
``tests/test_package_graph.py`` fails when one package reads another's private member
instead. ``is_distributed_variable`` is the one cheap test (a per-leaf check in pytree
walks) for "a variable created under a strategy".
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol, runtime_checkable

import jax


@runtime_checkable
class StrategyContract(Protocol):
    """A strategy as the layers below ``strategy/`` see it."""

    @property
    def mesh(self) -> jax.sharding.Mesh:
        """Axis ``"replica"`` (and ``"core"`` when a replica has several cores)."""
        ...

    @property
    def num_replicas_in_sync(self) -> int:
        """Replicas over the whole job."""
        ...

    @property
    def replica_devices(self) -> tuple[jax.Device, ...]:
        """Every replica's device (its first core) over the whole job, in replica order."""
        ...

    @property
    def worker_devices(self) -> tuple[jax.Device, ...]:
        """This process's replica devices (each replica's first core), in replica order."""
        ...

    @property
    def first_local_replica(self) -> int:
        """The global id of this process's first replica."""
        ...

    @property
    def is_default(self) -> bool:
        """The default strategy (no scope entered): one replica, nothing distributed."""
        ...

    @property
    def supports_per_replica_input(self) -> bool:
        """Whether ``distribute_datasets_from_function`` takes ``InputReplicationMode.PER_REPLICA``."""
        ...

    def logical_device_scope(self, logical_device_id: int) -> contextlib.AbstractContextManager[Any]:
        """``ReplicaContext.experimental_logical_device``: ops inside go to that core of each replica."""
        ...


@runtime_checkable
class ReplicaContextContract(Protocol):
    """A replica context as the layers below ``replica/`` see it."""

    @property
    def is_default(self) -> bool:
        """The default replica context (no strategy: one replica, cross-replica APIs allowed)."""
        ...


@runtime_checkable
class EagerReplicaContract(ReplicaContextContract, Protocol):
    """A replica thread of the eager back end: its local index, device and rendezvous."""

    @property
    def local_replica_id(self) -> int:
        """This thread's replica among the process's replicas (0-based)."""
        ...

    @property
    def device(self) -> jax.Device:
        """This replica's device."""
        ...

    @property
    def rendezvous(self) -> Any:
        """The threads' meeting point (``replica.rendezvous.Rendezvous``)."""
        ...


@runtime_checkable
class DistributedVariableContract(Protocol):
    """A variable created under a strategy, as other packages see it."""

    is_distributed_variable: bool

    @property
    def kind(self) -> str:
        """``"mirrored"``, ``"sync_on_read"`` or ``"plain"`` (``variables.enums``)."""
        ...

    @property
    def strategy(self) -> Any:
        """The strategy it was created under (a ``StrategyContract``; None when plain)."""
        ...

    @property
    def core_spec(self) -> Any:
        """The ``PartitionSpec`` over a replica's cores when split to logical devices, else None."""
        ...

    @property
    def global_shape(self) -> tuple[int, ...]:
        """The shape of its one global array (``[R, ...]`` for a sync-on-read variable)."""
        ...

    def local_components(self) -> tuple[Any, ...]:
        """One array per local replica (``experimental_local_results``)."""
        ...


@runtime_checkable
class PullableIterator(Protocol):
    """A distributed iterator whose batches ``tps.function`` pulls as program inputs."""

    def tps_pull(self) -> Any:
        """The next batch, concretely (raises ``OutOfRangeError`` at the end of data)."""
        ...


def is_pullable(x: object) -> bool:
    """Whether ``x`` is an iterator ``tps.function`` pulls batches from (``PullableIterator``)."""
    return callable(getattr(type(x), "tps_pull", None))


def is_distributed_variable(x: object) -> bool:
    """Whether ``x`` is a variable created under a strategy (cheap: one attribute read)."""
    return getattr(x, "is_distributed_variable", False) is True


def is_default(obj: object) -> bool:
    """Whether a strategy or replica context is the default one (``is_default``; False when absent)."""
    return getattr(obj, "is_default", False) is True
