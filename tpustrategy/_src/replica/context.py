"""``ReplicaContext``: what a replica function sees (``tf.distribute.ReplicaContext``).

Three kinds: the default context outside any strategy (one replica), the
compiled path's context (one trace stands for every replica; the replica id is
``lax.axis_index``), and the eager path's context (one per replica thread).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from tpustrategy._src.context import stack as context
from tpustrategy._src.reduce_op import ReduceOp, canonical_reduce_op
from tpustrategy._src.replica import collectives
from tpustrategy._src.values import regroup
from tpustrategy._src.values.distributed import DistributedValues, PerReplica
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS


def device_name(device: Any) -> str:
    """TensorFlow's full name of a JAX device: ``/job:worker/replica:0/task:<process>/device:<KIND>:<local index>``."""
    peers = sorted((d for d in jax.devices() if d.process_index == device.process_index
                    and d.platform == device.platform), key=lambda d: d.id)
    index = next((i for i, d in enumerate(peers) if d == device), device.id)
    return f"/job:worker/replica:0/task:{device.process_index}/device:{device.platform.upper()}:{index}"


class ReplicaContext:
    """The per-replica view of a strategy, available inside ``strategy.run``."""

    _is_default = False

    def __init__(self, strategy: Any, replica_id_in_sync_group: Any):
        self._strategy = strategy
        self._replica_id = replica_id_in_sync_group

    @property
    def strategy(self) -> Any:
        """The strategy running this replica function."""
        return self._strategy

    @property
    def is_default(self) -> bool:
        """Whether this is the default replica context (no strategy; ``context.contracts``)."""
        return self._is_default

    @property
    def num_replicas_in_sync(self) -> int:
        """Number of replicas taking part in collectives (a Python int)."""
        return self._strategy.num_replicas_in_sync

    @property
    def replica_id_in_sync_group(self) -> Any:
        """This replica's global id in ``[0, num_replicas_in_sync)`` (an int32 scalar)."""
        return self._replica_id

    @property
    def devices(self) -> tuple[str, ...]:
        """The devices this replica runs on, as TensorFlow device names (``tf.distribute.ReplicaContext.devices``).

        On the eager path and in the default context, the replica's one device; on
        the compiled path, where one trace stands for every replica, the devices of
        all of this process's replicas.
        """
        device = getattr(self, "_device", None)
        devices = [device] if device is not None else list(self._strategy.worker_devices)
        if self._is_default:
            devices = devices[:1]
        return tuple(device_name(d) for d in devices)

    def _check_current(self, api: str) -> None:
        entry = context.current_entry()
        if entry is None or entry.replica_context is None:
            raise RuntimeError("Need to be inside `call_for_each_replica()`")
        if entry.replica_context is not self:
            if entry.strategy is not self._strategy:
                raise RuntimeError(
                    f"Mismatching tf.distribute.Strategy objects: {entry.strategy!r} is not "
                    f"{self._strategy!r}."
                )
            raise RuntimeError("Mismatching ReplicaContext.")

    def all_reduce(self, reduce_op: Any, value: Any, options: Any = None) -> Any:
        """Reduces ``value`` (any nest of arrays) across replicas; all get the result.

        Args:
          reduce_op: ``ReduceOp.SUM``/``MEAN`` or a case-insensitive string.
          value: a nested structure of arrays or Python numbers.
          options: ignored (TensorFlow's ``CommunicationOptions``).

        Returns:
          The same structure holding the reduced values. Integer MEANs are
          returned in JAX's default float dtype. The gradient of an all-reduce
          is the same all-reduce of the upstream gradients.
        """
        op = canonical_reduce_op(reduce_op)
        leaves, treedef = jax.tree_util.tree_flatten(value)
        for leaf in leaves:
            if isinstance(leaf, DistributedValues):
                raise TypeError(
                    "all_reduce: `value` contains a DistributedValues "
                    f"({type(leaf).__name__}); inside a replica function pass this "
                    "replica's own value instead."
                )
        return jax.tree_util.tree_unflatten(treedef, self._all_reduce_leaves(op, leaves))

    def all_gather(self, value: Any, axis: int, options: Any = None) -> Any:
        """Concatenates every replica's ``value`` along ``axis``, in replica order."""
        leaves, treedef = jax.tree_util.tree_flatten(value)
        return jax.tree_util.tree_unflatten(treedef, self._all_gather_leaves(leaves, axis))

    def merge_call(self, merge_fn: Any, args: Any = (), kwargs: Any = None) -> Any:
        """Runs ``merge_fn(strategy, *args, **kwargs)`` once, in cross-replica context.

        Per-replica arguments reach ``merge_fn`` grouped as ``PerReplica``;
        each replica gets its own component of any ``PerReplica`` in the result
        and every other value unchanged.
        """
        self._check_current("merge_call")
        if not isinstance(args, (tuple, list)):
            raise ValueError(f"positional args must be a list or tuple, got {type(args)}")
        return self._merge_call(merge_fn, tuple(args), dict(kwargs or {}))

    def _update(self, var: Any, fn: Any, args: Any = (), kwargs: Any = None, group: bool = True) -> Any:
        """TensorFlow's private ``ReplicaContext._update``: ``extended.update`` through ``merge_call``."""

        def merge_fn(strategy: Any, *merged_args: Any, **merged_kwargs: Any) -> Any:
            return strategy.extended.update(var, fn, merged_args, merged_kwargs, group=group)

        return self.merge_call(merge_fn, args=args, kwargs=kwargs)

    def experimental_logical_device(self, logical_device_id: int) -> Any:
        """Accepted and validated: under SPMD partitioning XLA places the replica's work on its cores."""
        return self._strategy.logical_device_scope(logical_device_id)

    # Subclass hooks --------------------------------------------------------------
    def _all_reduce_leaves(self, op: ReduceOp, leaves: list[Any]) -> list[Any]:
        raise NotImplementedError  # overridden by every concrete context

    def _all_gather_leaves(self, leaves: list[Any], axis: int) -> list[Any]:
        raise NotImplementedError  # overridden by every concrete context

    def _merge_call(self, merge_fn: Any, args: tuple, kwargs: dict) -> Any:
        raise NotImplementedError  # overridden by every concrete context

    def __repr__(self) -> str:
        return f"<{type(self).__name__} replica {self._replica_id} of {self.num_replicas_in_sync}>"


