"""``strategy.reduce``: combine a distributed value across replicas (cross-replica).

``axis=None`` reduces element-wise across replicas (shapes must match).
``axis=k`` (int, tuple or list) first reduces inside each replica, then across
replicas; MEAN divides by the true number of elements, so ragged per-replica
batches (and empty pieces) are weighted by their examples, as in TensorFlow.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.context import contracts
from tpustrategy._src.execution import host_values
from tpustrategy._src.reduce_op import ReduceOp
from tpustrategy._src.replica import across_processes
from tpustrategy._src.replica.collectives import default_float_dtype
from tpustrategy._src.values.distributed import DistributedValues, Mirrored
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS


def _axis_type_error(axis: Any, found: Any) -> TypeError:
    # TensorFlow's first line (programs match on it), then what was received and the fix.
    return TypeError(
        f"Expected `axis` to be an integer, tuple or list not: {type(found)}\n"
        f"strategy.reduce: Received: axis={axis!r}. `axis` names the dimensions of each replica's value "
        "reduced inside the replica before the values are combined across replicas.\nFix: pass "
        "axis=None to combine across replicas only, or an int (axis=0: the batch axis) or a tuple of ints.")


def _canonical_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        axes: tuple[Any, ...] = (axis,)
    elif isinstance(axis, (tuple, list)):
        axes = tuple(axis)
    else:
        raise _axis_type_error(axis, axis)
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise _axis_type_error(axis, a)
        if not -ndim <= a < ndim:
            raise ValueError(
                f"strategy.reduce: Invalid reduction dimension {a} for input with {ndim} "
                f"dimensions. Received: axis={axis!r}; the per-replica values have rank {ndim}.\n"
                f"Fix: pass an axis in [{-ndim}, {ndim}) (axis=0 is the batch axis), or axis=None to "
                "reduce across replicas only."
            )
        out.append(int(a) % ndim)
    return tuple(sorted(set(out)))


def _mean_dtype(dtype: Any) -> Any:
    return dtype if jnp.issubdtype(dtype, jnp.inexact) else default_float_dtype()


def reduce_value(op: ReduceOp, value: Any, axis: Any, num_replicas: int, split_sharding: Any = None) -> Any:
    """Reduces one leaf (distributed or not).

    Args:
      op: SUM or MEAN.
      value: the leaf.
      axis: None, or the axes reduced inside each replica first.
      num_replicas: the strategy's replica count.
      split_sharding: the strategy's replica-axis sharding: host-built
        per-replica values are stacked there, so every result lives on the mesh.
    """
    if isinstance(value, DistributedValues) and value.replica_tracer is not None:
        return _reduce_traced(op, value.replica_tracer, axis, num_replicas)
    if isinstance(value, Mirrored):
        return _reduce_plain(op, value.replicated_array, axis, num_replicas)
    if isinstance(value, DistributedValues):
        if host_values.is_captured(value):
            # Closed over by a tps.function on a multi-host job: reduced now, a constant of the program.
            return jnp.asarray(host_values.evaluate_captured(
                lambda: _reduce_per_replica(op, value, axis, num_replicas, split_sharding)))
        return _reduce_per_replica(op, value, axis, num_replicas, split_sharding)
    if contracts.is_distributed_variable(value):
        return _reduce_plain(op, value.read_value(), axis, num_replicas)
    return _reduce_plain(op, value, axis, num_replicas)


def _reduce_plain(op: ReduceOp, value: Any, axis: Any, n: int) -> Any:
    """A value that is the same on every replica (plain or Mirrored): R copies of it."""
    x = jnp.asarray(value)
    if axis is None:
        if op is ReduceOp.MEAN:
            return x.astype(_mean_dtype(x.dtype))
        return x * n if n != 1 else x
    axes = _canonical_axes(axis, x.ndim)
    if op is ReduceOp.SUM:
        total = jnp.sum(x, axis=axes)
        return total * n if n != 1 else total
    return jnp.mean(x.astype(_mean_dtype(x.dtype)), axis=axes)


def _ragged_shapes_error(shapes: Any) -> ValueError:
    listed = ", ".join(f"replica {i}: {list(s)}" for i, s in enumerate(shapes))
    return ValueError(
        "strategy.reduce(axis=None) reduces element-wise across replicas, so every "
        f"replica's value must have the same shape. Received shapes {listed}.\n"
        "Fix: pass axis=0 (or the batch axis) to reduce inside each replica first; "
        "MEAN then divides by the true number of elements."
    )


def _reduce_per_replica(op: ReduceOp, value: DistributedValues, axis: Any, n: int, split_sharding: Any) -> Any:
    multi_host_components = across_processes.multi_process() and not value.has_stacked and not value.is_traced
    if not multi_host_components:
        stacked = value.stacked_array(split_sharding)
        if value.is_ragged:
            shapes = value.shapes
            if axis is None:
                raise _ragged_shapes_error(shapes)
            if len({len(s) for s in shapes}) > 1:
                raise ValueError(
                    f"strategy.reduce: per-replica values have different ranks {sorted({len(s) for s in shapes})}; "
                    "they must differ only in size."
                )
            axes = _canonical_axes(axis, len(shapes[0]))
            shifted = (0,) + tuple(a + 1 for a in axes)
            total = jnp.sum(stacked, axis=shifted)  # the padding is zeros
            if op is ReduceOp.SUM:
                return total
            count = sum(int(np.prod([s[a] for a in axes])) for s in shapes)
            total = total.astype(_mean_dtype(total.dtype))
            return total / jnp.asarray(count, total.dtype)
        if axis is None:
            if op is ReduceOp.SUM:
                return jnp.sum(stacked, axis=0)
            x = stacked.astype(_mean_dtype(stacked.dtype))
            return jnp.sum(x, axis=0) / jnp.asarray(stacked.shape[0], x.dtype)
        axes = _canonical_axes(axis, stacked.ndim - 1)
        shifted = (0,) + tuple(a + 1 for a in axes)
        if op is ReduceOp.SUM:
            return jnp.sum(stacked, axis=shifted)
        x = stacked.astype(_mean_dtype(stacked.dtype))
        count = stacked.shape[0] * int(np.prod([stacked.shape[a] for a in shifted[1:]]))
        return jnp.sum(x, axis=shifted) / jnp.asarray(count, x.dtype)
    components = [np.asarray(c) for c in value.values]
    return _reduce_host_components_across_processes(op, components, axis, n)


def _reduce_host_components_across_processes(op: ReduceOp, components: list[Any], axis: Any, n: int) -> Any:
    """This process holds only its replicas' components: sum locally, then over processes."""
    local = [np.asarray(c) for c in components]
    if axis is None:
        shapes = {c.shape for c in local}
        if len(shapes) > 1:
            raise ValueError(
                "strategy.reduce(axis=None) needs every replica's value to have the same shape. "
                f"Received shapes {sorted(shapes)} on this process.\nFix: pass axis=0."
            )
        dtype = local[0].dtype if op is ReduceOp.SUM else np.dtype(_mean_dtype(local[0].dtype))
        total = across_processes.sum_over_processes(np.sum([c.astype(dtype) for c in local], axis=0))
        return jnp.asarray(total / n if op is ReduceOp.MEAN else total, dtype)
    axes = _canonical_axes(axis, local[0].ndim)
    total = across_processes.sum_over_processes(np.sum([np.sum(c, axis=axes) for c in local], axis=0))
    if op is ReduceOp.SUM:
        return jnp.asarray(total, local[0].dtype)
    count = across_processes.sum_over_processes(
        np.int64(sum(int(np.prod([c.shape[a] for a in axes])) for c in local)))
    dtype = _mean_dtype(local[0].dtype)
    return jnp.asarray(np.asarray(total, dtype) / np.asarray(count, dtype), dtype)


def _reduce_traced(op: ReduceOp, x: Any, axis: Any, n: int) -> Any:
    """Inside a compiled replica trace (``merge_fn``): collectives over the replica axis."""
    x = jnp.asarray(x)
    if axis is None:
        if op is ReduceOp.MEAN:
            x = x.astype(_mean_dtype(x.dtype))
            return jax.lax.psum(x, REPLICA_AXIS) / jnp.asarray(n, x.dtype)
        return jax.lax.psum(x, REPLICA_AXIS)
    axes = _canonical_axes(axis, x.ndim)
    total = jax.lax.psum(jnp.sum(x, axis=axes), REPLICA_AXIS)
    if op is ReduceOp.SUM:
        return total
    count = jax.lax.psum(int(np.prod([x.shape[a] for a in axes])), REPLICA_AXIS)
    total = total.astype(_mean_dtype(total.dtype))
    return total / jnp.asarray(count, total.dtype)


