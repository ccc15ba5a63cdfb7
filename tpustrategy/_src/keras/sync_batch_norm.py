"""``keras.layers.BatchNormalization(synchronized=True)`` under a strategy: statistics of the global batch.

Keras 3 refuses ``synchronized=True`` on the JAX backend. tf-keras's ``SyncBatchNormalization``
(the ``synchronized=True`` path of ``keras/layers/normalization/batch_normalization.py``)
computes a training step's moments over the *global* batch: in a replica function every replica
all-reduces (SUM) its local sum, sum of squares and example count, then
``mean = sum / count`` and ``variance = sum_of_squares / count - mean ** 2``.

Here (installed with the other Keras patches, ``patches.TABLE``) the layer accepts
``synchronized=True`` and its ``_moments`` are those global moments:

- inside a per-replica program (``replica_steps``'s ``shard_map`` and a compiled
  ``strategy.run``) the three sums are one ``jax.lax.psum`` over ``"replica"``;
- in an eager ``strategy.run`` replica thread, the replica context's ``all_reduce``;
- elsewhere — Keras's own ``fit`` program over the global batch split by XLA's SPMD
  partitioner, one device — the program already sees the global batch, so the same
  formula runs without a collective.

So every replica's moving statistics stay equal (a model whose only non-trainable state is
synchronized batch normalisation may run per replica, ``replica_steps.eligible``), and they
equal one device's on the whole batch.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.values.mesh_axis import REPLICA_AXIS


def wrap_init(original: Any) -> Any:
    @functools.wraps(original)
    def __init__(self: Any, *args: Any, synchronized: bool = False, **kwargs: Any) -> None:
        # Keras raises for synchronized=True on JAX: build the layer unsynchronized, then mark it.
        original(self, *args, synchronized=False, **kwargs)
        self.synchronized = bool(synchronized)

    # Keras reads the constructor's arguments with inspect.getfullargspec (its auto config): Keras's own.
    __init__.__signature__ = inspect.signature(original)  # type: ignore[attr-defined]
    return __init__


def wrap_moments(original: Any) -> Any:
    @functools.wraps(original)
    def _moments(self: Any, inputs: Any, mask: Any) -> Any:
        if not getattr(self, "synchronized", False):
            return original(self, inputs, mask)
        return global_moments(inputs, tuple(self._reduction_axes), mask)

    return _moments


def _all_reduce_sum(parts: list[Any]) -> list[Any]:
    """SUM over the replicas of the current per-replica computation (unchanged outside one)."""
    try:
        summed: list[Any] = jax.lax.psum(parts, REPLICA_AXIS)
        return summed
    except NameError:   # "replica" is not a bound axis: not inside a shard_map over the replicas
        pass
    from tpustrategy._src.context import contracts
    from tpustrategy._src.variables import updates

    ctx: Any = updates._replica_context()   # a tps.ReplicaContext (typed Any in the context stack)
    eager = ctx is not None and isinstance(ctx, contracts.EagerReplicaContract)
    if eager and ctx.num_replicas_in_sync > 1:
        return list(ctx.all_reduce("SUM", parts))
    return parts


def global_moments(inputs: Any, axes: tuple[int, ...], mask: Any = None) -> tuple[Any, Any]:
    """tf-keras's ``SyncBatchNormalization`` moments of ``inputs`` over ``axes`` and all replicas."""
    x = jnp.asarray(inputs)
    dtype = x.dtype
    if dtype in (jnp.float16, jnp.bfloat16):
        x = x.astype(jnp.float32)   # Keras's rule: statistics of half floats in float32
    if mask is None:
        local_sum = jnp.sum(x, axes, keepdims=True)
        local_squares = jnp.sum(jnp.square(x), axes, keepdims=True)
        count = jnp.full(local_sum.shape, float(np.prod([x.shape[a] for a in axes])), x.dtype)
    else:
        weights = jnp.broadcast_to(jnp.expand_dims(jnp.asarray(mask), -1), x.shape).astype(x.dtype)
        local_sum = jnp.sum(weights * x, axes, keepdims=True)
        local_squares = jnp.sum(weights * jnp.square(x), axes, keepdims=True)
        count = jnp.sum(weights, axes, keepdims=True)
    total, squares, n = _all_reduce_sum([local_sum, local_squares, count])
    mean = total / n
    variance = squares / n - jnp.square(mean)
    mean, variance = jnp.squeeze(mean, axes), jnp.squeeze(variance, axes)
    if dtype in (jnp.float16, jnp.bfloat16):
        limit = jnp.finfo(jnp.float16).max
        mean, variance = jnp.clip(mean, -limit, limit).astype(dtype), jnp.clip(variance, -limit, limit).astype(dtype)
    return mean, variance


def synchronized_state(model: Any) -> set[int]:
    """The ids of the moving statistics of ``model``'s synchronized batch-normalisation layers."""
    import keras

    found: set[int] = set()
    for layer in model._flatten_layers(include_self=False, recursive=True):
        if isinstance(layer, keras.layers.BatchNormalization) and getattr(layer, "synchronized", False):
            found.update(id(v) for v in layer.non_trainable_variables)
    return found
