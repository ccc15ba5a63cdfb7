"""Distributed values: ``PerReplica`` (one component per replica) and ``Mirrored``.

A value that lives on every replica has one of three representations, chosen
by who made it; ``.values`` always gives the tuple of local components:

- components: a tuple of per-replica values (user-built, eager path, ragged);
- stacked: one array of shape ``[R, ...]`` sharded over the mesh's replica axis
  (what the compiled path returns; passing it back to ``run`` costs no copy);
- traced: inside a replica function traced by the compiled path, the single
  per-replica tracer (what ``merge_fn`` receives), whose components are made on
  demand with an ``all_gather``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from tpustrategy._src.values import mesh_axis

REPLICA_AXIS = mesh_axis.REPLICA_AXIS


class DistributedValues:
    """Base class of values with one component per replica."""

    # _global_ragged: the components of some replica (maybe on another process) differ
    # in shape, so every process must take the eager path for this value.
    __slots__ = ("_values", "_stacked", "_traced", "_num_replicas", "_global_ragged", "__weakref__")

    def __init__(self, values: Sequence[Any] | None = None):
        if values is not None and not isinstance(values, (list, tuple)):
            raise TypeError(
                f"{type(self).__name__}(values=...) expects a list or tuple of per-replica "
                f"components. Received: {type(values).__name__}."
            )
        self._values = tuple(values) if values is not None else None
        self._stacked = None
        self._traced = None
        self._num_replicas = len(values) if values is not None else None
        self._global_ragged = False

    # Alternative constructors (internal) ---------------------------------------
    @classmethod
    def _make(cls, num_replicas: int, *, stacked: Any = None, traced: Any = None) -> Any:
        obj = cls.__new__(cls)
        obj._values = None
        obj._stacked = stacked
        obj._traced = traced
        obj._num_replicas = num_replicas
        obj._global_ragged = False
        return obj

    @classmethod
    def _from_stacked(cls, stacked: Any, num_replicas: int) -> Any:
        """From an ``[R, ...]`` array sharded over the replicas (or a tracer of one)."""
        return cls._make(num_replicas, stacked=stacked)

    @classmethod
    def _from_traced(cls, traced: Any, num_replicas: int) -> Any:
        """From the one per-replica tracer of a compiled replica function."""
        return cls._make(num_replicas, traced=traced)

    @property
    def values(self) -> tuple[Any, ...]:
        """The local replicas' components, in replica order."""
        if self._values is None:
            if self._traced is not None:
                gathered = jax.lax.all_gather(self._traced, REPLICA_AXIS)
                self._values = tuple(gathered[i] for i in range(self._num_replicas))
            else:
                self._values = _unstack(self._stacked)
        return self._values

    def _is_ragged(self) -> bool:
        if self._global_ragged:
            return True
        if self._values is None:
            return False
        shapes = {np.shape(v) for v in self._values}
        return len(shapes) > 1

    def __len__(self) -> int:
        return len(self.values)

    def __repr__(self) -> str:
        if self._traced is not None:
            return f"{type(self).__name__}(<traced {self._traced.aval}>)"
        inner = ",\n".join(f"  {i}: {v!r}" for i, v in enumerate(self.values))
        return f"{type(self).__name__}:{{\n{inner}\n}}"


class PerReplica(DistributedValues):
    """Values that may differ per replica (``tf.distribute.DistributedValues``)."""

    __slots__ = ()


class Mirrored(DistributedValues):
    """Values known to be equal on every replica."""

    __slots__ = ("_replicated",)

    @classmethod
    def _from_replicated(cls, array: Any, num_replicas: int) -> Mirrored:
        """From one array replicated on every replica's device (or a tracer of one)."""
        obj = cls._make(num_replicas)
        obj._replicated = array
        return obj

    @property
    def values(self) -> tuple[Any, ...]:
        if self._values is None and getattr(self, "_replicated", None) is not None:
            arr = self._replicated
            if isinstance(arr, jax.Array) and not isinstance(arr, jax.core.Tracer):
                shards = sorted(arr.addressable_shards, key=lambda s: _device_order(arr, s))
                self._values = tuple(s.data for s in shards)
            else:
                self._values = (arr,) * self._num_replicas
            return self._values
        return super().values

    def _primary(self) -> Any:
        """One copy of the value (the replicated array when there is one)."""
        replicated = getattr(self, "_replicated", None)
        return replicated if replicated is not None else self.values[0]

    def __jax_array__(self) -> Any:
        return self._primary()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self._primary(), dtype=dtype)


def _device_order(arr: jax.Array, shard: Any) -> int:
    mesh = getattr(arr.sharding, "mesh", None)
    if mesh is None:
        return 0
    return mesh_axis.device_index(mesh, shard.device)


def _unstack(stacked: Any) -> tuple[Any, ...]:
    if isinstance(stacked, jax.core.Tracer):
        return tuple(stacked[i] for i in range(stacked.shape[0]))
    if isinstance(stacked, jax.Array):
        shards = sorted(stacked.addressable_shards, key=lambda s: s.index[0].start or 0)
        return tuple(s.data.reshape(s.data.shape[1:]) for s in shards)
    return tuple(stacked[i] for i in range(len(stacked)))


def is_distributed(x: Any) -> bool:
    return isinstance(x, DistributedValues)
