"""Local components of distributed arrays: one array per local replica, on its device(s).

``experimental_local_results`` is called every step by loops that log a loss, so a
component must cost (almost) nothing to make:

- a replicated array (``Mirrored``, mirrored variables) already holds each replica's copy
  as a shard: the component is that shard (no copy, no dispatch); a replica with
  several cores gets its whole logical value, assembled without a copy from its cores'
  shards as one array over the replica's own cores;
- a stacked ``[R, ...]`` array (``PerReplica``) holds each replica's component with a
  leading axis of 1. On one process, one small cached program re-lays the whole array
  out so that each device holds its replica's component with the leading axis dropped
  (``out_specs=P()`` over the replica axis, unchecked: each device's buffer is its own
  replica's value), so R components cost one dispatch instead of R reshapes. Across
  processes each process reshapes its own shards (a global program would need every
  process to ask for local results at once). Ragged components are trimmed to their
  true shapes.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.jax_shims.array_protocol import single_device_arrays
from tpustrategy._src.types import Shape
from tpustrategy._src.values import mesh_axis, movement


def _named(arr: Any) -> NamedSharding | None:
    sharding = getattr(arr, "sharding", None)
    return sharding if isinstance(sharding, NamedSharding) else None


@functools.cache
def _replica_submesh(mesh: Mesh, replica: int) -> Mesh:
    return Mesh(mesh.devices[replica], (mesh_axis.CORE_AXIS,))


def _assemble(mesh: Mesh, replica: int, shape: Shape, spec: P, pieces: dict[Any, Any]) -> Any:
    """Replica ``replica``'s value from its cores' buffers (no copy)."""
    sub = _replica_submesh(mesh, replica)
    buffers = [pieces[d] for d in sub.devices.flat]
    return jax.make_array_from_single_device_arrays(shape, NamedSharding(sub, spec), buffers)


def _strip_replica(spec: P) -> P:
    return P(*[None if e == mesh_axis.REPLICA_AXIS else e for e in tuple(spec)[1:]])


# Per sharding: the positions of its replicas' devices among an array's shards, in replica order;
# None when that is the shards' own order (the usual case: a mesh lists its devices in order).
_orders: dict[Any, tuple[int, ...] | None] = {}
_UNKNOWN: Any = object()


def _in_replica_order(arr: Any, sharding: Any) -> tuple[Any, ...]:
    """The single-device arrays of ``arr`` (one per local device of its ``sharding``) in the
    replicas' order; the order is worked out once per sharding."""
    buffers = single_device_arrays(arr)
    order = _orders.get(sharding, _UNKNOWN)
    if order is _UNKNOWN:
        order = _replica_order(arr, sharding)
    return tuple(buffers) if order is None else tuple([buffers[i] for i in order])


def _replica_order(arr: Any, sharding: Any) -> tuple[int, ...] | None:
    mesh = sharding.mesh
    shards = arr.addressable_shards
    order: tuple[int, ...] | None = tuple(
        sorted(range(len(shards)), key=lambda i: mesh_axis.device_index(mesh, shards[i].device)))
    if order == tuple(range(len(shards))):
        order = None
    if len(_orders) > 256:
        _orders.clear()
    _orders[sharding] = order
    return order


def per_device_components(copy: jax.Array) -> tuple[Any, ...]:
    """The components of a program's per-device copy of a stacked value (``PerReplica.from_output``):
    its buffers in replica order (one process, one device per replica: each device's buffer
    is its own replica's component)."""
    return _in_replica_order(copy, copy.sharding)


def replicated_components(arr: jax.Array, count: int) -> tuple[Any, ...]:
    """The local replicas' copies of a replicated array, in replica order."""
    sharding = _named(arr)
    if sharding is None or len(arr.sharding.device_set) == 1:
        return (arr,) * count
    mesh = cast(Mesh, sharding.mesh)  # a concrete array's sharding has a concrete mesh
    if not mesh_axis.has_cores(mesh):
        return _in_replica_order(arr, sharding)
    by_replica: dict[int, dict[Any, Any]] = {}
    for s in arr.addressable_shards:
        r, _ = mesh_axis.device_position(mesh, s.device)
        by_replica.setdefault(r, {})[s.device] = s.data
    if all(s.data.shape == arr.shape for s in arr.addressable_shards):
        return tuple(by_replica[r][mesh.devices[r, 0]] for r in sorted(by_replica))
    return tuple(_assemble(mesh, r, arr.shape, sharding.spec, by_replica[r]) for r in sorted(by_replica))


def _trim(x: Any, shape: Shape | None) -> Any:
    if shape is None or tuple(x.shape) == shape:
        return x
    return x[tuple(slice(0, d) for d in shape)]


def stacked_components(stacked: Any, shapes: tuple[Shape, ...] | None) -> tuple[Any, ...]:
    """The local replicas' components of a stacked ``[R, ...]`` value, in replica order."""

    def true_shape(i: int) -> Shape | None:
        return shapes[i] if shapes is not None else None

    sharding = _named(stacked)
    if isinstance(stacked, jax.core.Tracer) or sharding is None or len(stacked.sharding.device_set) == 1:
        return tuple(_trim(stacked[i], true_shape(i)) for i in range(stacked.shape[0]))
    mesh = cast(Mesh, sharding.mesh)  # a concrete array's sharding has a concrete mesh
    spec = tuple(sharding.spec) + (None,) * (stacked.ndim - len(tuple(sharding.spec)))
    simple = (spec[0] == mesh_axis.REPLICA_AXIS and all(e is None for e in spec[1:])
              and not mesh_axis.has_cores(mesh) and jax.process_count() == 1
              and mesh.devices.size == stacked.shape[0])
    if simple:
        out = movement.relayout(mesh, stacked.ndim)(stacked)
        parts = _in_replica_order(out, out.sharding)
        return parts if shapes is None else tuple(_trim(x, true_shape(i)) for i, x in enumerate(parts))
    # Each process reshapes its own shards; a replica split over cores is assembled over them.
    by_replica: dict[int, dict[Any, Any]] = {}
    for s in stacked.addressable_shards:
        r = s.index[0].start or 0
        by_replica.setdefault(r, {})[s.device] = s.data
    component_shape = tuple(stacked.shape[1:])
    out = []
    for r in sorted(by_replica):
        pieces = {d: b.reshape(b.shape[1:]) for d, b in by_replica[r].items()}
        if mesh_axis.has_cores(mesh):
            first = next(iter(pieces.values()))
            if tuple(first.shape) == component_shape:
                value = pieces[mesh.devices[r, 0]]
            else:
                value = _assemble(mesh, r, component_shape, _strip_replica(sharding.spec), pieces)
        else:
            value = next(iter(pieces.values()))
        out.append(_trim(value, true_shape(r)))
    return tuple(out)
