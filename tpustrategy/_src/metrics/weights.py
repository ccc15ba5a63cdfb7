"""Keras's shape rules for metric inputs: squeezable label dims and sample weights.

The rules are static (shapes are known when a step is traced):

- labels and predictions whose ranks differ by one lose a trailing dimension
  of size 1 (``[b, 1]`` labels against ``[b]`` predictions, and back);
- a sample weight whose rank differs from the values' by one gains or loses
  a trailing dimension, is then broadcast to the values when every dimension
  is 1 or equal, and otherwise the values are first reduced (mean, or sum for
  a ``Sum``) over their extra trailing dimensions, so one weight weighs one row.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp


def remove_squeezable_dimensions(y_true: Any, y_pred: Any) -> tuple[Any, Any]:
    """Drops a trailing size-1 dimension that makes labels and predictions differ in rank.

    Keras applies this unless predictions have exactly one more dimension
    than labels with more than one entry (class scores against sparse labels).
    """
    diff = y_pred.ndim - y_true.ndim
    if diff == 1 and y_pred.shape[-1] == 1:
        y_pred = jnp.squeeze(y_pred, -1)
    elif diff == -1 and y_true.shape[-1] == 1:
        y_true = jnp.squeeze(y_true, -1)
    return y_true, y_pred


def weigh(values: Any, sample_weight: Any, *, reduce_rows_by_sum: bool, api: str) -> tuple[Any, Any]:
    """Applies ``sample_weight`` to ``values`` with Keras's rules.

    Args:
      values: the per-example values (already in the metric's dtype).
      sample_weight: None, or weights in the metric's dtype.
      reduce_rows_by_sum: when weights cover only leading dimensions, reduce the
        values' trailing dimensions by sum (``Sum``) instead of mean.
      api: the calling API, for error messages.

    Returns:
      ``(weighted_values, weights)``: ``weights`` is None without a sample
      weight, else the weights the count grows by (summed by the caller).

    Raises:
      ValueError: if the weights' shape fits the values' shape in no Keras way.
    """
    if sample_weight is None:
        return values, None
    w = sample_weight
    if w.ndim != 0:
        if w.ndim - values.ndim == 1:
            if w.shape[-1] != 1:
                raise _shape_error(api, values, sample_weight)
            w = jnp.squeeze(w, -1)
        elif values.ndim - w.ndim == 1:
            w = jnp.expand_dims(w, -1)
    if w.ndim == 0 or (
        w.ndim == values.ndim and all(wd in (1, vd) for wd, vd in zip(w.shape, values.shape))
    ):
        w = jnp.broadcast_to(w, values.shape)
        return values * w, w
    if w.ndim > values.ndim:
        raise _shape_error(api, values, sample_weight)
    axes = tuple(range(w.ndim, values.ndim))
    values = jnp.sum(values, axis=axes) if reduce_rows_by_sum else jnp.mean(values, axis=axes)
    if any(wd not in (1, vd) for wd, vd in zip(w.shape, values.shape)):
        raise _shape_error(api, values, sample_weight)
    return values * w, w


def _shape_error(api: str, values: Any, sample_weight: Any) -> ValueError:
    return ValueError(
        f"{api}: sample_weight has shape {tuple(sample_weight.shape)}, which does not fit the "
        f"values' shape {tuple(values.shape)}. A sample weight is a scalar, one weight per "
        "example (shape [batch] or [batch, 1]), or broadcastable to the values (each dimension "
        "1 or equal).\nFix: pass one weight per example of this replica's batch."
    )