class DefaultReplicaContext(ReplicaContext):
    """The replica context outside any strategy: one replica, id 0."""

    _is_default = True

    def _check_current(self, api: str) -> None:
        return None

    def _all_reduce_leaves(self, op: ReduceOp, leaves: list[Any]) -> list[Any]:
        return [collectives.as_reduce_dtype(x, op) for x in leaves]

    def _all_gather_leaves(self, leaves: list[Any], axis: int) -> list[Any]:
        return [jnp.asarray(x) for x in leaves]

    def _merge_call(self, merge_fn: Any, args: tuple, kwargs: dict) -> Any:
        with context.push(self._strategy, None):
            return merge_fn(self._strategy, *args, **kwargs)


class CompiledReplicaContext(ReplicaContext):
    """One trace that stands for every replica (the compiled path)."""

    def __init__(self, strategy: Any):
        super().__init__(strategy, jax.lax.axis_index(REPLICA_AXIS).astype(jnp.int32))

    def _all_reduce_leaves(self, op: ReduceOp, leaves: list[Any]) -> list[Any]:
        n = self.num_replicas_in_sync
        return [collectives.compiled_all_reduce(op, x, n) for x in leaves]

    def _all_gather_leaves(self, leaves: list[Any], axis: int) -> list[Any]:
        return [collectives.compiled_all_gather(x, axis) for x in leaves]

    def _merge_call(self, merge_fn: Any, args: tuple, kwargs: dict) -> Any:
        n = self.num_replicas_in_sync

        def group(x: Any) -> Any:
            if isinstance(x, jax.core.Tracer):
                return PerReplica.from_replica_tracer(x, n)
            return x

        args, kwargs = jax.tree_util.tree_map(group, (args, kwargs))
        with context.push(self._strategy, None):
            result = merge_fn(self._strategy, *args, **kwargs)
        return regroup.select_replica_traced(result, self._replica_id)


class EagerReplicaContext(ReplicaContext):
    """The context of one replica thread (the eager path)."""

    def __init__(self, strategy: Any, replica_id: int, local_id: int, device: Any, rendezvous: Any):
        with jax.default_device(device):
            rid = jnp.asarray(replica_id, jnp.int32)
        super().__init__(strategy, rid)
        self._local_id = local_id
        self._device = device
        self._rendezvous = rendezvous

    # ``context.contracts.EagerReplicaContract``.
    @property
    def local_replica_id(self) -> int:
        """This thread's replica among the process's replicas (0-based)."""
        return self._local_id

    @property
    def device(self) -> Any:
        """This replica's device."""
        return self._device

    @property
    def rendezvous(self) -> Any:
        """The replica threads' meeting point."""
        return self._rendezvous

    def _all_reduce_leaves(self, op: ReduceOp, leaves: list[Any]) -> list[Any]:
        self._check_current("all_reduce")
        return collectives.eager_all_reduce(self, op, leaves)

    def _all_gather_leaves(self, leaves: list[Any], axis: int) -> list[Any]:
        self._check_current("all_gather")
        return collectives.eager_all_gather(self, leaves, axis)

    def _merge_call(self, merge_fn: Any, args: tuple, kwargs: dict) -> Any:
        everyone = self._rendezvous.exchange(self._local_id, "merge_call", (merge_fn, args, kwargs))
        result: Any = None
        if self._local_id == 0:
            first_fn = everyone[0][0]
            grouped_args, grouped_kwargs = regroup.regroup([(a, k) for _, a, k in everyone])
            try:
                with context.push(self._strategy, None):
                    result = ("ok", first_fn(self._strategy, *grouped_args, **grouped_kwargs))
            except BaseException as e:  # handed to every replica, then re-raised there
                result = ("error", e)
        outcome = self._rendezvous.exchange(self._local_id, "merge_result", result)[0]
        if outcome[0] == "error":
            raise outcome[1]
        return regroup.select_replica(self._local_id, outcome[1])
