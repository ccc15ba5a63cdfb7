"""Distributed values: ``PerReplica`` (one component per replica) and ``Mirrored``.

A value that lives on every replica has one of four representations, chosen
by who made it; ``.values`` always gives the tuple of local components:

- components: a tuple of per-replica values (user-built, host pieces);
- stacked: one array of shape ``[R, ...]`` sharded over the mesh's replica
  axis (what compiled programs return; passing it back costs no copy). When
  the replicas' components differ in shape (a ragged step) the array is padded
  with zeros to the largest component and ``shapes`` holds each replica's
  true shape;
- replica tracer: inside a compiled replica trace, the one tracer that stands
  for every replica's component (what ``merge_fn`` receives);
- replicated (``Mirrored`` only): one array replicated on every replica's device.

This module is the only one that touches these fields. The rest of the package
uses the small API below: ``stacked_array``, ``shapes``, ``is_ragged``,
``is_traced``, ``replica_tracer``, ``replicated_array``, ``block_until_ready``,
and the constructors ``from_stacked`` / ``from_replica_tracer`` /
``Mirrored.from_replicated`` / ``from_parts``. Distributed values are JAX pytrees, so
``jax.block_until_ready`` and ``jax.tree`` work on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from tpustrategy._src.jax_shims.array_protocol import ARRAY_IMPL
from tpustrategy._src.types import Shape
from tpustrategy._src.values import mesh_axis, views
from tpustrategy._src.values.leaf import LeafKind, LeafSpec

REPLICA_AXIS = mesh_axis.REPLICA_AXIS


def _is_tracer(x: Any) -> bool:
    return isinstance(x, jax.core.Tracer)


class DistributedValues:
    """Base class of values with one component per replica."""

    __slots__ = ("_values", "_stacked", "_shapes", "_tracer", "_replicated", "_num_replicas",
                 "_home", "_local_copy", "_leaf", "__weakref__")

    def __init__(self, values: Sequence[Any] | None = None):
        if values is not None and not isinstance(values, (list, tuple)):
            raise TypeError(
                f"{type(self).__name__}(values=...) expects a list or tuple of per-replica "
                f"components. Received: {type(values).__name__}."
            )
        self._values = tuple(values) if values is not None else None
        self._stacked = None
        self._shapes: tuple[Shape, ...] | None = None
        self._tracer = None
        self._replicated = None
        self._num_replicas: int = len(values) if values is not None else 0
        self._home = None  # the replica-axis sharding of the strategy that made it
        self._local_copy = None
        self._leaf: tuple[Any, ...] | None = None  # its leaf spec and array, once known (``leaf``)

    # Constructors (package API) -------------------------------------------------
    @classmethod
    def from_parts(cls, num_replicas: int, stacked: Any = None, replicated: Any = None,
                   local_copy: Any = None, leaf: Any = None) -> Any:
        """A value with every slot set: the given representation, the rest empty (the one place
        that sets them; ``specialised``'s generated result builders call it directly, one frame
        per program result)."""
        obj = cls.__new__(cls)
        obj._values = None
        obj._stacked = stacked
        obj._shapes = None
        obj._tracer = None
        obj._replicated = replicated
        obj._num_replicas = num_replicas
        obj._home = None
        obj._local_copy = local_copy
        obj._leaf = leaf
        return obj

    @classmethod
    def from_stacked(cls, stacked: Any, shapes: Sequence[Shape] | None = None) -> Any:
        """From an ``[R, ...]`` array (or a tracer of one) sharded over the replicas.

        Args:
          stacked: the array; padded with zeros when ``shapes`` differ.
          shapes: each replica's true component shape when they differ (ragged).
        """
        obj = cls.from_parts(int(stacked.shape[0]))
        obj._stacked = stacked
        if shapes is not None:
            shapes = tuple(tuple(int(d) for d in s) for s in shapes)
            if len(set(shapes)) > 1 or shapes[0] != tuple(stacked.shape[1:]):
                obj._shapes = shapes
        return obj

    @classmethod
    def from_output(cls, stacked: Any, num_replicas: int, local_copy: Any = None) -> Any:
        """A program's ``[R, ...]`` result (not ragged) with ``R == num_replicas``, and its
        per-device copy when the program made one (each device's buffer is its own replica's
        component, so ``values`` are its shards: no dispatch)."""
        return cls.from_parts(num_replicas, stacked, None, local_copy)

    @classmethod
    def from_replica_tracer(cls, tracer: Any, num_replicas: int) -> Any:
        """From the one per-replica tracer of a compiled replica function."""
        obj = cls.from_parts(num_replicas)
        obj._tracer = tracer
        return obj

    # Package API ---------------------------------------------------------------------
    @property
    def num_replicas(self) -> int:
        """Number of replicas over the whole job."""
        return self._num_replicas

    @property
    def replica_tracer(self) -> Any:
        """Inside a compiled replica trace: this replica's traced component (else None)."""
        return self._tracer

    @property
    def is_traced(self) -> bool:
        """Whether the value is made of tracers (inside a compiled trace)."""
        if self._tracer is not None:
            return True
        for x in (self._stacked, self._replicated):
            if x is not None:
                return _is_tracer(x)
        return self._values is not None and any(_is_tracer(v) for v in self._values)

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """Each replica's component shape (the job's replicas; local ones for components)."""
        if self._shapes is not None:
            return self._shapes
        if self._stacked is not None:
            return (tuple(self._stacked.shape[1:]),) * self._num_replicas
        if self._replicated is not None:
            return (tuple(np.shape(self._replicated)),) * self._num_replicas
        if self._tracer is not None:
            return (tuple(self._tracer.shape),) * self._num_replicas
        return tuple(tuple(np.shape(v)) for v in self._values or ())

    @property
    def is_ragged(self) -> bool:
        """Whether the replicas' components differ in shape (anywhere in the job)."""
        return len(set(self.shapes)) > 1

    def set_global_shapes(self, shapes: Sequence[Shape]) -> None:
        """Multi-host: every replica's component shape (this process holds only its own)."""
        shapes = tuple(tuple(int(d) for d in s) for s in shapes)
        self._num_replicas = len(shapes)
        self._shapes = shapes
        self._leaf = None

    def set_home(self, split_sharding: Any) -> None:
        """Records the replica-axis sharding of the strategy that built the value (host-built values)."""
        self._home = split_sharding

    @property
    def has_stacked(self) -> bool:
        """Whether the value holds its ``[R, ...]`` stacked array (built, or made by a program)."""
        return self._stacked is not None

    @property
    def padded_shapes(self) -> tuple[Shape, ...] | None:
        """Each replica's true shape when the stacked array is padded to them, else None."""
        return self._shapes

    def stacked_array(self, sharding: Any = None) -> Any:
        """The ``[R, ...]`` array of the components (zero-padded when ragged).

        Built once from the components and kept, so a host-built value passed
        again costs nothing. With ``sharding`` (the strategy's replica-axis
        sharding, or the one recorded by ``set_home``) it is placed there;
        without, it is left on the host.
        """
        if sharding is None:
            sharding = self._home
        stacked = self._stacked
        if stacked is not None:
            if sharding is None or _is_tracer(stacked) or stacked.sharding == sharding:
                return stacked
            if isinstance(stacked, jax.Array):
                self._stacked = jax.device_put(stacked, sharding)
                return self._stacked
        if self._tracer is not None:
            raise ValueError("A replica-traced value has no stacked form outside its trace.")
        components = self.values
        shapes = [tuple(np.shape(c)) for c in components]
        if len({len(x) for x in shapes}) > 1:
            from tpustrategy._src.errors import InvalidArgumentError

            other = next(x for x in shapes if len(x) != len(shapes[0]))
            raise InvalidArgumentError(
                f"Shape mismatch: a {type(self).__name__}'s components have different ranks "
                f"({[list(x) for x in shapes]}): Ranks of all input tensors should match (Shape must be rank "
                f"{len(shapes[0])} but is rank {len(other)}); per-replica values may differ only in their "
                "sizes, not in their number of dimensions.\nFix: give every replica's value the same rank "
                "(reshape it, or add an axis with x[None])."
            )
        every = self._shapes if self._shapes is not None else shapes
        target = tuple(max(d) for d in zip(*every)) if every and every[0] else ()
        if any(_is_tracer(c) for c in components):
            import jax.numpy as jnp

            padded = [pad_to(jnp.asarray(c), target, jnp) for c in components]
            return jnp.stack(padded)
        host = np.stack([pad_to(np.asarray(c), target, np) for c in components])
        if sharding is None:
            return host
        if jax.process_count() > 1:
            global_shape = (len(sharding.mesh.devices.flat),) + host.shape[1:]
            stacked = jax.make_array_from_process_local_data(sharding, host, global_shape)
        else:
            stacked = jax.device_put(host, sharding)
        self._stacked = stacked
        if len(set(shapes)) > 1 and self._shapes is None and jax.process_count() == 1:
            self._shapes = tuple(shapes)
        return stacked

    def block_until_ready(self) -> DistributedValues:
        """Waits until every component has been computed; returns ``self``."""
        jax.block_until_ready(jax.tree_util.tree_leaves(self))
        return self

    # Public surface -------------------------------------------------------------------
    @property
    def values(self) -> tuple[Any, ...]:
        """The local replicas' components, in replica order."""
        found = self._values
        if found is not None:
            return found
        if self._local_copy is not None:  # a program's small result (a loss): its per-device copy
            found = self._values = views.per_device_components(self._local_copy)
        elif self._tracer is not None:
            gathered = jax.lax.all_gather(self._tracer, REPLICA_AXIS)
            found = self._values = tuple(gathered[i] for i in range(self._num_replicas))
        else:
            found = self._values = views.stacked_components(self._stacked, self._shapes)
        return found

    def __len__(self) -> int:
        return len(self.values)

    def _only_local(self) -> Any:
        """The one local component of a job with one replica per process (else None).

        TensorFlow's ``run`` on a worker with one device returns that device's tensor, so
        ``result.numpy()`` works there; a value with one local component does the same.
        """
        if jax.process_count() > 1 and not self.is_traced and len(self.values) == 1:
            return self.values[0]
        return None

    def numpy(self) -> np.ndarray:
        only = self._only_local()
        if only is not None:
            return np.asarray(only)
        return self.__array__()

    def __float__(self) -> float:
        return float(self.numpy())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        only = self._only_local()
        if only is not None:
            return np.asarray(only, dtype=dtype)
        raise TypeError(
            f"A {type(self).__name__} holds one value per replica, so it has no single array "
            "value (np.asarray / jnp.asarray of it).\nFix: take the components with "
            "strategy.experimental_local_results(value), or combine them with "
            "strategy.reduce(tps.ReduceOp.SUM or MEAN, value, axis=None) or strategy.gather(value, axis=0)."
        )

    def __repr__(self) -> str:
        if self.is_traced:
            inner = self._tracer if self._tracer is not None else (
                self._stacked if self._stacked is not None else self._replicated)
            aval = getattr(inner, "aval", None)
            return f"{type(self).__name__}(<traced {aval}>)"
        inner = ",\n".join(f"  {i}: {v!r}" for i, v in enumerate(self.values))
        return f"{type(self).__name__}:{{\n{inner}\n}}"


