"""``tps.Variable``: mirrored, sync-on-read and plain variables.

Created under ``strategy.scope()`` (or inside ``run``) a variable is
distributed: a *mirrored* variable (synchronization AUTO/ON_WRITE) is one
replicated ``jax.Array`` (``NamedSharding(mesh, P())``); a *sync-on-read*
variable (ON_READ) keeps one component per replica as an array of shape
``[R, ...]`` sharded over the replicas, aggregated when read in cross-replica
context. Created outside any scope it is a plain variable on the default
device. Reads and writes inside compiled programs are functionalised
(``frames``); the aggregation rules of updates live in ``updates``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.typing import DTypeLike

from tpustrategy._src.context import contracts
from tpustrategy._src.context import stack as context
from tpustrategy._src.jax_shims import array_protocol
from tpustrategy._src.types import Shape
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS
from tpustrategy._src.variables import arguments, copying, frames, ids, operators, sparse, updates
from tpustrategy._src.variables.component import ReplicaComponent
from tpustrategy._src.variables.enums import (
    VariableAggregation,
    VariableSynchronization,
    canonical_aggregation,
    canonical_synchronization,
)
from tpustrategy._src.variables.indexed_slices import IndexedSlices
from tpustrategy._src.variables.state import (
    MIRRORED,
    PLAIN,
    SYNC_ON_READ,
    first_device,
    strategy_of,
)
from tpustrategy._src.variables.store import StoredValue


class _VariableMeta(type):
    # Returns Any on purpose: a type checker then types ``Variable(...)`` by ``__init__``.
    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        ctx = updates._replica_context()
        if isinstance(ctx, contracts.EagerReplicaContract):
            # Eager path: replica 0 creates the variable; every replica shares it (as in TF).
            made = super().__call__(*args, **kwargs) if ctx.local_replica_id == 0 else None
            name = kwargs.get("name", args[2] if len(args) > 2 else None)
            deposits = ctx.rendezvous.exchange(ctx.local_replica_id, "create_variable", (name, made))
            names = [n for n, _ in deposits]
            canonical = [canonical_variable_name(n) for n in names]
            mismatched = [r for r, c in enumerate(canonical) if c != canonical[0]]
            if mismatched:
                # TensorFlow: mirrored_variable_test.testNonMatchingVariableCreation (its first line).
                raise RuntimeError(
                    f"Tried to create variable {names[mismatched[0]]} with mismatching name on device "
                    f"{mismatched[0]}\n(tps.Variable: the replicas created one variable under different "
                    f"names {names} (replica r's name is at position r); a variable created in a replica "
                    "function is one mirrored variable, named by replica 0, so every replica must give it "
                    "the same name up to TensorFlow's `_<digit>` suffixes.)\nFix: "
                    "pass the same `name` on every replica (not a per-replica value), or create the "
                    "variables under strategy.scope() before strategy.run."
                )
            return deposits[0][1]
        frame = frames.current()
        if frame is not None:
            reused = frame.next_created()
            if reused is not None:
                if reused._pending_init:
                    updates.initialise_in_frame(reused, frame, _initial_value(args, kwargs))
                return reused
        var = super().__call__(*args, **kwargs)
        if frame is not None:
            frame.register_created(var)
            if var._pending_init:
                updates.initialise_in_frame(var, frame, var._traced_init)
                var._traced_init = None
        return var


_UNIQUIFIED_SCOPE = re.compile(r"_\d/")
_UNIQUIFIED_END = re.compile(r"_\d$")


def canonical_variable_name(name: str | None) -> str:
    """The name replicas must agree on when each creates "the same" variable in a replica
    function: TensorFlow's ``shared_variable_creator`` rule (``None`` is ``"Variable"``; one
    ``_<digit>`` before a ``/`` or at the end is dropped, so ``foo_0`` and ``foo_1`` agree)."""
    if name is None:
        return "Variable"
    return _UNIQUIFIED_END.sub("", _UNIQUIFIED_SCOPE.sub("/", name))


def _initial_value(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return _resolve(args[0] if args else kwargs.get("initial_value"))


def _resolve(value: Any) -> Any:
    """An initial value as given: called if callable, read if a variable."""
    if callable(value):
        value = value()
    if isinstance(value, Variable):
        value = value.read_value()
    return value


class Variable(StoredValue, metaclass=_VariableMeta):
    """A mutable array with ``tf.Variable``'s distribution semantics.

    Args:
      initial_value: an array-like, or a callable returning one.
      trainable: whether optimizers should update it (default: True, except
        for ON_READ variables).
      name: a name (default ``"Variable"``).
      dtype: the dtype (default: inferred from ``initial_value``).
      synchronization: a ``VariableSynchronization``.
      aggregation: a ``VariableAggregation`` for updates in replica context.
      shape: accepted for compatibility; must match the initial value.
    """

    _tps_distributed_variable = False
    __array_priority__ = 100

    # The state (``state.VariableState`` names what the package's other modules read of it).
    _id: int
    _kind: str
    _base_name: str
    _strategy: contracts.StrategyContract | None
    _sync: VariableSynchronization
    _aggregation: VariableAggregation
    _constraint: Callable[[jax.Array], jax.Array] | None
    _shape: Shape
    _dtype: np.dtype[Any]
    _trainable: bool
    _pending_init: bool
    _traced_init: jax.Array | None
    _value: jax.Array
    _initial: np.ndarray | jax.Array | None
    _core_spec: P | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Variables hold concrete arrays even when created while a function is traced.
        with jax.ensure_compile_time_eval():
            self._init(*args, **kwargs)

    def _init(
        self,
        initial_value: Any,
        trainable: bool | None = None,
        name: str | None = None,
        dtype: DTypeLike | None = None,
        synchronization: VariableSynchronization | str | int | None = VariableSynchronization.AUTO,
        aggregation: VariableAggregation | str | int | None = VariableAggregation.NONE,
        shape: Sequence[int] | None = None,
        constraint: Callable[[jax.Array], jax.Array] | None = None,
        **unused: Any,
    ) -> None:
        base = name or "Variable"
        if unused:
            arguments.check_unused(unused, base)
        arguments.check_constraint(constraint, base)
        self._constraint = constraint
        self._base_name = base
        self._sync = canonical_synchronization(synchronization, base)
        self._aggregation = canonical_aggregation(aggregation, base)
        initial_value = _resolve(initial_value)
        arguments.check_initial_value(initial_value, base)
        self._pending_init = False
        self._traced_init = None
        if isinstance(initial_value, jax.core.Tracer):
            if frames.current() is None:
                raise ValueError(
                    f"tps.Variable {base!r}: the initial value depends on values traced by a JAX "
                    "transformation that is not tps.function or strategy.run, so it has no concrete value "
                    "to start from.\nFix: create the variable under strategy.scope() before the "
                    "transformation, or pass a concrete initial value (NumPy array, Python number, or a callable)."
                )
            # Created inside a traced step from a traced value: the program computes the
            # value (replica 0's for a mirrored variable, TensorFlow's rule) and writes it back.
            self._pending_init = True
            self._traced_init = initial_value if dtype is None else initial_value.astype(dtype)
            initial_value = np.zeros(initial_value.shape, dtype or initial_value.dtype)
        value = jnp.asarray(initial_value, dtype=dtype)
        if shape is not None and tuple(shape) != tuple(value.shape):
            raise ValueError(
                f"tps.Variable {base!r}: shape={tuple(shape)} does not match the initial value's "
                f"shape {tuple(value.shape)}."
            )
        self._shape = tuple(value.shape)
        self._dtype = value.dtype
        self._trainable = (self._sync is not VariableSynchronization.ON_READ) if trainable is None else bool(trainable)
        self._id = ids.next_id()
        context.check_variable_creation()
        strategy = context.current_strategy() if context.has_strategy() else None
        self._strategy = strategy
        if strategy is None:
            self._kind = PLAIN
            self._value = jax.device_put(value, jax.local_devices()[0])
            self._initial = None if self._pending_init else self._value
            return
        self._tps_distributed_variable = True
        if self._sync is VariableSynchronization.NONE:
            raise ValueError(
                "`NONE` variable synchronization mode is not supported with tf.distribute "
                f"strategy. Please change the `synchronization` for variable: {base}"
            )
        if self._aggregation is VariableAggregation.MEAN and not jnp.issubdtype(self._dtype, jnp.inexact):
            raise ValueError(
                "creating distributed tf.Variable with aggregation=MEAN and a non-floating dtype "
                "is not supported, please use a different aggregation or dtype"
                f" (variable {base!r} has dtype {self._dtype})."
            )
        mesh = strategy.mesh
        self._initial = None if self._pending_init else np.asarray(value)
        if self._sync is VariableSynchronization.ON_READ:
            self._kind = SYNC_ON_READ
            n = strategy.num_replicas_in_sync
            host = np.broadcast_to(np.asarray(value), (n,) + self._shape)
            self._value = arguments.put_global(host, NamedSharding(mesh, P(REPLICA_AXIS)))
        else:
            self._kind = MIRRORED
            self._value = arguments.put_global(np.asarray(value), NamedSharding(mesh, P()))

    # Properties --------------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self._base_name}:0"

    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def T(self) -> jax.Array:  # noqa: N802 - NumPy's name
        return jnp.transpose(self.read_value())

    def astype(self, dtype: DTypeLike) -> jax.Array:
        return jnp.asarray(self.read_value()).astype(dtype)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(f"len() of unsized object: {self.name!r} is a scalar variable")
        return self.shape[0]

    @property
    def trainable(self) -> bool:
        return self._trainable

    @property
    def synchronization(self) -> VariableSynchronization:
        if self._sync is VariableSynchronization.AUTO and self._strategy is not None:
            return VariableSynchronization.ON_WRITE
        return self._sync

    @property
    def aggregation(self) -> VariableAggregation:
        return self._aggregation

    @property
    def constraint(self) -> Callable[[jax.Array], jax.Array] | None:
        """The projection optimizers apply after each update (``tf.Variable(constraint=)``), or None."""
        return getattr(self, "_constraint", None)

    @property
    def strategy(self) -> contracts.StrategyContract | None:
        """The strategy the variable was created under (None for a plain variable)."""
        return self._strategy

    @property
    def is_distributed_variable(self) -> bool:
        """Whether the variable was created under a strategy (``context.contracts``)."""
        return self._tps_distributed_variable

    @property
    def kind(self) -> str:
        """``"mirrored"``, ``"sync_on_read"`` or ``"plain"`` (how the variable is stored)."""
        return self._kind

    @property
    def unique_id(self) -> int:
        """A number no other variable of this process has (TensorFlow's ``_unique_id``).

        A key that names the variable without keeping it alive (``tps.GradientTape``'s
        per-variable records); a ``deepcopy`` gets its own.
        """
        return self._id

    @property
    def core_spec(self) -> P | None:
        """The ``PartitionSpec`` over a replica's cores when split to logical devices, else None."""
        spec: P | None = getattr(self, "_core_spec", None)
        return spec

    @core_spec.setter
    def core_spec(self, spec: P | None) -> None:
        self._core_spec = spec

    @property
    def global_shape(self) -> Shape:
        """The shape of the variable's one global array (``[R, ...]`` when sync-on-read)."""
        return self._global_shape()

    def local_components(self) -> tuple[jax.Array, ...]:
        """One array per local replica (``experimental_local_results``)."""
        return self._local_components()

    def _global_shape(self) -> Shape:
        if self._kind == SYNC_ON_READ:
            return (strategy_of(self).num_replicas_in_sync,) + self._shape
        return self._shape

    def _local_components(self) -> tuple[jax.Array, ...]:
        """One array per local replica (``experimental_local_results``)."""
        if self._kind == PLAIN:
            return (self._value,)
        strategy = strategy_of(self)
        n = strategy.num_replicas_in_sync
        local = range(strategy.first_local_replica, strategy.first_local_replica + len(strategy.worker_devices))
        frame = frames.current()
        if frame is not None:
            # In a trace the components are the frame's current value, not the stored one
            # (a stored value would be baked into the program as a constant). In a replica
            # function a sync-on-read component is another replica's copy: gathered.
            if frame.level == "replica":
                mine = frame.read(self, self._shape)
                if self._kind != SYNC_ON_READ:
                    return (mine,) * len(local)
                gathered = jax.lax.all_gather(mine, REPLICA_AXIS)
                return tuple(gathered[i] for i in local)
            value = frames.global_value(self)
        else:
            value = self._value
        if isinstance(value, jax.core.Tracer):
            return tuple(value[i] for i in local) if self._kind == SYNC_ON_READ else (value,) * len(local)
        from tpustrategy._src.values.distributed import Mirrored, PerReplica

        components: tuple[jax.Array, ...]
        if self._kind == SYNC_ON_READ:
            components = PerReplica.from_stacked(value).values
        else:
            components = Mirrored.from_replicated(value, n).values
        return components

    @property
    def values(self) -> tuple[ReplicaComponent, ...] | tuple[jax.Array]:
        """The local replicas' copies (``MirroredVariable.values``): ``ReplicaComponent``s with
        ``device``, ``read_value`` and ``assign*``; ``(value,)`` for a plain variable."""
        if self._kind == PLAIN:
            return (self._value,)
        strategy = strategy_of(self)
        offset = strategy.first_local_replica
        count = len(strategy.worker_devices)
        return tuple(ReplicaComponent(self, i, offset + i) for i in range(count))

    @property
    def distribute_strategy(self) -> contracts.StrategyContract | None:
        """TensorFlow's name of ``strategy``: the strategy the variable was created under."""
        return self._strategy

    # Reads -------------------------------------------------------------------------------
    def value(self) -> jax.Array:
        """The value in the current context (see ``read_value``)."""
        return updates.read(self)

    def read_value(self) -> jax.Array:
        """Reads the variable.

        In a replica function: this replica's copy. In cross-replica context: the
        mirrored value, or the aggregate of a sync-on-read variable's components.
        """
        return updates.read(self)

    def numpy(self) -> np.ndarray:
        return np.asarray(self.read_value())

    def __jax_array__(self) -> jax.Array:
        return self.read_value()

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        return np.asarray(self.read_value(), dtype=dtype)

    def __float__(self) -> float:
        return float(self.read_value())

    def __int__(self) -> int:
        return int(self.read_value())

    def __bool__(self) -> bool:
        return bool(self.read_value())

    def __hash__(self) -> int:
        return hash(self._id)

    def __eq__(self, other: object) -> bool:  # identity, like tf.Variable in TF2 sets/dicts
        return self is other

    def __repr__(self) -> str:
        kind = {MIRRORED: "MirroredVariable", SYNC_ON_READ: "SyncOnReadVariable", PLAIN: "Variable"}[self._kind]
        shown: object
        try:
            if isinstance(self._value, jax.core.Tracer) or frames.current():
                shown = "<traced>"
            else:
                shown = np.asarray(self.read_value())
        except ValueError:
            shown = "<unreadable>"
        return f"<tps.{kind} {self.name!r} shape={self._shape} dtype={self._dtype} value={shown}>"

    # Writes ------------------------------------------------------------------------------
    def assign(
        self, value: Any, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> Variable | None:
        """Sets the variable (aggregated across replicas in replica context)."""
        updates.write(self, "assign", value, read_value)
        return self if read_value else None

    def assign_add(
        self, delta: Any, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> Variable | None:
        """Adds ``delta`` (aggregated across replicas in replica context)."""
        updates.write(self, "assign_add", delta, read_value)
        return self if read_value else None

    def assign_sub(
        self, delta: Any, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> Variable | None:
        """Subtracts ``delta`` (aggregated across replicas in replica context)."""
        updates.write(self, "assign_sub", delta, read_value)
        return self if read_value else None

    # Sparse reads and writes (``sparse``: every one is a dense read or write underneath) ---------
    def sparse_read(self, indices: Any, name: str | None = None) -> jax.Array:
        """Rows ``indices`` of the value (``tf.gather(v, indices)``)."""
        return sparse.sparse_read(self, indices)

    def gather_nd(self, indices: Any, name: str | None = None) -> jax.Array:
        """``tf.gather_nd(v, indices)``: the last dimension of ``indices`` indexes the leading dimensions."""
        return sparse.gather_nd(self, indices)

    def scatter_add(
        self, sparse_delta: IndexedSlices, use_locking: bool = False, name: str | None = None
    ) -> Variable:
        """Adds ``sparse_delta.values`` to rows ``sparse_delta.indices`` (a ``tps.IndexedSlices``)."""
        return sparse.scatter(self, "scatter_add", sparse_delta)

    def scatter_sub(
        self, sparse_delta: IndexedSlices, use_locking: bool = False, name: str | None = None
    ) -> Variable:
        """Subtracts ``sparse_delta.values`` from rows ``sparse_delta.indices``."""
        return sparse.scatter(self, "scatter_sub", sparse_delta)

    def scatter_mul(
        self, sparse_delta: IndexedSlices, use_locking: bool = False, name: str | None = None
    ) -> Variable:
        """Multiplies rows ``sparse_delta.indices`` by ``sparse_delta.values``."""
        return sparse.scatter(self, "scatter_mul", sparse_delta)

    def scatter_div(
        self, sparse_delta: IndexedSlices, use_locking: bool = False, name: str | None = None
    ) -> Variable:
        """Divides rows ``sparse_delta.indices`` by ``sparse_delta.values`` (integers truncate)."""
        return sparse.scatter(self, "scatter_div", sparse_delta)

    def scatter_min(
        self, sparse_delta: IndexedSlices, use_locking: bool = False, name: str | None = None
    ) -> Variable:
        """Rows ``sparse_delta.indices`` become the minimum of themselves and ``sparse_delta.values``."""
        return sparse.scatter(self, "scatter_min", sparse_delta)

    def scatter_max(
        self, sparse_delta: IndexedSlices, use_locking: bool = False, name: str | None = None
    ) -> Variable:
        """Rows ``sparse_delta.indices`` become the maximum of themselves and ``sparse_delta.values``."""
        return sparse.scatter(self, "scatter_max", sparse_delta)

    def scatter_update(
        self, sparse_delta: IndexedSlices, use_locking: bool = False, name: str | None = None
    ) -> Variable:
        """Sets rows ``sparse_delta.indices`` to ``sparse_delta.values``."""
        return sparse.scatter(self, "scatter_update", sparse_delta)

    def batch_scatter_update(
        self, sparse_delta: IndexedSlices, use_locking: bool = False, name: str | None = None
    ) -> Variable:
        """``v[b..., indices[b..., i]] = values[b..., i]`` for every batch index ``b``."""
        return sparse.batch_scatter_update(self, sparse_delta)

    def scatter_nd_add(self, indices: Any, updates: Any, name: str | None = None) -> Variable:
        """Adds ``updates`` at ``indices`` (``indices[..., k]`` index the first ``k`` dimensions)."""
        return sparse.scatter_nd(self, "scatter_nd_add", indices, updates)

    def scatter_nd_sub(self, indices: Any, updates: Any, name: str | None = None) -> Variable:
        """Subtracts ``updates`` at ``indices``."""
        return sparse.scatter_nd(self, "scatter_nd_sub", indices, updates)

    def scatter_nd_update(self, indices: Any, updates: Any, name: str | None = None) -> Variable:
        """Sets the elements or slices at ``indices`` to ``updates``."""
        return sparse.scatter_nd(self, "scatter_nd_update", indices, updates)

    def scatter_nd_max(self, indices: Any, updates: Any, name: str | None = None) -> Variable:
        """The elements at ``indices`` become the maximum of themselves and ``updates``."""
        return sparse.scatter_nd(self, "scatter_nd_max", indices, updates)

    def scatter_nd_min(self, indices: Any, updates: Any, name: str | None = None) -> Variable:
        """The elements at ``indices`` become the minimum of themselves and ``updates``."""
        return sparse.scatter_nd(self, "scatter_nd_min", indices, updates)

    # TensorFlow's other members ------------------------------------------------------------
    def get_shape(self) -> Shape:
        """The shape (``tf.Variable.get_shape``; the same as ``shape``)."""
        return self._shape

    @property
    def device(self) -> jax.Device | None:
        """The device of the variable's primary copy (replica 0's first device; a JAX ``Device``)."""
        value = self._value
        if isinstance(value, jax.core.Tracer):
            return None
        return first_device(value)

    @property
    def initial_value(self) -> jax.Array:
        """The value the variable was created with (an array; TensorFlow has it in graph mode only)."""
        if getattr(self, "_initial", None) is None:
            raise RuntimeError(
                f"tps.Variable {self.name!r}.initial_value: the variable was created inside a traced step "
                "from a traced value, so its initial value only existed inside that program.\nFix: read it "
                "with read_value() right after creating it, or create the variable from a concrete value.")
        return jnp.asarray(self._initial)

    def ref(self) -> ids.VariableRef:
        """A hashable reference to the variable (``deref()`` gives it back), for sets and dict keys."""
        return ids.VariableRef(self)

    def __iter__(self) -> Iterator[jax.Array]:
        if not self._shape:
            raise TypeError(f"Cannot iterate over a scalar tensor (variable {self.name!r} has shape ()).")
        value = self.read_value()
        return iter([value[i] for i in range(self._shape[0])])

    # Unary operators and indexing act on the current read (the binary ones are set below).
    def __neg__(self) -> jax.Array:
        return -self.read_value()

    def __pos__(self) -> jax.Array:
        return +jnp.asarray(self.read_value())

    def __abs__(self) -> jax.Array:
        return jnp.abs(self.read_value())

    def __invert__(self) -> jax.Array:
        return jnp.invert(self.read_value())

    def __getitem__(self, idx: Any) -> jax.Array:
        return self.read_value()[idx]

    def __copy__(self) -> Variable:
        # TensorFlow: copy.copy of a variable shares its state (a ResourceVariable returns itself).
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Variable:
        """A new variable of the same kind on the same strategy, with the current value (as TensorFlow)."""
        return copying.deep_copy(self, memo)


operators.install(Variable)

# A variable is an array to JAX: every ``jax.numpy`` / ``jax.nn`` / ``jax.lax`` function and
# ``jax.jit`` / ``jax.grad`` / ``jax.vmap`` take it as ``read_value()`` reads it in the current
# context (inside a trace: the functionalised read, never a baked-in constant). It stays a
# pytree leaf, as ``tf.nest`` treats variables, so ``jax.tree.map(lambda v: v.assign(...), vars)``
# still sees the variables.
array_protocol.register(Variable, lambda var: updates.read(var))
