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
      A scalar: ``sum(loss * weight) / global_batch_size``; 0 when the batch is
      empty (TensorFlow >= 2.13 divides with ``div_no_nan``).

    Raises:
      ValueError: ``global_batch_size`` is given and not positive.
    """
    if global_batch_size is not None and not hasattr(global_batch_size, "shape"):
        if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, (int, float)) \
                or global_batch_size <= 0:
            raise ValueError(
                "compute_average_loss: `global_batch_size` must be a positive number (the number of examples "
                f"in the global batch). Received: global_batch_size={global_batch_size!r}.\nFix: pass the "
                "global batch size, or None to use this replica's batch size times num_replicas_in_sync."
            )
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
    denominator = jnp.asarray(global_batch_size, loss.dtype)
    total = jnp.sum(loss)
    return jnp.where(denominator == 0, jnp.zeros_like(total), total / jnp.where(denominator == 0, 1, denominator))


def scale_regularization_loss(regularization_loss: Any) -> Any:
    """Divides a regularization loss by ``num_replicas_in_sync`` (so the SUM over replicas counts it once)."""
    ctx = context.get_replica_context()
    n = ctx.num_replicas_in_sync if ctx is not None else context.get_strategy().num_replicas_in_sync
    return jnp.asarray(regularization_loss) / n
