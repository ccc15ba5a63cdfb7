"""Model parallelism inside a replica: TensorFlow's logical-device API on ``TPUStrategy``.

With a ``DeviceAssignment`` of C > 1 cores per replica, the strategy's mesh
has axes ``("replica", "core")``; replica functions run manual over
``"replica"`` only, so the ``"core"`` axis is left to XLA's SPMD partitioner.
The three TensorFlow calls become sharding annotations over ``"core"``:

- ``experimental_split_to_logical_devices(x, partition_dimensions)``: split
  ``x`` over the replica's cores along the dimension whose entry is C;
- ``experimental_replicate_to_logical_devices(x)``: a copy on every core;
- ``experimental_assign_to_logical_device(x, i)``: TensorFlow pins ``x`` to core
  i; SPMD partitioning has no such placement, so ``x`` is replicated over the
  cores (and with ``experimental_spmd_xla_partitioning=True`` it raises, as in
  TensorFlow).

Inside a replica function (or ``tps.function``) they are
``jax.lax.with_sharding_constraint``; applied to a ``tps.Variable`` in
cross-replica context they re-lay its storage, so a weight split over C cores
keeps 1/C of it on each device, in every program that reads or writes it.

A leaf of ``strategy/``: it takes the strategy as an argument (or is mixed into
it) and imports no other strategy module.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.context import contracts, stack
from tpustrategy._src.values.mesh_axis import CORE_AXIS
from tpustrategy._src.variables import frames


def _is_variable(x: Any) -> bool:
    return contracts.is_distributed_variable(x) or (hasattr(x, "kind") and hasattr(x, "read_value") and hasattr(x, "core_spec"))


def _check_dimensions(strategy: Any, shape: tuple[int, ...], partition_dimensions: Any) -> list[int]:
    cores = strategy.num_cores_per_replica
    try:
        dims = [int(d) for d in partition_dimensions]
        if any(d != p or isinstance(p, bool) for d, p in zip(dims, partition_dimensions)):
            raise TypeError
    except (TypeError, ValueError):
        raise TypeError(
            "experimental_split_to_logical_devices: `partition_dimensions` must be a list of ints, one per "
            f"dimension of the tensor. Received: partition_dimensions={partition_dimensions!r}."
        ) from None
    if len(dims) != len(shape):
        raise ValueError(
            "Length of `partition_dimensions` must equal to the rank of `tensor.shape` "
            f"({len(shape)}). Received len(partition_dimensions)={len(dims)}."
        )
    for index, (size, split) in enumerate(zip(shape, dims)):
        if split < 1:
            raise ValueError(
                f"experimental_split_to_logical_devices: `partition_dimensions[{index}]` must be >= 1. "
                f"Received: {split}."
            )
        if size % split:
            raise ValueError(
                f"Tensor shape at `partition_dimensions[{index}]` must be divisible by corresponding value "
                f"specified by `partition_dimensions` ({split}). Received: {size}."
            )
    product = int(np.prod(dims)) if dims else 1
    if product != cores:
        raise ValueError(
            f"The product of `partition_dimensions` should be the same as the number of logical devices "
            f"(={cores}). Received `partition_dimensions`={dims}, and their product is {product}.\n"
            f"Fix: give one dimension {cores} and the others 1 (this strategy has {cores} cores per replica)."
        )
    if sum(1 for d in dims if d > 1) > 1:
        raise NotImplementedError(
            f"experimental_split_to_logical_devices: splitting several dimensions at once "
            f"(partition_dimensions={dims}) is not supported; the replica's cores form one mesh axis "
            f"(\"core\").\nFix: split one dimension over all {cores} cores, e.g. "
            f"{[cores if i == dims.index(max(dims)) else 1 for i in range(len(dims))]}."
        )
    return dims


def _apply(strategy: Any, x: Any, spec: P) -> Any:
    """Annotates (inside a trace) or re-lays out (a variable, a concrete array) ``x`` over the cores."""
    if strategy.num_cores_per_replica == 1:
        return x
    keras_state = getattr(x, "__dict__", {}).get("_tps_state")  # a Keras variable adopted under the scope
    if keras_state is not None:
        out = _apply(strategy, keras_state, spec)
        return x if out is keras_state else out
    sharding = NamedSharding(strategy.mesh, spec)
    frame = frames.current()
    if _is_variable(x) and frame is not None:
        x = x.read_value()
    if frame is not None and frame.level == "replica":
        from tpustrategy._src.execution import evaluate

        return evaluate.annotate(x, spec)
    if _is_variable(x):
        if x.kind == "sync_on_read":
            raise ValueError(
                f"experimental_split_to_logical_devices: {x.name!r} is a sync-on-read variable (one copy per "
                "replica); only mirrored variables can be laid out over a replica's cores."
            )
        x.core_spec = spec
        x._value = jax.device_put(x._value, sharding)
        return x
    if isinstance(x, jax.core.Tracer) or frames.current() is not None:
        return jax.lax.with_sharding_constraint(x, sharding)
    entry_ctx = _replica_context()
    if entry_ctx is not None and isinstance(entry_ctx, contracts.EagerReplicaContract):
        return x  # the eager path runs each replica on one device
    return jax.device_put(x, sharding)


def _replica_context() -> Any:
    entry = stack.current_entry()
    return None if entry is None else entry.replica_context


class LogicalDevices:
    """``TPUStrategy``'s logical-device methods (mixed into the strategy)."""

    def experimental_split_to_logical_devices(self, tensor: Any, partition_dimensions: Sequence[int]) -> Any:
        """Splits ``tensor`` over the replica's logical cores along the dimension given C.

        Args:
          tensor: an array (inside a replica function or ``tps.function``), or a
            mirrored ``tps.Variable`` (cross-replica: its storage is split).
          partition_dimensions: one int per dimension; their product must be the
            number of cores per replica, and each must divide its dimension.

        Returns:
          The annotated tensor (the variable itself for a variable).
        """
        shape = tuple(tensor.shape) if hasattr(tensor, "shape") else tuple(np.shape(tensor))
        dims = _check_dimensions(self, shape, partition_dimensions)
        spec = P(*[CORE_AXIS if d > 1 else None for d in dims])
        return _apply(self, tensor, spec)

    def experimental_replicate_to_logical_devices(self, tensor: Any) -> Any:
        """A copy of ``tensor`` on every logical core of the replica."""
        return _apply(self, tensor, P())

    def experimental_assign_to_logical_device(self, tensor: Any, logical_device_id: int) -> Any:
        """TensorFlow's placement of ``tensor`` on one core; here the value is replicated over the cores.

        Raises:
          ValueError: the id is out of range, or SPMD partitioning was asked for
            (TensorFlow refuses it there too).
        """
        cores = self.num_cores_per_replica
        if isinstance(logical_device_id, bool) or not isinstance(logical_device_id, (int, np.integer)) \
                or not 0 <= logical_device_id < cores:
            raise ValueError(
                "`logical_core_id` to assign must be lower then total number of logical devices per replica. "
                f"Received logical device id {logical_device_id!r} but there are only total of {cores} logical "
                "devices in replica."
            )
        if getattr(self, "_spmd", False):
            raise ValueError(
                f"Tensor {tensor!r:.80} cannot be assigned to a logical device when SPMD partitioning is "
                "enabled (experimental_spmd_xla_partitioning=True).\nFix: use "
                "experimental_split_to_logical_devices or experimental_replicate_to_logical_devices."
            )
        return _apply(self, tensor, P())


@contextlib.contextmanager
def logical_device_scope(strategy: Any, logical_device_id: int) -> Iterator[None]:
    """``experimental_logical_device(i)``: validated; SPMD partitioning places the work itself."""
    cores = strategy.num_cores_per_replica
    if isinstance(logical_device_id, bool) or not isinstance(logical_device_id, (int, np.integer)) \
            or not 0 <= logical_device_id < cores:
        raise ValueError(
            f"experimental_logical_device: `logical_device_id` must be in [0, {cores}). "
            f"Received: {logical_device_id!r}."
        )
    yield
