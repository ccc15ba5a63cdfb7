"""Argument normalisation shared by the transformations (a leaf module: NumPy only).

TensorFlow programs pass sizes as Python ints, NumPy integer scalars or 0-d
integer tensors (``tf.constant(32, tf.int64)``); here they become Python ints
once, at the node's construction, with one message for everything else.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def int_or_none(value: Any) -> int | None:
    """``value`` as a Python int if it is an integer (Python, NumPy scalar or 0-d array), else None."""
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype.kind in "iu":
        return int(value)
    if hasattr(value, "__index__") and hasattr(value, "shape") and tuple(value.shape) == ():
        return int(value.__index__())
    return None


def as_int(value: Any, api: str, arg: str, example: str) -> int:
    """``value`` as a Python int, or a `TypeError` naming ``api`` and ``arg``.

    Args:
      value: a Python int, a NumPy integer scalar or a 0-d integer array.
      api: the API for the message, e.g. ``"Dataset.window"``.
      arg: the argument name.
      example: a correct call for the message's fix, e.g. ``"window(size=4)"``.
    """
    out = int_or_none(value)
    if out is None:
        raise TypeError(
            f"{api}: {arg} must be an int (a Python int, a NumPy integer or a 0-d integer array); "
            f"received {type(value).__name__}: {value!r}.\nFix: pass an int, e.g. {example}."
        )
    return out


def positive_int(value: Any, api: str, arg: str, example: str) -> int:
    """`as_int`, also requiring ``value > 0`` (a `ValueError` otherwise)."""
    out = as_int(value, api, arg, example)
    if out <= 0:
        raise ValueError(
            f"{api}: {arg} must be greater than zero; received {arg}={out}.\nFix: pass a positive int, e.g. {example}."
        )
    return out


def as_bool(value: Any, api: str, arg: str) -> bool:
    """A Python or NumPy bool (or 0-d bool array) as a Python bool, or a `TypeError`."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.ndarray) and value.shape == () and value.dtype == np.bool_:
        return bool(value)
    raise TypeError(f"{api}: {arg} must be a bool; received {type(value).__name__}: {value!r}.")


def predicate_result(value: Any, api: str, arg: str = "predicate") -> bool:
    """A predicate's return value as a bool: a Python / NumPy bool or a 0-d bool array."""
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_) or (isinstance(value, np.ndarray) and value.shape == () and value.dtype == np.bool_):
        return bool(value)
    shape = getattr(value, "shape", ())
    raise TypeError(
        f"{api}: `{arg}` return type must be convertible to a scalar boolean; received "
        f"{type(value).__name__} with shape {tuple(shape)}: {value!r}.\n"
        "Fix: return a Python bool or a NumPy bool scalar, e.g. lambda x: bool(x < 10)."
    )