class PerReplica(DistributedValues):
    """Values that may differ per replica (``tf.distribute.DistributedValues``)."""

    __slots__ = ()

    def leaf(self, split: Any) -> tuple[LeafSpec, Any] | None:
        """The value as a program argument: its ``LeafSpec`` (``PER_REPLICA``: the stacked shape
        and dtype, ragged true shapes) and the stacked array placed on ``split``; None when the
        value holds no concrete stacked array (host-built and not stacked yet, or traced). A
        value does not change, so the pair is kept with it, for that ``split``."""
        kept = self._leaf
        if kept is not None and kept[0] is split:
            return kept[1]  # type: ignore[no-any-return]
        stacked: Any = self._stacked
        if type(stacked) is not ARRAY_IMPL:
            return None
        if split is not None and stacked.sharding != split:
            stacked = self.stacked_array(split)  # placed there once, and kept
        pair = LeafSpec(LeafKind.PER_REPLICA, stacked.shape, stacked.dtype, False, self._shapes), stacked
        self._leaf = (split, pair)
        return pair


class Mirrored(DistributedValues):
    """Values known to be equal on every replica."""

    __slots__ = ()

    @classmethod
    def from_replicated(cls, array: Any, num_replicas: int, spec: LeafSpec | None = None) -> Mirrored:
        """From one array replicated on every replica's device (or a tracer of one).

        ``spec``: the value's ``LeafSpec`` when the caller knows it (a program's output: the same
        for every call), kept so the next call that passes the value reads it without a look.
        """
        return cls.from_parts(num_replicas, None, array, None,  # type: ignore[no-any-return]
                              (spec, array) if spec is not None else None)

    @staticmethod
    def spec_of(array: Any, num_replicas: int) -> LeafSpec:
        """The ``LeafSpec`` of a ``Mirrored`` holding the concrete replicated ``array``."""
        return LeafSpec(LeafKind.MIRRORED, array.shape, array.dtype, array.weak_type, None, num_replicas)

    def leaf(self, split: Any) -> tuple[LeafSpec, Any] | None:
        """The value as a program argument: its ``LeafSpec`` (``MIRRORED``: shape, dtype, weak type,
        number of replicas) and its replicated array; None when it holds no concrete replicated
        array. Kept with the value."""
        kept = self._leaf
        if kept is not None:
            return kept
        value = self.replicated_array
        if type(value) is not ARRAY_IMPL:
            return None
        pair = Mirrored.spec_of(value, self._num_replicas), value
        self._leaf = pair
        return pair

    @property
    def replicated_array(self) -> Any:
        """One copy of the value (the replicated array when there is one)."""
        if self._replicated is not None:
            return self._replicated
        if self._stacked is not None:
            return self._stacked[0]
        if self._tracer is not None:
            return self._tracer
        return self.values[0]

    @property
    def values(self) -> tuple[Any, ...]:
        if self._values is None and self._replicated is not None:
            arr = self._replicated
            if isinstance(arr, jax.Array) and not _is_tracer(arr):
                self._values = views.replicated_components(arr, self._local_count())
            else:
                self._values = (arr,) * self._local_count()
            return self._values
        return super().values

    def _local_count(self) -> int:
        if jax.process_count() == 1:
            return self._num_replicas
        return self._num_replicas // int(jax.process_count())

    def __jax_array__(self) -> Any:
        return self.replicated_array

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.replicated_array, dtype=dtype)


