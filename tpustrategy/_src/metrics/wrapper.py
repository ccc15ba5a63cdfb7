"""``MeanMetricWrapper``: the mean of a per-example function of labels and predictions.

The base of Keras's accuracy and error metrics: ``update_state(y_true,
y_pred, sample_weight)`` casts both to the metric's dtype, drops a squeezable
trailing dimension, computes ``fn(y_true, y_pred)`` per example and feeds it
to ``Mean.update_state`` with the sample weights.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.metrics import reduce, weights


class MeanMetricWrapper(reduce.Mean):
    """The weighted mean of ``fn(y_true, y_pred)`` (``tf.keras.metrics.MeanMetricWrapper``).

    Args:
      fn: a function of ``(y_true, y_pred)`` returning one value per example.
      name: the metric's name.
      dtype: the dtype of the state and the result (default float32).
    """

    def __init__(self, fn: Callable[[Any, Any], Any], name: str, dtype: Any = None):
        super().__init__(name=name, dtype=dtype)
        self._fn = fn

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:  # type: ignore[override]
        """Adds ``fn(y_true, y_pred)`` for this batch to the running mean.

        Args:
          y_true: the labels (this replica's piece in replica context).
          y_pred: the predictions, same leading dimensions as ``y_true``.
          sample_weight: optional weights: a scalar, one per example, or
            broadcastable to the per-example values.
        """
        api = f"tps.metrics.{type(self).__name__}.update_state"
        y_true = reduce.as_values(y_true, self.dtype, api)
        y_pred = reduce.as_values(y_pred, self.dtype, api)
        y_true, y_pred = weights.remove_squeezable_dimensions(y_true, y_pred)
        super().update_state(self._fn(y_true, y_pred), sample_weight=sample_weight)
