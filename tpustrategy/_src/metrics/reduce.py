"""``Mean`` and ``Sum``: the weighted mean and the weighted sum of values.

``Mean`` keeps ``total`` (sum of weighted values) and ``count`` (sum of
weights, or number of values); its result is ``total / count`` (0 before any
update). ``Sum`` keeps only ``total``. Both follow ``tf.keras.metrics.Mean``
and ``Sum`` (``Reduce`` with WEIGHTED_MEAN / SUM).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from tpustrategy._src.metrics import base, weights


def divide_no_nan(total: Any, count: Any) -> Any:
    """``total / count``, and 0 where ``count`` is 0 (``tf.math.divide_no_nan``)."""
    safe = jnp.where(count == 0, jnp.ones_like(count), count)
    return jnp.where(count == 0, jnp.zeros_like(total), total / safe)


def as_values(values: Any, dtype: Any, api: str) -> Any:
    try:
        return jnp.asarray(values, dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{api}: values must be an array, a number or a (nested) list of numbers; received "
            f"{type(values).__name__}: {values!r:.200}.\nFix: pass one array per call (update a "
            "metric once per output)."
        ) from e


class _Reduce(base.Metric):
    _sum_only = False

    def __init__(self, name: str | None = None, dtype: Any = None):
        super().__init__(name=name, dtype=dtype)
        self.total = self.add_variable("total")
        if not self._sum_only:
            self.count = self.add_variable("count")

    def update_state(self, values: Any, sample_weight: Any = None) -> None:
        """Adds ``values`` (optionally weighted) to the running statistic.

        Args:
          values: an array of any shape (this replica's piece in replica context).
          sample_weight: optional weights: a scalar, one per example, or
            broadcastable to ``values``; a weight of 0 leaves a value out.
        """
        api = f"tps.metrics.{type(self).__name__}.update_state"
        values = as_values(values, self.dtype, api)
        if sample_weight is not None:
            sample_weight = as_values(sample_weight, self.dtype, api)
        values, w = weights.weigh(values, sample_weight, reduce_rows_by_sum=self._sum_only, api=api)
        base.add(self.total, jnp.sum(values))
        if not self._sum_only:
            num = jnp.asarray(values.size, self.dtype) if w is None else jnp.sum(w)
            base.add(self.count, num)


class Mean(_Reduce):
    """The (weighted) mean of the values seen (``tf.keras.metrics.Mean``).

    Args:
      name: the metric's name (default ``"mean"``).
      dtype: the dtype of the state and the result (default float32).

    Example:
      >>> m = tps.metrics.Mean()
      >>> m.update_state([1, 3, 5, 7])
      >>> float(m.result())
      4.0
      >>> m.reset_state()
      >>> m.update_state([1, 3, 5, 7], sample_weight=[1, 1, 0, 0])
      >>> float(m.result())
      2.0
    """

    def __init__(self, name: str = "mean", dtype: Any = None):
        super().__init__(name=name, dtype=dtype)

    def result(self) -> Any:
        """``total / count`` over every replica's updates (0 before any update)."""
        total, count = self.read_state(self.total, self.count)
        return divide_no_nan(total, count)


class Sum(_Reduce):
    """The (weighted) sum of the values seen (``tf.keras.metrics.Sum``).

    Args:
      name: the metric's name (default ``"sum"``).
      dtype: the dtype of the state and the result (default float32).

    Example:
      >>> m = tps.metrics.Sum()
      >>> m.update_state([1, 3, 5, 7])
      >>> float(m.result())
      16.0
    """

    _sum_only = True

    def __init__(self, name: str = "sum", dtype: Any = None):
        super().__init__(name=name, dtype=dtype)

    def result(self) -> Any:
        """The sum over every replica's updates."""
        return self.read_state(self.total)
