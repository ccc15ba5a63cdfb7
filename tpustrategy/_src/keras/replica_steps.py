"""``fit``'s train step run per replica (one ``shard_map``), where that is provably the same step.

Keras jits its ``train_step`` over the global batch and lets XLA's SPMD partitioner split
it (what Keras's own ``DataParallel`` runs). Under a strategy the same step can run as
TensorFlow's ``MirroredStrategy`` runs Keras's: every replica steps on its own shard of
the batch, the gradients are averaged in one all-reduce before the optimizer, and the
metrics' variables — ``aggregation="sum"`` by Keras's own declaration, per-replica copies
summed on read (sync-on-read) — are each replica's own and summed at the end. It is the
program ``strategy.run`` builds for a custom loop, and on the devices measured here it runs
faster than the partitioned one (``benchmarks/keras_fit.py``).

The two steps compute the same thing only when the global batch's loss is the mean of the
replicas' losses — except for unsynchronized batch normalisation, where TensorFlow's
``MirroredStrategy`` itself computes per replica: each replica normalises with its own
batch's moments and updates its own copy of the moving statistics (Keras 3 creates them with
``aggregation="none"``, and TensorFlow lets a replica-context update of such a
``MirroredVariable`` change that replica's component only). Here too each replica keeps its
copy: the state goes in and out of the ``shard_map`` as a replicated array whose per-device
buffers differ, so Keras's programs (``evaluate``, ``predict``) use each device's copy for its
rows and every read (``numpy()``, ``get_weights``, saving, checkpoints) gives replica 0's,
TensorFlow's primary component. So this program is used only when every condition below
holds, and otherwise Keras's own program runs, unchanged:

- one process; the model's ``train_step``, ``compute_loss``, ``compute_loss_and_updates``,
  ``compute_metrics`` and ``_update_metrics_variables`` are Keras's own;
- every loss is a Keras built-in (a name, a function of ``keras.losses`` or one of its
  ``Loss`` classes) with ``reduction="sum_over_batch_size"``: a mean over the batch;
- no non-trainable variables except batch normalisation's moving statistics (synchronized
  layers all-reduce their moments in the step, ``sync_batch_norm``, so theirs stay equal;
  the others are each replica's own, as above) and random seed generators' states (every
  replica advances its copy alike, as TensorFlow's replicas do); every metric variable
  aggregated by ``"sum"``, every piece of state replicated over the strategy's devices;
- while the step is traced: the forward pass adds no losses (``add_loss``, activity or
  weight regularisers) and its outputs carry no mask (a mask renormalises the mean by each
  replica's own count);
- at every call: every leaf of the batch splits evenly over the replicas (else that batch
  runs Keras's program).

A condition found false while tracing raises ``NotPerReplica``; the caller then uses
Keras's program for good.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import tpustrategy._src.keras.internals as internals
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS


class NotPerReplica(Exception):
    """The step is not provably a mean over the replicas: Keras's own program runs instead."""


def eligible(model: Any, strategy: Any) -> bool:
    """Whether ``model``'s train step may run per replica (the static conditions above)."""
    if jax.process_count() != 1 or strategy.num_replicas_in_sync < 2:
        return False
    if not internals.trainer_methods_are_keras_own(type(model)):
        return False
    if getattr(model, "optimizer", None) is None:
        return False
    if model.non_trainable_variables:
        allowed = per_replica_state(model)
        if any(id(v) not in allowed for v in model.non_trainable_variables):
            return False
    if not all(getattr(v, "aggregation", None) == "sum" for v in model.metrics_variables):
        return False
    if not _mean_losses(getattr(model, "loss", None)):
        return False
    replicated = NamedSharding(strategy.mesh, P())
    state = [*model.trainable_variables, *model.optimizer.variables, *model.metrics_variables]
    return all(_is_replicated(v.value, replicated) for v in state)


def per_replica_state(model: Any) -> set[int]:
    """The ids of the non-trainable variables a per-replica step keeps as TensorFlow does.

    - every ``BatchNormalization``'s moving statistics: synchronized ones stay equal (their
      moments are all-reduced, ``sync_batch_norm``); the others are each replica's own copy,
      updated from that replica's batch — TensorFlow's rule for Keras 3's ``aggregation="none"``
      variables updated in a replica (``MirroredVariable``'s components diverge), read as
      replica 0's copy (its primary) by ``numpy()``, ``get_weights`` and saving;
    - random seed generators' states (dropout's): every replica advances its copy by the same
      increment, so they stay equal.
    """
    import keras

    found: set[int] = set()
    for layer in model._flatten_layers(include_self=True, recursive=True):
        if isinstance(layer, keras.layers.BatchNormalization):
            found.update(id(v) for v in layer.non_trainable_variables)
        for generator in getattr(layer, "_seed_generators", ()):
            found.add(id(generator.state))
    return found


