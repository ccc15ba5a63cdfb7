"""``strategy.gather``: every replica's component, concatenated along an axis.

Per-replica values are gathered from their stacked ``[R, ...]`` array, which
spans every process of a multi-host job, so every worker gets all replicas'
components (TensorFlow's rule). Ragged components are concatenated at their
true sizes; a value equal on every replica counts once per replica.

Components that cannot be concatenated (different ranks, or sizes that differ
outside the gathered axis) raise ``tps.errors.InvalidArgumentError`` with the
phrases TensorFlow's own errors have (``shape_mismatch_error``; the eager
path's ``ReplicaContext.all_gather`` uses it too).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.context import contracts
from tpustrategy._src.execution import host_values
from tpustrategy._src.replica import across_processes
from tpustrategy._src.replica.shapes import shape_mismatch_error
from tpustrategy._src.values import movement
from tpustrategy._src.values.distributed import DistributedValues, Mirrored


def _axis(axis: Any, rank: int) -> int:
    if isinstance(axis, bool) or not isinstance(axis, (int, np.integer)):
        raise TypeError(f"strategy.gather: `axis` must be an int. Received: axis={axis!r}.")
    if rank == 0:
        raise ValueError(
            "strategy.gather: per-replica values must have rank >= 1 to be concatenated "
            f"along axis {axis}; received scalars.\nFix: reshape them to [1] first (e.g. x[None])."
        )
    if not -rank <= axis < rank:
        raise ValueError(
            f"strategy.gather: `axis`={axis} is out of range for per-replica values of rank {rank}; "
            f"it must be in [{-rank}, {rank}).\nFix: pass an axis of the per-replica value, e.g. axis=0 "
            "(the batch axis)."
        )
    return int(axis) % rank


def gather_value(value: Any, axis: Any, num_replicas: int, split_sharding: Any) -> Any:
    """Gathers one leaf (a distributed value, a variable, or a plain value).

    The concatenation is one data-movement program (``values.movement``) whose result is
    replicated over the strategy's devices, so every process of a multi-host job can read it.
    """
    if contracts.is_distributed_variable(value):
        value = value.read_value()
    if isinstance(value, Mirrored) or not isinstance(value, DistributedValues):
        x = jnp.asarray(value.replicated_array if isinstance(value, Mirrored) else value)
        a = _axis(axis, x.ndim)
        return jnp.concatenate([x] * num_replicas, axis=a)
    if host_values.is_captured(value):
        # Closed over by a tps.function on a multi-host job: gathered now, a constant of the program.
        return jnp.asarray(host_values.evaluate_captured(
            lambda: _gather_per_replica(value, axis, split_sharding)))
    return _gather_per_replica(value, axis, split_sharding)


def _gather_per_replica(value: DistributedValues, axis: Any, split_sharding: Any) -> Any:
    if across_processes.multi_process() and not value.is_traced and not value.has_stacked:
        host_values.agree_on_shapes(value)  # every process stacks (and pads) the same global array
    shapes = value.shapes
    error = shape_mismatch_error("strategy.gather", shapes, axis)
    if error is not None:
        raise error
    a = _axis(axis, len(shapes[0]))
    stacked = value.stacked_array(split_sharding)
    replicated = NamedSharding(split_sharding.mesh, P()) if split_sharding is not None else None
    if not value.is_ragged:
        return movement.concatenated(stacked, a, replicated)
    return movement.ragged_concatenated(stacked, tuple(shapes), a, replicated)
