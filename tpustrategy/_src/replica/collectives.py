"""Collectives of the two execution paths.

Compiled path: ``lax.psum`` over the mesh's replica axis. Replica functions are
traced with JAX's classic (non-``shard_map``) axis environment, where the
transpose of ``psum`` is ``psum``: the gradient of an all-reduce is the same
all-reduce of the upstream gradients, as in TensorFlow.

Eager path: one thread per replica exchanges *concrete* arrays at a
rendezvous. A ``jax.custom_vjp`` makes the backward pass exchange the
cotangents the same way, so ``jax.grad`` through an eager all-reduce agrees
with the compiled path.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.reduce_op import ReduceOp
from tpustrategy._src.replica import across_processes
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS


def default_float_dtype() -> Any:
    return jnp.result_type(float)


def as_reduce_dtype(x: Any, op: ReduceOp) -> Any:
    """Integer and bool MEANs are taken in JAX's default float dtype (DESIGN §5)."""
    x = jnp.asarray(x)
    if op is ReduceOp.MEAN and not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(default_float_dtype())
    return x


def compiled_all_reduce(op: ReduceOp, x: Any, num_replicas: int) -> Any:
    x = as_reduce_dtype(x, op)
    total = jax.lax.psum(x, REPLICA_AXIS)
    if op is ReduceOp.MEAN:
        total = total / jnp.asarray(num_replicas, total.dtype)
    return total


def compiled_all_gather(x: Any, axis: int) -> Any:
    x = jnp.asarray(x)
    if x.ndim == 0:
        raise ValueError(
            "all_gather: `value` must have rank >= 1 to be concatenated along "
            f"axis {axis}; received a scalar.\nFix: reshape it to [1] first."
        )
    return jax.lax.all_gather(x, REPLICA_AXIS, axis=_normalise_axis(axis, x.ndim), tiled=True)


def _normalise_axis(axis: int, ndim: int) -> int:
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(
            f"all_gather: `axis` must be an int in [{-ndim}, {ndim}) for a value of rank "
            f"{ndim}. Received: axis={axis!r}."
        )
    return int(axis) % ndim


# Eager path -------------------------------------------------------------------


def _sum_on(device: Any, values: list[Any]) -> Any:
    total = jax.device_put(values[0], device)
    for v in values[1:]:
        total = total + jax.device_put(v, device)
    return total


def eager_all_reduce(ctx: Any, op: ReduceOp, leaves: list[Any]) -> list[Any]:
    """All-reduces ``leaves`` across the replica threads, differentiably."""
    if not leaves:
        return []
    leaves = [as_reduce_dtype(jax.device_put(x, ctx._device), op) for x in leaves]
    n = ctx.num_replicas_in_sync

    def exchange(xs: tuple[Any, ...]) -> tuple[Any, ...]:
        everyone = ctx._rendezvous.exchange(ctx._local_id, "all_reduce", list(xs))
        check_same_shapes("all_reduce", everyone)
        totals = [_sum_on(ctx._device, [vals[k] for vals in everyone]) for k in range(len(xs))]
        if across_processes.multi_process():
            # One thread per process takes the local totals across processes.
            combined = None
            if ctx._local_id == 0:
                combined = [across_processes.sum_over_processes(np.asarray(t)) for t in totals]
            combined = ctx._rendezvous.exchange(ctx._local_id, "all_reduce_processes", combined)[0]
            totals = [jax.device_put(c.astype(t.dtype), ctx._device) for c, t in zip(combined, totals)]
        if op is ReduceOp.MEAN:
            totals = [t / jnp.asarray(n, t.dtype) for t in totals]
        return tuple(totals)

    @jax.custom_vjp
    def reduce(*xs: Any) -> tuple[Any, ...]:
        return exchange(xs)

    def fwd(*xs: Any) -> tuple[tuple[Any, ...], None]:
        return exchange(xs), None

    def bwd(_: None, cts: tuple[Any, ...]) -> tuple[Any, ...]:
        return exchange(tuple(cts))

    reduce.defvjp(fwd, bwd)
    out = list(reduce(*leaves))
    ctx._rendezvous.mark_invariant(ctx._local_id, out)
    return out


def check_same_shapes(api: str, everyone: list[list[Any]]) -> None:
    """Every replica must pass values of the same shapes to an all-reduce."""
    for k in range(len(everyone[0])):
        shapes = [tuple(np.shape(vals[k])) for vals in everyone]
        if len(set(shapes)) > 1:
            listed = ", ".join(f"replica {i}: {list(s)}" for i, s in enumerate(shapes))
            raise ValueError(
                f"ReplicaContext.{api}: every replica must pass a value of the same shape (it is reduced "
                f"element-wise), but value {k} has shapes {listed}.\nFix: reduce inside each replica first "
                "(e.g. jnp.sum(x)), or all_reduce a fixed-size value such as a gradient."
            )


def eager_all_gather(ctx: Any, leaves: list[Any], axis: int) -> list[Any]:
    leaves = [jnp.asarray(jax.device_put(x, ctx._device)) for x in leaves]
    for x in leaves:
        if x.ndim == 0:
            raise ValueError(
                "all_gather: `value` must have rank >= 1 to be concatenated along "
                f"axis {axis}; received a scalar.\nFix: reshape it to [1] first."
            )
    everyone = ctx._rendezvous.exchange(ctx._local_id, "all_gather", leaves)
    from tpustrategy._src.replica.shapes import shape_mismatch_error

    for k in range(len(leaves)):
        error = shape_mismatch_error("ReplicaContext.all_gather", [np.shape(vals[k]) for vals in everyone], axis)
        if error is not None:
            raise error
    axes = [_normalise_axis(axis, x.ndim) for x in leaves]
    if across_processes.multi_process():
        combined: Any = None
        if ctx._local_id == 0:
            combined = _gather_over_processes(everyone, axes, axis, shape_mismatch_error)
        combined = ctx._rendezvous.exchange(ctx._local_id, "all_gather_processes", combined)[0]
        if isinstance(combined, Exception):
            raise combined  # on every replica thread of every process alike
        return [jax.device_put(c, ctx._device) for c in combined]
    out = []
    for k, a in enumerate(axes):
        parts = [jax.device_put(vals[k], ctx._device) for vals in everyone]
        out.append(jnp.concatenate(parts, axis=a))
    return out


def _gather_over_processes(everyone: list[list[Any]], axes: list[int], axis: int, check: Any) -> Any:
    """One thread per process: every replica's shapes are checked, then the local parts concatenated."""
    out = []
    for k, a in enumerate(axes):
        per_process = across_processes.shapes_over_processes([np.shape(vals[k]) for vals in everyone])
        error = check("ReplicaContext.all_gather", [s for p in per_process for s in p], axis)
        if error is not None:
            return error
        local = np.concatenate([np.asarray(vals[k]) for vals in everyone], axis=a)
        out.append(across_processes.concat_over_processes(local, a))
    return out

