"""Turning per-replica host pieces into distributed values on the devices.

Equal-shaped pieces become one ``[R, ...]`` array sharded over the replica
axis, built with ``jax.make_array_from_process_local_data`` (so the same code
works across hosts: each process gives its local replicas' rows). Ragged
pieces (a partial last batch) become one zero-padded ``[R, ...]`` array that
keeps each replica's true shape (the ragged back end slices it back).
String (object) leaves stay on the host as NumPy.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.values.distributed import PerReplica
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS


def group(strategy: Any, pieces: list[Any], fetch_to_device: bool, whole: Any = None,
          first_replica: int = 0, global_sizes: list[int] | None = None) -> Any:
    """One step: a structure whose leaves are ``PerReplica`` of the local replicas' pieces.

    Args:
      strategy: the strategy (its mesh and replica count).
      pieces: one element structure per local replica.
      fetch_to_device: put numeric leaves on the devices.
      whole: optionally the unsplit element when every piece has the same size,
        so a leaf can be reshaped to ``[R, b/R, ...]`` without a host copy.
      first_replica: global id of the first local replica (pipelines simulated
        in one process hold only some replicas: they get per-device arrays).
      global_sizes: every replica's piece size when they differ somewhere in the job
        (known from the cross-process agreement): each leaf learns every replica's shape.
    """
    n_global = strategy.num_replicas_in_sync
    if n_global == 1:
        piece = pieces[0]
        if not fetch_to_device:
            return piece
        device = strategy.worker_devices[0]
        return jax.tree_util.tree_map(lambda x: _put_one(x, device), piece)
    leaves_per = [jax.tree_util.tree_flatten(p) for p in pieces]
    treedef = leaves_per[0][1]
    whole_leaves = jax.tree_util.tree_flatten(whole)[0] if whole is not None else None
    out = []
    for k in range(treedef.num_leaves):
        column = [lp[0][k] for lp in leaves_per]
        leaf = _group_leaf(strategy, column, fetch_to_device,
                           whole_leaves[k] if whole_leaves else None, first_replica, global_sizes)
        out.append(leaf)
    return jax.tree_util.tree_unflatten(treedef, out)


def _put_one(x: Any, device: Any) -> Any:
    x = np.asarray(x) if not isinstance(x, bytes) else x
    if isinstance(x, bytes) or x.dtype == object:
        return x
    return jax.device_put(x, device)


def _group_leaf(strategy: Any, column: list[Any], fetch: bool, whole: Any, first_replica: int,
                global_sizes: list[int] | None = None) -> Any:
    column = [np.asarray(c) if not isinstance(c, bytes) else c for c in column]
    first = column[0]
    if not fetch or isinstance(first, bytes) or first.dtype == object:
        return PerReplica(column)
    shapes = {c.shape for c in column}
    n_local = len(column)
    simulated = jax.process_count() == 1 and n_local != strategy.num_replicas_in_sync
    sharding = NamedSharding(strategy.mesh, P(REPLICA_AXIS))
    if simulated:
        devices = strategy.replica_devices[first_replica:first_replica + n_local]
        return PerReplica([jax.device_put(c, d) for c, d in zip(column, devices)])
    if global_sizes is not None or len(shapes) > 1:
        # A ragged step: one zero-padded [R, ...] array that keeps every replica's true shape.
        value = PerReplica(column)
        if global_sizes is not None:
            value.set_global_shapes([(s,) + first.shape[1:] for s in global_sizes])
        stacked = value.stacked_array(sharding)
        if global_sizes is None and jax.process_count() > 1:
            return value
        # Components are then views of the device array (on each replica's device), not host pieces.
        return PerReplica.from_stacked(stacked, value.shapes)
    if whole is not None and first.ndim and np.shape(whole)[0] == n_local * first.shape[0]:
        local = np.asarray(whole).reshape((n_local,) + first.shape)
    else:
        local = np.stack(column)
    global_shape = (strategy.num_replicas_in_sync,) + first.shape
    if jax.process_count() == 1:
        array = jax.device_put(local, sharding)
    else:
        array = jax.make_array_from_process_local_data(sharding, local, global_shape)
    return PerReplica.from_stacked(array)
