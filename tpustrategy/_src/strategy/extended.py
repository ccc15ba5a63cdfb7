"""``strategy.extended``: the ``tf.distribute.StrategyExtended`` methods TensorFlow code calls.

Keras optimizers, custom loops and TensorFlow's own tests reach for
``strategy.extended.reduce_to`` / ``batch_reduce_to`` / ``update`` and a few
properties; they map onto the strategy's reduce and context machinery.

A reduction's ``destinations`` decide its result's form, as in TensorFlow: one
device (a device string, a ``jax.Device``, a host value, a distributed value or
variable with one local replica) gives a plain array, which ``float()`` and
NumPy accept; several local replicas give a ``Mirrored``. No data moves: a
reduced value lives replicated on every replica's device.

``update(var, fn)`` runs ``fn`` on each component of a sync-on-read variable
(each gets the same arguments, TensorFlow's rule), and once on a mirrored one
(its components are one array).

``TPUStrategyExtended`` is ``TPUStrategy``'s (one client in TensorFlow: its worker
devices are every replica's, and it requires static shapes); a strategy names its
class in ``Strategy._extended_type``. This module is below ``base`` and imports no
other strategy module but ``logical_devices``: the context it needs comes from
``context.stack`` (outside every scope the replica context is the default one).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.context import contracts, stack
from tpustrategy._src.replica.context import DefaultReplicaContext
from tpustrategy._src.strategy.logical_devices import logical_device_scope
from tpustrategy._src.values.distributed import DistributedValues, Mirrored


def _is_variable(x: Any) -> bool:
    return hasattr(x, "read_value") and hasattr(x, "kind") and hasattr(x, "is_distributed_variable")


def _check_destinations(destinations: Any, api: str) -> None:
    if destinations is None:
        raise ValueError(f"strategy.extended.{api}: `destinations` must not be None.")
    ok = (isinstance(destinations, (str, jax.Device, DistributedValues, jax.Array, np.ndarray, np.generic,
                                    float, int))
          and not isinstance(destinations, bool)) or _is_variable(destinations)
    if not ok:
        raise TypeError(
            f"strategy.extended.{api}: `destinations` must be a device string, a jax.Device, a variable, a "
            f"distributed value or an array. Received: {destinations!r} ({type(destinations).__name__})."
        )


def _destination_count(strategy: Any, destinations: Any) -> int:
    """How many local devices TensorFlow would place the result on."""
    if isinstance(destinations, DistributedValues) or contracts.is_distributed_variable(destinations):
        return len(strategy.experimental_local_results(destinations))
    return 1  # a device, or a value on one device (a host tensor, a plain variable)


class _Component:
    """One replica's component of a sync-on-read variable, as ``extended.update``'s ``fn`` sees it.

    Reads give the component's value; ``assign``/``assign_add``/``assign_sub``
    set it (with the variable's dtype and shape checks). The new value is
    written back to the variable after ``fn`` has run on every component.
    """

    def __init__(self, var: Any, value: Any, device: Any = None):
        self._var = var
        self._value = value
        self.device = device

    name = property(lambda self: self._var.name)
    shape = property(lambda self: tuple(self._var.shape))
    dtype = property(lambda self: self._var.dtype)
    synchronization = property(lambda self: self._var.synchronization)
    aggregation = property(lambda self: self._var.aggregation)

    def read_value(self) -> Any:
        return self._value

    value = read_value

    def numpy(self) -> np.ndarray:
        return np.asarray(self._value)

    def __jax_array__(self) -> Any:
        return self._value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self._value, dtype=dtype)

    def _write(self, method: str, value: Any, read_value: bool) -> Any:
        from tpustrategy._src.variables import updates

        self._value = updates.combine(self._var, method, jnp.asarray(self._value), _unwrap_value(value))
        return self if read_value else None

    def assign(self, value: Any, use_locking: bool = False, name: Any = None, read_value: bool = True) -> Any:
        return self._write("assign", value, read_value)

    def assign_add(self, delta: Any, use_locking: bool = False, name: Any = None, read_value: bool = True) -> Any:
        return self._write("assign_add", delta, read_value)

    def assign_sub(self, delta: Any, use_locking: bool = False, name: Any = None, read_value: bool = True) -> Any:
        return self._write("assign_sub", delta, read_value)

    def __repr__(self) -> str:
        return f"<component of {self._var!r} on {self.device}>"


def _unwrap_value(x: Any) -> Any:
    if isinstance(x, _Component):
        return x._value
    if isinstance(x, Mirrored):
        return x.replicated_array
    return x


def _pick(structure: Any, index: int, replica_tracer: bool = False) -> Any:
    """Component ``index`` of every distributed leaf (a local index for host values)."""

    def one(x: Any) -> Any:
        if isinstance(x, Mirrored):
            return x.replicated_array
        if isinstance(x, DistributedValues):
            if replica_tracer and x.replica_tracer is not None:
                return x.replica_tracer
            return x.values[index]
        return x

    return jax.tree_util.tree_map(one, structure, is_leaf=lambda x: isinstance(x, DistributedValues))


def _mirrored_args(structure: Any) -> Any:
    """Arguments of a mirrored variable's update: one value per leaf (its components must agree)."""

    def one(x: Any) -> Any:
        if isinstance(x, Mirrored):
            return x.replicated_array
        if isinstance(x, DistributedValues) and not x.is_traced and not x.is_ragged:
            parts = [np.asarray(c) for c in x.values]
            if all(np.array_equal(parts[0], p) for p in parts[1:]):
                return x.values[0]
        return x  # a differing PerReplica: the variable's own write explains why it cannot take it

    return jax.tree_util.tree_map(one, structure, is_leaf=lambda x: isinstance(x, DistributedValues))


def _result(var: Any, results: list[Any], components: list[_Component], group: bool) -> Any:
    if all(r is c for r, c in zip(results, components)):
        return var
    if all(r is None for r in results):
        return None
    results = [_unwrap_value(r) for r in results]
    if len(results) == 1:
        return results[0]
    from tpustrategy._src.values.distributed import PerReplica

    return PerReplica(results) if group else tuple(results)


def _update_each_component(var: Any, fn: Callable[..., Any], args: tuple, kwargs: dict, group: bool) -> Any:
    """``fn`` on each component of ``var`` (sync-on-read, or mirrored in a replica trace); written back together."""
    from tpustrategy._src.variables import frames

    frame = frames.current()
    if frame is not None and frame.level == "replica":
        # merge_fn of a compiled replica function: this trace is one replica, its component is local
        # (a mirrored variable written with a value that differs per replica fails the program's check).
        component = _Component(var, frame.read(var, tuple(var.shape)))
        result = fn(component, *_pick(args, 0, True), **_pick(kwargs, 0, True))
        frame.write(var, jnp.asarray(component._value, var.dtype))
        return _result(var, [result], [component], group)
    stacked = frames.global_value(var)
    if isinstance(stacked, jax.core.Tracer) or not isinstance(stacked, jax.Array):
        # Inside tps.function: the whole [R, ...] value is traced; every replica is a row.
        components = [_Component(var, stacked[i]) for i in range(stacked.shape[0])]
        results = [fn(c, *_pick(args, i), **_pick(kwargs, i)) for i, c in enumerate(components)]
        frames.set_global_value(var, jnp.stack([jnp.asarray(c._value, var.dtype) for c in components]))
        return _result(var, results, components, group)
    # Concrete: this process's rows (one per local replica; a replica with several cores holds copies).
    rows: dict[int, list[Any]] = {}
    for shard in stacked.addressable_shards:
        rows.setdefault(shard.index[0].start or 0, []).append(shard)
    components, results = [], []
    for local_index, row in enumerate(sorted(rows)):
        first = rows[row][0]
        component = _Component(var, first.data[0], first.device)
        results.append(fn(component, *_pick(args, local_index), **_pick(kwargs, local_index)))
        components.append(component)
    pieces = []
    for component, row in zip(components, sorted(rows)):
        new = np.asarray(component._value, var.dtype)[None]
        pieces += [jax.device_put(new, shard.device) for shard in rows[row]]
    frames.set_global_value(
        var, jax.make_array_from_single_device_arrays(stacked.shape, stacked.sharding, pieces))
    return _result(var, results, components, group)


class StrategyExtended:
    """Additional strategy APIs (``strategy.extended``)."""

    def __init__(self, strategy: Any):
        self._strategy = strategy

    # Reductions --------------------------------------------------------------------------
    def reduce_to(self, reduce_op: Any, value: Any, destinations: Any, options: Any = None) -> Any:
        """Reduces ``value`` across replicas onto ``destinations``.

        Args:
          reduce_op: ``ReduceOp.SUM``/``MEAN`` or a string.
          value: a ``PerReplica``/``Mirrored`` or a value equal on every replica.
          destinations: a device string or ``jax.Device``, a value (its device), or a
            distributed value or variable (its local replicas' devices).
          options: a ``tps.experimental.CommunicationOptions`` (accepted).

        Returns:
          A plain array when ``destinations`` is one device (TensorFlow's tensor on
          that device), else a ``Mirrored`` with one component per local replica.
        """
        _check_destinations(destinations, "reduce_to")
        reduced = self._strategy.reduce(reduce_op, value, axis=None)
        if _destination_count(self._strategy, destinations) == 1:
            return reduced
        return self._replicate(reduced)

    def batch_reduce_to(self, reduce_op: Any, value_destination_pairs: Any, options: Any = None) -> list[Any]:
        """``reduce_to`` for each ``(value, destinations)`` pair, in order."""
        pairs = list(value_destination_pairs)
        for pair in pairs:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(
                    "strategy.extended.batch_reduce_to: `value_destination_pairs` must be a list of "
                    f"(value, destinations) pairs. Received an element {pair!r}."
                )
        return [self.reduce_to(reduce_op, v, d, options) for v, d in pairs]

    def _replicate(self, reduced: Any) -> Any:
        n = self._strategy.num_replicas_in_sync
        if n == 1:
            return reduced
        from tpustrategy._src.execution.program import Placement

        placement = Placement.of(self._strategy)
        return jax.tree_util.tree_map(
            lambda x: Mirrored.from_replicated(placement.put(jnp.asarray(x), False), n), reduced)

    def _replica_ctx_all_reduce(self, reduce_op: Any, value: Any, options: Any = None) -> Any:
        """TensorFlow's private name of ``get_replica_context().all_reduce`` (its own tests call it)."""
        entry = stack.current_entry()
        # Outside every scope the current replica context is the default one (one replica, id 0).
        ctx = DefaultReplicaContext(self._strategy, 0) if entry is None else entry.replica_context
        if ctx is None or ctx.is_default and self._strategy.num_replicas_in_sync > 1:
            raise RuntimeError(
                "strategy.extended._replica_ctx_all_reduce must be called in a replica context (inside "
                "strategy.run).\nFix: call it from the replica function, or use strategy.reduce outside it."
            )
        return ctx.all_reduce(reduce_op, value, options)

    def _get_local_replica_id(self, replica_id_in_sync_group: Any) -> Any:
        """This process's index of a replica (TensorFlow's private helper): global id minus the first local one."""
        offset = self._strategy._replica_offset
        local = self._num_devices_per_worker
        if isinstance(replica_id_in_sync_group, (int, np.integer)):
            return int(replica_id_in_sync_group) - offset
        if offset == jax.process_index() * local:
            # The same program on every process (its constants may not depend on the process).
            return jnp.remainder(replica_id_in_sync_group, local)
        return replica_id_in_sync_group - offset

    @property
    def _num_devices_per_worker(self) -> int:
        """Replicas on this process (TensorFlow's private name on MultiWorkerMirroredStrategy)."""
        return len(self._strategy._local_devices)

    # Updates -----------------------------------------------------------------------------
    def update(self, var: Any, fn: Callable[..., Any], args: Any = (), kwargs: Any = None, group: bool = True) -> Any:
        """Runs ``fn(v, *args, **kwargs)`` in cross-replica context (how optimizers update variables).

        A sync-on-read variable's ``fn`` runs once per component, each with the
        same arguments (a component of a ``PerReplica`` argument for its replica),
        as in TensorFlow: ``update(v, lambda c, x: c.assign(x), args=(5.0,))`` sets
        every component to 5.0. A mirrored or plain variable's ``fn`` runs once.

        Returns:
          What ``fn`` returned (the variable when ``fn`` returned its component).
        """
        from tpustrategy._src.variables import frames

        args, kwargs = tuple(args), dict(kwargs or {})
        with self._strategy.scope() if stack.in_cross_replica_context() else contextlib.nullcontext():
            frame = frames.current()
            in_replica_trace = frame is not None and frame.level == "replica"
            if getattr(var, "kind", None) == "sync_on_read" and _is_variable(var) or (in_replica_trace and _is_variable(var)
                                                                 and var.kind == "mirrored"):
                return _update_each_component(var, fn, args, kwargs, group)
            return fn(var, *_mirrored_args(args), **_mirrored_args(kwargs))

    def update_non_slot(self, colocate_with: Any, fn: Callable[..., Any], args: Any = (), kwargs: Any = None,
                        group: bool = True) -> Any:
        """Runs ``fn(*args, **kwargs)`` once, in cross-replica context (TensorFlow's ``update_non_slot``).

        For state that is not a slot of one variable (an optimizer's step
        counter). ``colocate_with`` names where TensorFlow would run it; JAX
        places the result by the arrays ``fn`` uses, so it is accepted as is.

        Returns:
          What ``fn`` returned.
        """
        args, kwargs = tuple(args), dict(kwargs or {})
        with self._strategy.scope() if stack.in_cross_replica_context() else contextlib.nullcontext():
            return fn(*_mirrored_args(args), **_mirrored_args(kwargs))

    def call_for_each_replica(self, fn: Callable[..., Any], args: Any = (), kwargs: Any = None) -> Any:
        return self._strategy.run(fn, args, kwargs)

    def experimental_logical_device(self, logical_device_id: int) -> Any:
        """Accepted and validated: under SPMD partitioning XLA places variables on the cores."""
        return logical_device_scope(self._strategy, logical_device_id)

    def value_container(self, value: Any) -> Any:
        return value

    @contextlib.contextmanager
    def colocate_vars_with(self, colocate_with_variable: Any) -> Iterator[None]:
        yield

    def variable_created_in_scope(self, v: Any) -> bool:
        """Whether ``v`` was created under this strategy's scope."""
        return getattr(v, "_strategy", None) is self._strategy

    # Properties ---------------------------------------------------------------------------
    @property
    def worker_devices(self) -> tuple[Any, ...]:
        """The devices replicas run on: this process's (Mirrored, MultiWorkerMirrored, OneDevice), or,
        for ``TPUStrategy`` (one client in TensorFlow), every replica's (core 0 of each)."""
        return tuple(self._strategy._local_devices)

    @property
    def parameter_devices(self) -> tuple[Any, ...]:
        """The devices variables live on: the worker devices (every replica holds a copy)."""
        return self.worker_devices

    @property
    def num_hosts(self) -> int:
        """Processes (hosts) the strategy's replicas span (TensorFlow defines it on TPUStrategy)."""
        return len({d.process_index for d in self._strategy._devices})

    @property
    def num_replicas_per_host(self) -> int:
        """Replicas on each host: TensorFlow's ``min(num_replicas, cores_per_host // cores_per_replica)``."""
        devices = self._strategy._devices
        per_host = max(sum(1 for d in devices if d.process_index == p) for p in {d.process_index for d in devices})
        return min(self._strategy.num_replicas_in_sync, per_host)

    @property
    def experimental_require_static_shapes(self) -> bool:
        """Whether the strategy needs static shapes (TensorFlow: ``TPUStrategy`` only)."""
        return False

    @property
    def experimental_between_graph(self) -> bool:
        return False

    @property
    def experimental_should_init(self) -> bool:
        return True

    @property
    def should_checkpoint(self) -> bool:
        return True

    @property
    def should_save_summary(self) -> bool:
        return jax.process_index() == 0

    @property
    def num_replicas_in_sync(self) -> int:
        return self._strategy.num_replicas_in_sync

    def __getattr__(self, name: str) -> Any:
        # Anything else TensorFlow code reads from `extended` that the strategy itself has.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._strategy, name)


class TPUStrategyExtended(StrategyExtended):
    """``TPUStrategy``'s ``strategy.extended`` (TensorFlow's ``TPUExtended``): one client drives every replica."""

    @property
    def worker_devices(self) -> tuple[Any, ...]:
        """Every replica's device (core 0 of each), over the whole job."""
        return tuple(self._strategy._devices)

    @property
    def experimental_require_static_shapes(self) -> bool:
        return True
