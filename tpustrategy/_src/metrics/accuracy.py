"""Accuracy metrics: ``Accuracy``, ``SparseCategoricalAccuracy``, ``CategoricalAccuracy``.

Each is the weighted mean of per-example matches (1.0 or 0.0), with Keras's
rules: ``Accuracy`` compares labels and predictions elementwise;
``SparseCategoricalAccuracy`` compares an integer label with the arg-max of the
class scores (the first maximum wins a tie); ``CategoricalAccuracy`` compares
the arg-max of a one-hot label with the arg-max of the scores.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from tpustrategy._src.metrics.wrapper import MeanMetricWrapper


def accuracy(y_true: Any, y_pred: Any) -> Any:
    """1.0 where ``y_true == y_pred`` elementwise, else 0.0 (shapes must match)."""
    if y_true.shape != y_pred.shape:
        raise ValueError(
            f"tps.metrics.Accuracy.update_state: y_true has shape {tuple(y_true.shape)} and "
            f"y_pred has shape {tuple(y_pred.shape)}; Accuracy compares them elementwise, so the "
            "shapes must be equal.\nFix: pass predicted labels (for class scores use "
            "SparseCategoricalAccuracy with integer labels, or CategoricalAccuracy with one-hot "
            "labels)."
        )
    return (y_true == y_pred).astype(y_pred.dtype)


def sparse_categorical_matches(y_true: Any, y_pred: Any) -> Any:
    """1.0 where the integer label equals the arg-max of the class scores, else 0.0."""
    if y_pred.ndim == 0:
        raise ValueError(
            "tps.metrics.SparseCategoricalAccuracy.update_state: y_pred is a scalar; it must hold "
            "class scores with the classes on the last axis (shape [batch, num_classes]).\n"
            "Fix: pass the model's logits or probabilities, not the predicted label."
        )
    squeeze_back = None
    if y_true.ndim == y_pred.ndim:
        if y_true.shape[-1] != 1:
            raise ValueError(
                "tps.metrics.SparseCategoricalAccuracy.update_state: y_true has shape "
                f"{tuple(y_true.shape)} and y_pred has shape {tuple(y_pred.shape)}; sparse labels "
                "are one integer per example (shape [batch] or [batch, 1]).\nFix: for one-hot "
                "labels use CategoricalAccuracy, or pass jnp.argmax(labels, -1)."
            )
        squeeze_back = y_true.shape
        y_true = jnp.squeeze(y_true, -1)
    if y_true.shape != y_pred.shape[:-1]:
        raise ValueError(
            "tps.metrics.SparseCategoricalAccuracy.update_state: y_true has shape "
            f"{tuple(y_true.shape)} but y_pred has shape {tuple(y_pred.shape)}; there must be one "
            "label per row of class scores.\nFix: pass labels and predictions of the same batch."
        )
    matches = (y_true == jnp.argmax(y_pred, axis=-1).astype(y_true.dtype)).astype(y_pred.dtype)
    return matches.reshape(squeeze_back) if squeeze_back is not None else matches


def categorical_matches(y_true: Any, y_pred: Any) -> Any:
    """1.0 where the arg-max of the one-hot label equals the arg-max of the scores."""
    if y_pred.ndim == 0 or y_true.shape[:-1] != y_pred.shape[:-1]:
        raise ValueError(
            "tps.metrics.CategoricalAccuracy.update_state: y_true has shape "
            f"{tuple(y_true.shape)} and y_pred has shape {tuple(y_pred.shape)}; one-hot labels "
            "and class scores must both be [batch, num_classes].\nFix: for integer "
            "labels use SparseCategoricalAccuracy."
        )
    labels = jnp.argmax(y_true, axis=-1)
    return (labels == jnp.argmax(y_pred, axis=-1)).astype(y_pred.dtype)


class Accuracy(MeanMetricWrapper):
    """How often predictions equal labels (``tf.keras.metrics.Accuracy``).

    Example:
      >>> m = tps.metrics.Accuracy()
      >>> m.update_state([[1], [2], [3], [4]], [[0], [2], [3], [4]])
      >>> float(m.result())
      0.75
    """

    def __init__(self, name: str = "accuracy", dtype: Any = None):
        super().__init__(accuracy, name=name, dtype=dtype)


class SparseCategoricalAccuracy(MeanMetricWrapper):
    """How often the arg-max of the scores equals the integer label.

    ``tf.keras.metrics.SparseCategoricalAccuracy``: ``y_true`` is ``[batch]`` or
    ``[batch, 1]`` class ids, ``y_pred`` is ``[batch, num_classes]`` scores.

    Example:
      >>> m = tps.metrics.SparseCategoricalAccuracy()
      >>> m.update_state([[2], [1]], [[0.1, 0.6, 0.3], [0.05, 0.95, 0]])
      >>> float(m.result())
      0.5
    """

    def __init__(self, name: str = "sparse_categorical_accuracy", dtype: Any = None):
        super().__init__(sparse_categorical_matches, name=name, dtype=dtype)


class CategoricalAccuracy(MeanMetricWrapper):
    """How often the arg-max of the scores equals the arg-max of the one-hot label.

    ``tf.keras.metrics.CategoricalAccuracy``: ``y_true`` and ``y_pred`` are both
    ``[batch, num_classes]``.

    Example:
      >>> m = tps.metrics.CategoricalAccuracy()
      >>> m.update_state([[0, 0, 1], [0, 1, 0]], [[0.1, 0.9, 0.8], [0.05, 0.95, 0]])
      >>> float(m.result())
      0.5
    """

    def __init__(self, name: str = "categorical_accuracy", dtype: Any = None):
        super().__init__(categorical_matches, name=name, dtype=dtype)