def _is_replicated(value: Any, replicated: Any) -> bool:
    sharding = getattr(value, "sharding", None)
    return sharding is not None and (sharding == replicated or (
        sharding.is_fully_replicated and sharding.device_set == replicated.device_set))


def _mean_losses(loss: Any) -> bool:
    """Whether every loss of ``compile(loss=...)`` is a Keras built-in mean over the batch."""
    if loss is None:
        return False
    leaves = list(loss.values()) if isinstance(loss, dict) else list(loss) if isinstance(loss, (list, tuple)) \
        else [loss]
    for leaf in leaves:
        if leaf is None:
            continue
        if isinstance(leaf, str):
            continue   # a built-in's name: Keras wraps it with reduction="sum_over_batch_size"
        # A Loss object: its class's module; a loss function: its own.
        owner = type(leaf) if hasattr(leaf, "reduction") else leaf
        if not str(getattr(owner, "__module__", "")).startswith("keras.src.losses"):
            return False
        if getattr(leaf, "reduction", "sum_over_batch_size") != "sum_over_batch_size":
            return False
    return True


@contextlib.contextmanager
def _per_replica(model: Any) -> Iterator[None]:
    """While Keras's step is traced inside the per-replica program: the gradients reach the
    optimizer averaged over the replicas, and the forward pass is checked (no added losses,
    no masks). Instance attributes over the methods, removed after the trace."""
    optimizer = model.optimizer
    apply, call = optimizer.stateless_apply, model.stateless_call
    mask_of = internals.keras_mask

    def averaged_apply(optimizer_variables: Any, grads: Any, trainable_variables: Any) -> Any:
        return apply(optimizer_variables, jax.lax.pmean(list(grads), REPLICA_AXIS), trainable_variables)

    def checked_call(*args: Any, **kwargs: Any) -> Any:
        out = call(*args, **kwargs)
        if kwargs.get("return_losses") and out[2]:
            raise NotPerReplica("the forward pass adds losses (add_loss or regularizers)")
        if any(mask_of(y) is not None for y in jax.tree_util.tree_leaves(out[0])):
            raise NotPerReplica("the model's outputs carry a mask")
        return out

    optimizer.stateless_apply, model.stateless_call = averaged_apply, checked_call
    try:
        yield
    finally:
        del optimizer.stateless_apply
        del model.stateless_call


def program(model: Any, strategy: Any, step: Any) -> Any:
    """``jax.jit`` of ``step`` (``(state, data) -> (logs, state)``: Keras's ``train_step`` or
    several of them unrolled) run per replica, state donated."""
    mesh = strategy.mesh
    metric_refs = list(model.metrics_variables)

    def body(state: Any, data: Any) -> Any:
        trainable, non_trainable, optimizer_vars, metrics = state
        # Sync-on-read copies: replica 0 starts from the current value, the others from zero,
        # so the sum of the replicas' copies after the step is the updated value.
        first = jax.lax.axis_index(REPLICA_AXIS) == 0
        mine = [jnp.where(first, v, jnp.zeros_like(v)) for v in metrics]
        with _per_replica(model):
            _, (trainable, non_trainable, optimizer_vars, mine) = step(
                (trainable, non_trainable, optimizer_vars, mine), data)
        metrics = jax.lax.psum(list(mine), REPLICA_AXIS)
        with internals.stateless_scope().StatelessScope(state_mapping=list(zip(metric_refs, metrics))):
            logs = model.get_metrics_result()
        return logs, (trainable, non_trainable, optimizer_vars, metrics)

    mapped = jax.shard_map(body, mesh=mesh, in_specs=(P(), P(REPLICA_AXIS)), out_specs=(P(), P()),
                           check_vma=False)
    return jax.jit(mapped, donate_argnums=0)


def splits_evenly(batch: Any, n: int) -> bool:
    """Whether every leaf of ``batch`` is an array whose first dimension splits over ``n`` replicas."""
    leaves = jax.tree_util.tree_leaves(batch)
    return bool(leaves) and all(
        getattr(x, "ndim", 0) >= 1 and x.shape[0] >= n and x.shape[0] % n == 0 for x in leaves)
