"""``MeanSquaredError``: the mean over examples of each example's mean squared error.

As in ``tf.keras.metrics.MeanSquaredError``, the squared differences are
averaged over the last axis first (one value per example), then the weighted
mean over examples (and over every replica) is kept.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from tpustrategy._src.metrics.wrapper import MeanMetricWrapper


def mean_squared_error(y_true: Any, y_pred: Any) -> Any:
    """``mean((y_pred - y_true) ** 2, axis=-1)`` (broadcasting like Keras's loss)."""
    try:
        shape = jnp.broadcast_shapes(y_true.shape, y_pred.shape)
    except ValueError as e:
        raise ValueError(
            f"tps.metrics.MeanSquaredError.update_state: y_true has shape {tuple(y_true.shape)} "
            f"and y_pred has shape {tuple(y_pred.shape)}, which do not broadcast together.\nFix: "
            "pass targets and predictions of the same shape."
        ) from e
    if not shape:
        return jnp.square(y_pred - y_true)
    return jnp.mean(jnp.square(y_pred - y_true), axis=-1)


class MeanSquaredError(MeanMetricWrapper):
    """The mean squared error between targets and predictions (``tf.keras.metrics.MeanSquaredError``).

    Example:
      >>> m = tps.metrics.MeanSquaredError()
      >>> m.update_state([[0, 1], [0, 0]], [[1, 1], [0, 0]])
      >>> float(m.result())
      0.25
    """

    def __init__(self, name: str = "mean_squared_error", dtype: Any = None):
        super().__init__(mean_squared_error, name=name, dtype=dtype)
