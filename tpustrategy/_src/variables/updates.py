"""Reads and writes of variables in every context, with TensorFlow's aggregation rules.

Replica context, mirrored variable: the per-replica values are aggregated
(SUM, MEAN, ONLY_FIRST_REPLICA) and the same result is applied to every copy;
NONE is allowed only for a value that is equal on every replica (DESIGN §5).
Sync-on-read variables touch only the local component in replica context and
aggregate on read in cross-replica context. Cross-replica writes apply the
value as is (sync-on-read SUM ``assign`` writes v/R). A plain variable (made
outside any scope) used in ``run`` gets every replica's update in turn.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.context import contracts
from tpustrategy._src.context import stack as context
from tpustrategy._src.types import Shape
from tpustrategy._src.values.distributed import DistributedValues, Mirrored
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS
from tpustrategy._src.variables import access, frames
from tpustrategy._src.variables.enums import VariableAggregation
from tpustrategy._src.variables.frames import Frame
from tpustrategy._src.variables.state import (
    MIRRORED,
    PLAIN,
    SYNC_ON_READ,
    VariableState,
    strategy_of,
)


class _CompiledReplica(Protocol):
    """What an update in a compiled replica function reads of its replica context."""

    @property
    def num_replicas_in_sync(self) -> int: ...


def _replica_context() -> Any:
    """The current replica context (untyped in ``context.stack``'s entries), None in cross-replica context."""
    entry = context.current_entry()
    if entry is None or entry.replica_context is None or contracts.is_default(entry.replica_context):
        return None
    return entry.replica_context


def _check_strategy(var: VariableState, reading: bool = False) -> None:
    """Refuses a variable of another strategy, except a mirrored variable being read.

    TensorFlow lets a replica function of one strategy read a mirrored variable made under
    another (it reads the primary copy); here its one value enters the program, moved to
    the running strategy's devices. Writes, and sync-on-read variables (whose components
    belong to the other strategy's replicas), keep TensorFlow's mixing error.
    """
    entry = context.current_entry()
    if var._strategy is None or entry is None or contracts.is_default(entry.strategy):
        return
    if entry.strategy is not var._strategy and not (reading and var._kind == MIRRORED):
        raise context.mixing_error(entry.strategy, var._strategy)


def aggregate_read(var: VariableState, stacked: jax.Array) -> jax.Array:
    agg = var._aggregation
    if agg is VariableAggregation.SUM:
        return jnp.sum(stacked, axis=0)
    if agg is VariableAggregation.MEAN:
        return jnp.mean(stacked, axis=0)
    if agg is VariableAggregation.ONLY_FIRST_REPLICA:
        return stacked[0]
    raise ValueError(
        f"Could not convert from `tf.VariableAggregation` {agg} to`tf.distribute.ReduceOp` type "
        f"(reading sync-on-read variable {var.name!r} in cross-replica context needs an "
        "aggregation: create it with aggregation=SUM, MEAN or ONLY_FIRST_REPLICA)."
    )


def read(var: VariableState) -> jax.Array:
    """The value of ``var`` in the current context (seen by a recording tape, if any)."""
    value = _read(var)
    return access.on_read(var, value) if access.active() else value


def _read(var: VariableState) -> jax.Array:
    frame = frames.current()
    if frame is not None:
        if frame.level == "replica":
            _check_strategy(var, reading=True)
            local = frame.read(var, var._shape)
            if var._kind == SYNC_ON_READ and _in_merge_fn():
                return _aggregate_traced(var, local)
            return local
        value = frame.read(var, var._global_shape())
        return aggregate_read(var, value) if var._kind == SYNC_ON_READ else value
    ctx = _replica_context()
    if ctx is not None and var._kind != PLAIN and isinstance(ctx, contracts.EagerReplicaContract):
        _check_strategy(var)
        return var._local_components()[ctx.local_replica_id]
    if var._kind == SYNC_ON_READ:
        return aggregate_read(var, var._value)
    return var._value


def _in_merge_fn() -> bool:
    """Cross-replica context inside a replica trace: a ``merge_fn`` of the compiled path."""
    entry = context.current_entry()
    return entry is not None and entry.replica_context is None


def _aggregate_traced(var: VariableState, local: jax.Array) -> jax.Array:
    """A sync-on-read variable read in ``merge_fn`` of a compiled replica function: the aggregate."""
    agg = var._aggregation
    out: jax.Array  # jax.lax's collectives are typed Any
    if agg is VariableAggregation.SUM:
        out = jax.lax.psum(local, REPLICA_AXIS)
    elif agg is VariableAggregation.MEAN:
        out = jax.lax.psum(local, REPLICA_AXIS) / strategy_of(var).num_replicas_in_sync
    elif agg is VariableAggregation.ONLY_FIRST_REPLICA:
        out = jax.lax.all_gather(local, REPLICA_AXIS)[0]
    else:
        out = aggregate_read(var, local)  # raises TensorFlow's error for NONE
    return out


def check_numeric(var: VariableState, method: str, value: Any) -> None:
    """A value that is not numbers (a string, an object) is an error naming the variable, not JAX's."""
    if isinstance(value, (jax.Array, jax.core.Tracer, int, float, bool, complex, np.number)) \
            or np.dtype(var.dtype).kind not in "biufc":
        return
    try:
        host = np.asarray(value)
    except (ValueError, TypeError):
        host = None
    if host is None or host.dtype.kind in "OUSV":
        raise TypeError(
            f"Variable.{method}: variable {var.name!r} holds {np.dtype(var.dtype).name} numbers, but the "
            f"value is not numeric. Received: {type(value).__name__} {value!r:.60}.\nFix: pass a number "
            f"or an array of numbers of shape {tuple(var.shape)} (or one that broadcasts to it).")


def combine(var: VariableState, method: str, current: jax.Array, value: Any) -> jax.Array:
    value = jnp.asarray(value)
    check_value(var, method, value, current.shape)
    if method == "assign":
        new = jnp.broadcast_to(value.astype(var.dtype), current.shape)
    elif method == "assign_add":
        new = current + value.astype(var.dtype)
    else:
        new = current - value.astype(var.dtype)
    if new.shape != current.shape:
        raise ValueError(
            f"Variable.{method}: {var.name!r} has shape {tuple(current.shape)} but the value has "
            f"shape {tuple(value.shape)}, which does not broadcast to it."
        )
    return new.astype(var.dtype)


def check_value(var: VariableState, method: str, value: jax.Array, target_shape: Shape) -> None:
    """TensorFlow's checks of an update: no float into an integer variable, shapes that fit."""
    dtype = np.dtype(var.dtype)
    vdtype = np.dtype(value.dtype)
    if (np.issubdtype(vdtype, np.inexact) and not np.issubdtype(dtype, np.inexact)) or (
            np.issubdtype(vdtype, np.complexfloating) and not np.issubdtype(dtype, np.complexfloating)):
        raise TypeError(
            f"Variable.{method}: cannot convert a {vdtype.name} value to variable {var.name!r} of dtype "
            f"{dtype.name} (TensorFlow refuses it too, instead of truncating).\nFix: cast explicitly, e.g. "
            f"v.{method}(jnp.round(x).astype(v.dtype)), or create the variable with a float dtype."
        )
    try:
        fits = np.broadcast_shapes(tuple(value.shape), tuple(target_shape)) == tuple(target_shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(
            f"Variable.{method}: variable {var.name!r} has shape {tuple(target_shape)} but the value has shape "
            f"{tuple(value.shape)}, which does not broadcast to it.\nFix: pass a value of shape "
            f"{tuple(target_shape)} (or one that broadcasts to it, such as a scalar)."
        )


def _plain_value(var: VariableState, value: Any, in_replica: bool) -> Any:
    if isinstance(value, DistributedValues):
        if isinstance(value, Mirrored):
            return value.replicated_array
        if in_replica:
            raise TypeError("Cannot use DistributedValues to update variables in replica context.")
        return value
    if hasattr(value, "_tps_distributed_variable") and hasattr(value, "read_value"):
        return value.read_value()
    return value


def write(var: VariableState, method: str, value: Any, read_value: bool, label: str | None = None) -> None:
    """Applies ``var.<method>(value)`` in the current context; ``label`` names the user's op in errors."""
    frame = frames.current()
    ctx = _replica_context()
    _check_strategy(var)
    if access.active():
        value = access.to_stored(value)
    value = _plain_value(var, value, in_replica=ctx is not None)
    if not isinstance(value, DistributedValues):
        check_numeric(var, label or method, value)
    if frame is not None and frame.level == "replica" and ctx is None and _in_merge_fn():
        frame.write(var, _merge_fn_update(var, method, value, frame, label))
    elif frame is not None and frame.level == "replica":
        frame.write(var, _compiled_replica_update(var, method, value, frame, ctx))
    elif ctx is not None and isinstance(ctx, contracts.EagerReplicaContract):
        _eager_replica_update(var, method, value, ctx)
    else:
        _cross_replica_update(var, method, value, label)


def gather_update(var: VariableState, label: str, value: jax.Array) -> jax.Array | None:
    """Every replica's ``value`` stacked ``[R, ...]`` in replica context (in replica order), else None.

    The rows of an aggregated ``IndexedSlices`` (TensorFlow's ``apply_aggregation`` of a sparse
    update concatenates every replica's slices): ``scatter_mul`` / ``scatter_div`` of a SUM or
    MEAN mirrored variable apply them all, once, then store the result with ``write_agreed``.
    """
    frame = frames.current()
    ctx = _replica_context()
    _check_strategy(var)
    if frame is not None and frame.level == "replica" and ctx is not None and not _in_merge_fn():
        gathered: jax.Array = jax.lax.all_gather(value, REPLICA_AXIS)
        return gathered
    if ctx is not None and isinstance(ctx, contracts.EagerReplicaContract):
        everyone = ctx.rendezvous.exchange(ctx.local_replica_id, f"{label}-gather:{var.name}", np.asarray(value))
        return jnp.asarray(np.stack(everyone))
    return None


def write_agreed(var: VariableState, value: jax.Array, label: str) -> None:
    """Assigns ``value``, equal on every replica (made from ``gather_update``'s rows), in replica
    context without aggregating it again (a SUM would multiply it by the replica count)."""
    frame = frames.current()
    ctx = _replica_context()
    if frame is not None and frame.level == "replica" and ctx is not None and not _in_merge_fn():
        frame.write(var, combine(var, "assign", frame.read(var, var._shape), value))
    elif ctx is not None and isinstance(ctx, contracts.EagerReplicaContract):
        _eager_replica_update(var, "assign", value, ctx, agreed=True)
    else:
        _cross_replica_update(var, "assign", value, label)


def _compiled_replica_update(
        var: VariableState, method: str, value: Any, frame: Frame, ctx: _CompiledReplica) -> jax.Array:
    current = frame.read(var, var._shape)
    v = jnp.asarray(value)
    if var._kind == SYNC_ON_READ:
        return combine(var, method, current, v)
    if var._kind == PLAIN:
        # TensorFlow's MirroredStrategy rule: every replica's update is applied in turn
        # (deltas add up, the last assign wins).
        warn_plain_variable(var, method, ctx.num_replicas_in_sync)
        if method == "assign":
            return combine(var, method, current, jax.lax.all_gather(v, REPLICA_AXIS)[-1])
        return combine(var, method, current, jax.lax.psum(v, REPLICA_AXIS))
    return combine(var, method, current, _aggregate_compiled(var, v, ctx))


def _merge_fn_update(
        var: VariableState, method: str, value: Any, frame: Frame, label: str | None = None) -> jax.Array:
    """A write in ``merge_fn`` of a compiled replica function: cross-replica semantics.

    The trace stands for every replica at once, so a value equal on every replica (a
    reduction, a ``Mirrored``, a constant) is applied as is, as a cross-replica write
    outside the function would be; a sync-on-read variable can also take a ``PerReplica``
    (each replica its own component), and SUM-aggregated ``assign`` splits the value.
    """
    current = frame.read(var, var._shape)
    per_replica = isinstance(value, DistributedValues)
    if per_replica:
        if var._kind != SYNC_ON_READ or value.replica_tracer is None:
            raise TypeError(
                f"Expected value to be mirrored across replicas: {value!r} (assigning a PerReplica to "
                f"mirrored variable {var.name!r} in merge_fn would make its copies diverge). Fix: "
                "reduce it first with strategy.reduce(...) in merge_fn."
            )
        value = value.replica_tracer
    v = jnp.asarray(value)
    if var._kind == SYNC_ON_READ and var._aggregation is VariableAggregation.SUM and not per_replica:
        if method != "assign":
            raise ValueError(
                f"SyncOnReadVariable does not support `{label or method}` in cross-replica context "
                "when aggregation is set to `tf.VariableAggregation.SUM`."
            )
        v = (v / strategy_of(var).num_replicas_in_sync).astype(var.dtype)
    return combine(var, method, current, v)


def _aggregate_compiled(var: VariableState, v: jax.Array, ctx: _CompiledReplica) -> jax.Array:
    agg = var._aggregation
    n = ctx.num_replicas_in_sync
    out: jax.Array = v  # jax.lax's collectives are typed Any
    if agg is VariableAggregation.SUM:
        out = jax.lax.psum(v, REPLICA_AXIS)
    elif agg is VariableAggregation.MEAN:
        v = v.astype(var.dtype)
        out = jax.lax.psum(v, REPLICA_AXIS) / jnp.asarray(n, v.dtype)
    elif agg is VariableAggregation.ONLY_FIRST_REPLICA:
        out = jax.lax.all_gather(v, REPLICA_AXIS)[0]
    return out


def none_aggregation_error(var: VariableState) -> ValueError:
    return ValueError(
        f"You must specify an aggregation method to update a MirroredVariable in Replica "
        f"Context: {var.name!r} has aggregation=NONE and was updated in a replica function with "
        "a value that differs across replicas, which would make its copies diverge.\nFix: pass "
        "aggregation=tps.VariableAggregation.SUM, MEAN or ONLY_FIRST_REPLICA to tps.Variable(...), "
        "or all_reduce the value before assigning it."
    )


_warned_plain: set[int] = set()


def warn_plain_variable(var: VariableState, method: str, num_replicas: int) -> None:
    """TensorFlow applies every replica's update to a variable made outside any scope; say so once."""
    if num_replicas <= 1 or var._id in _warned_plain:
        return
    _warned_plain.add(var._id)
    import warnings

    warnings.warn(
        f"Variable.{method}: {var.name!r} was created outside any strategy.scope(), so it is one plain "
        f"variable, and it is updated inside a replica function running on {num_replicas} replicas: "
        f"as in TensorFlow, each replica's update is applied in turn ({num_replicas} updates per run).\n"
        "Fix: if you meant one mirrored variable, create it under `with strategy.scope():` (with "
        "aggregation=tps.VariableAggregation.SUM, MEAN or ONLY_FIRST_REPLICA), or update it outside "
        "strategy.run.",
        UserWarning,
        stacklevel=4,
    )


def initialise_in_frame(var: VariableState, frame: Frame, value: jax.Array) -> None:
    """A variable created in a traced step from a traced value: the program initialises it.

    In a replica function a mirrored variable takes replica 0's value
    (TensorFlow's rule); a sync-on-read one takes each replica's own.
    """
    value = jnp.asarray(value, var.dtype)
    if frame.level == "replica":
        if var._kind != SYNC_ON_READ and var._kind != PLAIN:
            value = jax.lax.all_gather(value, REPLICA_AXIS)[0]
    elif var._kind == SYNC_ON_READ:
        value = jnp.broadcast_to(value, var._global_shape())
    frame.initialise(var, value)


def _eager_replica_update(var: VariableState, method: str, value: Any, ctx: contracts.EagerReplicaContract,
                          agreed: bool = False) -> None:
    device = ctx.device
    v = jax.device_put(jnp.asarray(value), device)
    everyone = ctx.rendezvous.exchange(ctx.local_replica_id, f"{method}:{var.name}", v)
    error: BaseException | None = None
    if ctx.local_replica_id == 0:
        try:
            _apply_eager(var, method, [np.asarray(x) for x in everyone], agreed)
        except BaseException as e:  # handed to every replica thread
            error = e
    outcome = ctx.rendezvous.exchange(ctx.local_replica_id, f"{method}-done:{var.name}", error)
    if outcome[0] is not None:
        raise outcome[0]


def _apply_eager(var: VariableState, method: str, values: list[np.ndarray], agreed: bool = False) -> None:
    n = len(values)
    if agreed:   # equal on every replica (write_agreed): stored once, not aggregated again
        new = combine(var, method, jnp.asarray(np.asarray(var._local_components()[0])), values[0])
        var._value = jax.device_put(new, var._value.sharding)
        return
    if var._kind == SYNC_ON_READ:
        comps = [np.asarray(c) for c in var._local_components()]
        stacked = np.stack([np.asarray(combine(var, method, jnp.asarray(c), v)) for c, v in zip(comps, values)])
        var._value = jax.device_put(stacked, var._value.sharding)
        return
    current = jnp.asarray(np.asarray(var._local_components()[0]))
    if var._kind == PLAIN:
        warn_plain_variable(var, method, n)
        new = current
        for v in values:
            new = combine(var, method, new, v)
        var._value = jax.device_put(new, var._value.sharding)
        return
    agg = var._aggregation
    update: np.ndarray | float
    if agg is VariableAggregation.SUM:
        update = sum(values[1:], values[0])
    elif agg is VariableAggregation.MEAN:
        update = sum(v.astype(var.dtype) for v in values) / n
    elif agg is VariableAggregation.ONLY_FIRST_REPLICA:
        update = values[0]
    else:
        if not all(np.array_equal(values[0], x) for x in values[1:]):
            raise none_aggregation_error(var)
        update = values[0]
    new = combine(var, method, current, update)
    var._value = jax.device_put(new, var._value.sharding)


def _cross_replica_update(var: VariableState, method: str, value: Any, label: str | None = None) -> None:
    current = frames.global_value(var)
    if var._kind == SYNC_ON_READ:
        n = strategy_of(var).num_replicas_in_sync
        if isinstance(value, DistributedValues):
            if len(value.values) != n:
                raise ValueError(
                    f"Variable.{label or method}: {var.name!r} is a sync-on-read variable with one value per "
                    f"replica ({n} replicas), but the {type(value).__name__} has {len(value.values)} "
                    f"components.\nFix: give one component per replica (strategy.num_replicas_in_sync = {n}), "
                    "e.g. with strategy.experimental_distribute_values_from_function(lambda ctx: ...), or "
                    "assign one value to every replica.")
            stacked = jnp.stack([jnp.asarray(x, var.dtype) for x in value.values])
            new = combine(var, method, current, stacked)
        else:
            v = jnp.asarray(value)
            if var._aggregation is VariableAggregation.SUM:
                if method != "assign":
                    raise ValueError(
                        f"SyncOnReadVariable does not support `{label or method}` in cross-replica context "
                        "when aggregation is set to `tf.VariableAggregation.SUM`."
                    )
                v = (v / n).astype(var.dtype)  # TensorFlow casts the share back to the variable's dtype
            new = combine(var, method, current, v)
    else:
        if isinstance(value, DistributedValues):
            raise TypeError(
                f"Expected value to be mirrored across replicas: {value!r} (assigning a PerReplica "
                f"to mirrored variable {var.name!r} in cross-replica context would make its copies "
                "diverge). Fix: reduce it first with strategy.reduce(...)."
            )
        new = combine(var, method, current, value)
    if not isinstance(new, jax.core.Tracer) and var._kind != PLAIN:
        spec = P(REPLICA_AXIS) if var._kind == SYNC_ON_READ else P()
        new = jax.device_put(new, NamedSharding(strategy_of(var).mesh, spec))
    elif not isinstance(new, jax.core.Tracer):
        new = jax.device_put(new, jax.local_devices()[0])
    frames.set_global_value(var, new)
