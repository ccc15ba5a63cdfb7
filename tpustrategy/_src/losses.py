"""Loss scaling for data-parallel training (``tf.nn.compute_average_loss``).

Each replica sees only its piece of the global batch. Dividing the sum of its
per-example losses by the *global* batch size makes the all-reduced SUM of the
replicas' gradients the gradient of the mean loss over the global batch.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from tpustrategy._src.strategy import context


def compute_average_loss(per_example_loss: Any, sample_weight: Any = None, global_batch_size: Any = None) -> Any:
    """Sum of the (weighted) per-example losses divided by the global batch size.

    Args:
      per_example_loss: this replica's per-example losses, shape ``[b, ...]``.
      sample_weight: optional weights broadcastable to ``per_example_loss``.
      global_batch_size: the global batch size; default: this replica's batch
        size times ``num_replicas_in_sync``.

    Returns:
      A scalar: ``sum(loss * weight) / global_batch_size``.
    """
    loss = jnp.asarray(per_example_loss)
    if not jnp.issubdtype(loss.dtype, jnp.floating):
        raise TypeError(
            f"compute_average_loss: `per_example_loss` must be floating point. Received dtype {loss.dtype}."
        )
    if sample_weight is not None:
        loss = loss * jnp.asarray(sample_weight, loss.dtype)
    if global_batch_size is None:
        ctx = context.get_replica_context()
        n = ctx.num_replicas_in_sync if ctx is not None else context.get_strategy().num_replicas_in_sync
        global_batch_size = (loss.shape[0] if loss.ndim else 1) * n
    return jnp.sum(loss) / jnp.asarray(global_batch_size, loss.dtype)


def scale_regularization_loss(regularization_loss: Any) -> Any:
    """Divides a regularization loss by ``num_replicas_in_sync`` (so the SUM over replicas counts it once)."""
    ctx = context.get_replica_context()
    n = ctx.num_replicas_in_sync if ctx is not None else context.get_strategy().num_replicas_in_sync
    return jnp.asarray(regularization_loss) / n