def pad_to(x: Any, target: Shape, xp: Any = np) -> Any:
    """``x`` zero-padded at the end of each axis to ``target`` (``xp``: ``np`` or ``jnp``); the
    one padding rule of ragged values (stacked arrays, the ragged program, the eager path)."""
    if tuple(x.shape) == tuple(target):
        return x
    return xp.pad(x, [(0, t - d) for t, d in zip(target, x.shape)])


# Pytree registration: the children are the arrays of the current representation.
def _flatten(v: DistributedValues) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    if v._stacked is not None:
        return (v._stacked,), ("stacked", v._num_replicas, v._shapes)
    if v._replicated is not None:
        return (v._replicated,), ("replicated", v._num_replicas, None)
    if v._tracer is not None:
        return (v._tracer,), ("tracer", v._num_replicas, None)
    return tuple(v._values or ()), ("components", v._num_replicas, None)


def _unflatten(cls: type[DistributedValues]) -> Any:
    def build(aux: tuple[Any, ...], children: Sequence[Any]) -> Any:
        kind, n, shapes = aux
        obj = cls.from_parts(n)
        if kind == "stacked":
            obj._stacked = children[0]
            obj._shapes = shapes
        elif kind == "replicated":
            obj._replicated = children[0]
        elif kind == "tracer":
            obj._tracer = children[0]
        else:
            obj._values = tuple(children)
        return obj

    return build


for _cls in (PerReplica, Mirrored, DistributedValues):
    jax.tree_util.register_pytree_node(_cls, _flatten, _unflatten(_cls))
