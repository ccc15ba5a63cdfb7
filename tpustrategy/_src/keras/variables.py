"""Keras variables as the strategy's variables.

A Keras 3 variable created under ``strategy.scope()`` is *adopted*: its class
becomes a subclass of its own class (``_StrategyKerasVariable``) and it gets a
companion ``KerasVariableState``, a ``tps.Variable`` whose storage *is* the
Keras variable's ``_value``. The companion carries tf.keras's distribution
rules, so everything the library does with ``tps.Variable``s (functionalised
reads and writes in ``strategy.run`` / ``tps.function``, aggregation of
updates in replica context, checkpoints) applies to the Keras variable:

- trainable weights and optimizer state: mirrored, aggregation as Keras gave
  it (``"none"``: updates must agree on every replica, as after
  ``apply_gradients``'s all-reduce);
- a layer's non-trainable float state with ``"none"`` (BatchNorm's moving
  statistics): mirrored with MEAN, tf.keras's rule;
- metric state (Keras's ``synchronization="on_read"``): sync-on-read, one
  copy per replica, aggregated when read in cross-replica context.

Reads and writes go through the companion whenever a trace frame or a replica
context is active; Keras's own ``StatelessScope`` (its trainer) keeps
precedence, and plain cross-replica code reads and assigns the global value.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

import tpustrategy._src.keras.device_mesh as device_mesh
import tpustrategy._src.keras.internals as internals
from tpustrategy._src.context import contracts
from tpustrategy._src.execution import dispatch
from tpustrategy._src.values.mesh_axis import CORE_AXIS, REPLICA_AXIS
from tpustrategy._src.variables import access, frames, updates
from tpustrategy._src.variables.enums import (
    VariableAggregation,
    VariableSynchronization,
    canonical_aggregation,
)
from tpustrategy._src.variables.variable import Variable

MIRRORED, SYNC_ON_READ, PLAIN = "mirrored", "sync_on_read", "plain"
_uid = itertools.count(1 << 40)  # ids apart from tps.Variable's own counter


class KerasVariableState(Variable):
    """The ``tps.Variable`` face of one Keras variable (its storage is the Keras variable's).

    Never built through ``tps.Variable(...)``: ``for_keras`` fills the fields
    the library's variable machinery reads.
    """

    _keras: Any

    @classmethod
    def for_keras(cls, kvar: Any, strategy: Any, kind: str, aggregation: VariableAggregation) -> KerasVariableState:
        self = object.__new__(cls)
        self._keras = kvar
        self._base_name = kvar.path
        self._sync = VariableSynchronization.ON_READ if kind == SYNC_ON_READ else VariableSynchronization.AUTO
        self._aggregation = aggregation
        self._pending_init = False
        self._traced_init = None
        self._shape = tuple(kvar.shape)
        self._dtype = np.dtype(kvar._dtype)
        self._trainable = bool(kvar.trainable)
        self._id = next(_uid)
        self._strategy = strategy
        self._kind = kind
        self._tps_distributed_variable = strategy is not None
        return self

    @property
    def _value(self) -> Any:  # type: ignore[override]
        return self._keras.__dict__.get("_value")

    @_value.setter
    def _value(self, new: Any) -> None:
        self._keras.__dict__["_value"] = new

    @property
    def name(self) -> str:
        return f"{self._keras.path}:0"

    @property
    def _core_spec(self) -> Any:
        return self.__dict__.get("_core_spec_value")

    @_core_spec.setter
    def _core_spec(self, spec: Any) -> None:
        # experimental_split_to_logical_devices: Keras's layout follows, so the optimizer
        # slots Keras copies from this variable later are split over the cores too.
        self.__dict__["_core_spec_value"] = spec
        if self._strategy is not None and spec is not None:
            from keras.distribution import TensorLayout

            axes = [*spec, *([None] * (len(self._shape) - len(spec)))]
            internals.set_variable_layout(self._keras, TensorLayout(axes, device_mesh.of(self._strategy)))

    @property
    def keras_variable(self) -> Any:
        """The Keras variable this state belongs to."""
        return self._keras


def state_of(kvar: Any) -> KerasVariableState | None:
    """The companion of an adopted Keras variable, else None."""
    return kvar.__dict__.get("_tps_state") if hasattr(kvar, "__dict__") else None


def plain_state(kvar: Any) -> KerasVariableState:
    """A companion for a Keras variable made outside any scope (checkpoints without a strategy)."""
    found = state_of(kvar)
    if found is None:
        found = KerasVariableState.for_keras(kvar, None, PLAIN, canonical_aggregation(kvar.aggregation, kvar.path))
        kvar.__dict__["_tps_plain_state"] = found
    return found


def checkpoint_state(kvar: Any) -> KerasVariableState:
    """The companion to save and restore a Keras variable through (adopted or plain)."""
    for found in (state_of(kvar), kvar.__dict__.get("_tps_plain_state")):
        if found is not None:
            return found
    return plain_state(kvar)


def rule(kvar: Any, caller: Any) -> tuple[str, VariableAggregation]:
    """tf.keras's distribution rule for a new Keras variable: (kind, aggregation)."""
    aggregation = canonical_aggregation(kvar.aggregation, kvar.path)
    if kvar.synchronization == "on_read":
        return SYNC_ON_READ, aggregation
    if (aggregation is VariableAggregation.NONE and not kvar.trainable
            and jnp.issubdtype(np.dtype(kvar._dtype), jnp.floating) and _is_layer(caller)):
        return MIRRORED, VariableAggregation.MEAN  # BatchNorm's moving statistics
    return MIRRORED, aggregation


def _is_layer(caller: Any) -> bool:
    import keras

    return isinstance(caller, keras.layers.Layer)


_SUBCLASSES: dict[type, type] = {}


def adopt(kvar: Any, strategy: Any, caller: Any) -> KerasVariableState:
    """Makes a Keras variable the strategy's (idempotent)."""
    found = state_of(kvar)
    if found is not None:
        return found
    kind, aggregation = rule(kvar, caller)
    if kind == SYNC_ON_READ and contracts.is_default(strategy):
        kind = MIRRORED  # one replica, and the default strategy's run is cross-replica: a plain variable
    state = KerasVariableState.for_keras(kvar, strategy, kind, aggregation)
    kvar.__dict__["_tps_state"] = state
    base = type(kvar)
    sub = _SUBCLASSES.get(base)
    if sub is None:
        sub = _SUBCLASSES[base] = type(base.__name__, (_StrategyKerasVariable, base), {
            "__module__": base.__module__, "__qualname__": base.__qualname__})
    kvar.__class__ = sub
    if kind == SYNC_ON_READ:
        _cross_replica_result(caller)
    return state


def move_to(kvar: Any, strategy: Any, caller: Any) -> KerasVariableState:
    """A Keras variable made outside every scope (the default strategy's), made ``strategy``'s.

    A metric created before ``strategy.scope()`` and passed to ``compile`` inside it (as
    TensorFlow's tests do): tf.keras updates it in every replica of the model's strategy.
    Here its variables become that strategy's, with tf.keras's rules (metric state:
    sync-on-read), keeping their current values. A variable already another strategy's is
    left as it is.
    """
    found = state_of(kvar)
    if found is not None and (found._strategy is strategy or not contracts.is_default(found.strategy)):
        return found
    value = np.asarray(kvar.value) if kvar.__dict__.get("_value") is not None else None
    if found is not None:
        del kvar.__dict__["_tps_state"]
        kvar.__dict__.pop("_tps_aggregate", None)
        kvar.__class__ = type(kvar).__bases__[1]   # the Keras class behind _StrategyKerasVariable
    state = adopt(kvar, strategy, caller)
    if value is not None:
        if state._kind == SYNC_ON_READ:
            kvar._direct_assign(value)   # spread so that reading it back gives the value
        else:
            kvar.__dict__["_value"] = _place(jnp.asarray(value, kvar._dtype), sharding_of(state))
    return state


class _Reads(threading.local):
    aggregated = 0


_reads = _Reads()


def _cross_replica_result(metric: Any) -> None:
    """tf.keras's rule: a metric's ``result()`` in a replica function is computed over all replicas."""
    import keras

    if not isinstance(metric, keras.metrics.Metric) or "_tps_result" in metric.__dict__:
        return
    own = metric.result   # bound: the subclass's own result

    def result(*args: Any, **kwargs: Any) -> Any:
        _reads.aggregated += 1
        try:
            return own(*args, **kwargs)
        finally:
            _reads.aggregated -= 1

    metric.__dict__["_tps_result"] = own
    metric.__dict__["result"] = result


def _replica_aggregate(state: KerasVariableState, local: Any) -> Any:
    """A sync-on-read variable's aggregate over the replicas, read in a compiled replica function."""
    agg = state._aggregation
    if agg is VariableAggregation.SUM:
        return jax.lax.psum(local, REPLICA_AXIS)
    if agg is VariableAggregation.MEAN:
        return jax.lax.pmean(local, REPLICA_AXIS)
    if agg is VariableAggregation.ONLY_FIRST_REPLICA:
        return jax.lax.all_gather(local, REPLICA_AXIS)[0]
    return local


def note_layout(state: KerasVariableState, layout: Any) -> None:
    """Records a Keras layout over the replica's cores (a ``layout_map`` entry, a slot copying its weight's)."""
    axes = tuple(getattr(layout, "axes", None) or ())
    if any(a is not None for a in axes) and set(axes) <= {None, CORE_AXIS}:
        state.__dict__["_core_spec_value"] = P(*axes)


def sharding_of(state: KerasVariableState) -> Any:
    mesh = state._strategy.mesh
    if state._kind == SYNC_ON_READ:
        return NamedSharding(mesh, P(REPLICA_AXIS))
    spec = getattr(state, "_core_spec", None)
    return NamedSharding(mesh, spec if spec is not None else P())


def _place(value: Any, sharding: Any) -> Any:
    if isinstance(value, jax.core.Tracer):
        return value  # inside another trace (Keras's symbolic build): the trace lays it out
    if isinstance(value, jax.Array):
        if value.sharding == sharding or (value.sharding.is_equivalent_to(sharding, value.ndim) and (
                isinstance(value.sharding, SingleDeviceSharding) == isinstance(sharding, SingleDeviceSharding))):
            return value  # Keras's state sync hands back the step's outputs, already laid out
        # On a one-device mesh an array on that device is laid out alike, but Keras checks that its
        # state is all local or all mesh-aware ("Detected a mix of local ... and distributed
        # variables"): every adopted value takes the mesh's sharding.
        if not (sharding.is_fully_addressable and value.is_fully_addressable):
            return _reshard(sharding)(value)  # a global array (several processes): every process runs this
        return jax.device_put(value, sharding)
    if not sharding.is_fully_addressable:
        host = np.asarray(value)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
    return jax.device_put(value, sharding)


_RESHARDS: dict[Any, Any] = {}
_PROGRAMS: dict[Any, Any] = {}


def _program(state: KerasVariableState, kind: str) -> Any:
    """One compiled program (per strategy, rule and dtype) for a sync-on-read variable's cross-replica
    read (``"aggregate"``: the replicas' copies aggregated, replicated) or assign (``"spread"``: the
    copies whose aggregate is the value) — one dispatch each, also across processes."""
    mesh, n, agg = state._strategy.mesh, state._strategy.num_replicas_in_sync, state._aggregation
    key = (kind, id(mesh), n, agg, state._dtype)
    fn = _PROGRAMS.get(key)
    if fn is not None:
        return fn
    if kind == "aggregate":
        fn = jax.jit(lambda raw: updates.aggregate_read(state, raw), out_shardings=NamedSharding(mesh, P()))
    else:
        def spread(value: Any) -> Any:
            return spread_copies(value, n, agg, jnp)

        fn = jax.jit(spread, out_shardings=NamedSharding(mesh, P(REPLICA_AXIS)))
    _PROGRAMS[key] = fn
    return fn


def spread_copies(value: Any, n: int, aggregation: VariableAggregation, xp: Any) -> Any:
    """The ``n`` replicas' copies whose aggregate is ``value`` (``xp``: ``jnp`` in the ``"spread"``
    program, ``np`` on the host): SUM gives an inexact value's share ``value / n`` to every replica
    (TensorFlow's rule) and an integer value to the first, zeros elsewhere; other rules give
    ``value`` to every replica. NumPy's share is the correctly rounded quotient; XLA's may differ
    by one rounding (it may multiply by ``1 / n``)."""
    if aggregation is not VariableAggregation.SUM:
        return xp.broadcast_to(value, (n, *value.shape))
    if jnp.issubdtype(value.dtype, jnp.inexact):
        return xp.broadcast_to((value / n).astype(value.dtype), (n, *value.shape))
    return xp.concatenate([value[None], xp.zeros((n - 1, *value.shape), value.dtype)])


# A sync-on-read value this small (elements) is spread on the host (``_host_spread``).
HOST_SPREAD_ELEMENTS = 4096


def _host_spread(state: KerasVariableState, value: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """``spread_copies`` of ``value`` made on the host, with ``value`` itself; None when the
    program must run (several processes, a large value, a tracer)."""
    if jax.process_count() > 1 or isinstance(value, jax.core.Tracer) or value.size > HOST_SPREAD_ELEMENTS:
        return None
    host = np.asarray(value)
    copies = spread_copies(host, state._strategy.num_replicas_in_sync, state._aggregation, np)
    return np.ascontiguousarray(copies), host


def _reshard(sharding: Any) -> Any:
    fn = _RESHARDS.get(sharding)
    if fn is None:
        fn = _RESHARDS[sharding] = jax.jit(lambda v: v, out_shardings=sharding)
    return fn


def _seen(state: KerasVariableState, value: Any) -> Any:
    """An eager read as a recording ``tps.GradientTape`` sees it (its source value), else ``value``."""
    return access.on_read(state, value) if access.active() else value


def _traced_or_replica() -> bool:
    return frames.current() is not None or updates._replica_context() is not None


class _StrategyKerasVariable:
    """Mixed in front of an adopted variable's Keras class (see the module docstring)."""

    @property
    def _shape(self) -> Any:
        return self.__dict__["_shape"]

    @_shape.setter
    def _shape(self, shape: Any) -> None:
        # Keras sets a variable made from a concrete value to its storage's shape after
        # initialising it; a sync-on-read variable's storage holds one copy per replica, and
        # its shape stays the value's.
        state = self.__dict__.get("_tps_state")
        if (state is not None and state._kind == SYNC_ON_READ and "_shape" in self.__dict__
                and tuple(shape) == (state._strategy.num_replicas_in_sync, *self.__dict__["_shape"])):
            return
        self.__dict__["_shape"] = shape

    @property
    def value(self) -> Any:
        scopes = internals.stateless_scope()
        if scopes.in_stateless_scope():
            scoped = scopes.get_stateless_scope().get_current_value(self)
            if scoped is not None:
                return self._maybe_autocast(scoped)
        state = self.__dict__["_tps_state"]
        if _traced_or_replica():
            value = updates.read(state)
            if _reads.aggregated and state._kind == SYNC_ON_READ:
                frame = frames.current()
                if frame is not None and frame.level == "replica" and updates._replica_context() is not None:
                    value = _replica_aggregate(state, value)
            return self._maybe_autocast(value)
        raw = self.__dict__.get("_value")
        if raw is None:
            return super().value
        if state._kind == SYNC_ON_READ:  # the aggregate, replicated like the other variables
            cached = self.__dict__.get("_tps_aggregate")
            if cached is not None and cached[0] is raw and not cached[1].is_deleted():   # Keras donates its state
                return self._maybe_autocast(_seen(state, cached[1]))
            total = _program(state, "aggregate")(raw)
            dispatch.track(total)   # a program with a collective: counted against the in-flight bound
            if not isinstance(total, jax.core.Tracer):   # inside another trace (Keras's symbolic build): no cache
                self.__dict__["_tps_aggregate"] = (raw, total)
            return self._maybe_autocast(_seen(state, total))
        return self._maybe_autocast(_seen(state, raw))

    def _update(self, method: str, value: Any) -> Any:
        if internals.stateless_scope().in_stateless_scope() or not _traced_or_replica():
            return None
        value = self._convert_to_tensor(value, dtype=self._dtype)
        updates.write(self.__dict__["_tps_state"], method, value, False)
        return value

    def assign(self, value: Any) -> Any:
        done = self._update("assign", value)
        return done if done is not None else super().assign(value)

    def assign_add(self, value: Any) -> Any:
        done = self._update("assign_add", value)
        return done if done is not None else super().assign_add(value)

    def assign_sub(self, value: Any) -> Any:
        done = self._update("assign_sub", value)
        return done if done is not None else super().assign_sub(value)

    def _direct_assign(self, value: Any) -> None:
        state = self.__dict__.get("_tps_state")
        if state is not None and isinstance(value, jax.core.Tracer) and self.__dict__.get("_value") is None:
            frame = frames.current()
            if frame is not None and state._strategy is not None:
                # Created in a traced step from a traced value (a tf.Module-style wrapper built at its
                # first call): the program computes the first value (replica 0's for a mirrored
                # variable, TensorFlow's rule) and writes it back; until then a placeholder.
                with jax.ensure_compile_time_eval():
                    self.__dict__["_value"] = _place(np.zeros(value.shape, self._dtype), sharding_of(state))
                state._pending_init = True
                updates.initialise_in_frame(state, frame, value)
                return None
        if state is None or isinstance(value, jax.core.Tracer):
            return super()._direct_assign(value)
        if state._kind == SYNC_ON_READ:
            # tf.keras's cross-replica assign of a sync-on-read variable: reading it back gives `value`.
            if not isinstance(value, jax.Array):
                value = np.asarray(value, dtype=self._dtype)
            value = value.astype(self._dtype)
            replicated = NamedSharding(state._strategy.mesh, P())
            on_host = _host_spread(state, value)
            if on_host is not None:
                # A small value on one process: the copies are made on the host and placed with the
                # value itself in one transfer (no program: Keras's per-epoch metric reset and
                # state sync assign every metric variable).
                spread, kept = jax.device_put(on_host, (sharding_of(state), replicated))
            else:
                spread = _program(state, "spread")(value)
                dispatch.track(spread)
                kept = _place(value, replicated)
            self.__dict__["_value"] = spread
            # The next cross-replica read is `value` itself: keep it (replicated, as the aggregate
            # program would give it), so Keras's per-epoch reset / state sync / result round trip
            # runs no aggregate program.
            self.__dict__["_tps_aggregate"] = (spread, kept)
            return None
        if not (isinstance(value, jax.Array) and value.dtype == self._dtype):
            value = jnp.asarray(value, dtype=self._dtype)
        self.__dict__["_value"] = _place(value, sharding_of(state))
        return None
