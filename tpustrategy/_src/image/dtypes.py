"""``tf.image.convert_image_dtype`` and ``tf.dtypes.saturate_cast``: TensorFlow's scaling rules.

Floating images hold values in ``[0, 1]``; integer images hold ``[0, dtype.max]``. Integer to
integer divides or multiplies by the power-of-two ratio of the maxima; integer to float
multiplies by ``1 / max`` (in the float type); float to integer multiplies by ``max + 0.5`` and
truncates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.image.checks import as_image


def as_numpy_dtype(dtype: Any, api: str) -> np.dtype:
    """A NumPy dtype from ``np.float32``, ``'float32'`` or anything with ``as_numpy_dtype``."""
    target = getattr(dtype, "as_numpy_dtype", dtype)
    try:
        return np.dtype(target)  # type: ignore[no-any-return]
    except TypeError as error:
        raise TypeError(
            f"{api}: dtype must be a NumPy dtype or its name; received {dtype!r}.\n"
            "Fix: pass np.float32, 'float32', np.uint8, ...") from error


def _limits(dtype: np.dtype) -> tuple[Any, Any]:
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    return info.min, info.max


def saturate_cast(value: Any, dtype: Any) -> np.ndarray:
    """Casts, clamping to ``dtype``'s range first (``tf.dtypes.saturate_cast``).

    A limit that the input dtype cannot hold exactly (float32 cannot hold 2**31 - 1) is moved one
    step towards zero, as TensorFlow does, so the cast never overflows.
    """
    array = np.asarray(value)
    out = as_numpy_dtype(dtype, "tps.image.saturate_cast")
    in_min, in_max = _limits(array.dtype)
    out_min, out_max = _limits(out)
    kind = array.dtype.type
    with np.errstate(over="ignore", invalid="ignore"):
        return _saturate(array, out, kind, in_min, in_max, out_min, out_max)


def _saturate(array: np.ndarray, out: np.dtype, kind: Any, in_min: Any, in_max: Any, out_min: Any,
              out_max: Any) -> np.ndarray:
    promoted = np.promote_types(array.dtype, out)
    low = kind(max(in_min, out_min))
    if np.array(low, promoted) < np.array(out_min, promoted):
        low = np.nextafter(low, kind(0), dtype=array.dtype)
    high = kind(min(float(in_max), float(out_max)))
    if np.array(high, promoted) > np.array(out_max, promoted):
        high = np.nextafter(high, kind(0), dtype=array.dtype)
    return np.asarray(np.clip(array, low, high).astype(out))


def convert_image_dtype(image: Any, dtype: Any, saturate: bool = False,
                        name: str | None = None) -> np.ndarray:
    """Converts an image's dtype, rescaling its values (``tf.image.convert_image_dtype``).

    Args:
      image: an array of any shape with an integer or floating dtype.
      dtype: the result dtype (``np.float32``, ``'uint8'``, ...).
      saturate: clamp before casting, so out-of-range values do not wrap.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``image`` in ``dtype``: float results in ``[0, 1]`` from integer input (``x * (1/max)``),
      integer results ``trunc(x * (max + 0.5))`` from float input, the same array when the dtype
      does not change.

    Raises:
      AttributeError: a dtype that is neither integer nor floating (TensorFlow's type).

    Example:
      >>> tps.image.convert_image_dtype(np.array([0, 255], np.uint8), np.float32)
      array([0., 1.], dtype=float32)
    """
    del name
    api = "tps.image.convert_image_dtype"
    array = as_image(image, api)
    target = as_numpy_dtype(dtype, api)
    if target.kind not in "iuf":
        raise AttributeError(
            f"dtype must be either floating point or integer\n{api}: received dtype={target}; "
            "Fix: pass a float dtype (np.float32) or an integer one (np.uint8).")
    if array.dtype.kind not in "iuf":
        raise AttributeError(
            f"image dtype must be either floating point or integer\n{api}: received an image of "
            f"dtype {array.dtype}; Fix: cast a bool image with image.astype(np.uint8) first.")
    if target == array.dtype:
        return array
    # Overflow is part of the rules (float16 cannot hold int32's range; TensorFlow gives inf too).
    with np.errstate(over="ignore", invalid="ignore"):
        return _convert(array, target, saturate)


def _convert(array: np.ndarray, target: np.dtype, saturate: bool) -> np.ndarray:
    if array.dtype.kind in "iu" and target.kind in "iu":
        scale_in, scale_out = int(np.iinfo(array.dtype).max), int(np.iinfo(target).max)
        if scale_in > scale_out:
            scaled = np.floor_divide(array, array.dtype.type((scale_in + 1) // (scale_out + 1)))
            return saturate_cast(scaled, target) if saturate else scaled.astype(target)
        cast = saturate_cast(array, target) if saturate else array.astype(target)
        with np.errstate(over="ignore"):
            return np.asarray((cast * target.type((scale_out + 1) // (scale_in + 1))).astype(target))
    if array.dtype.kind == "f" and target.kind == "f":
        return array.astype(target)
    if array.dtype.kind in "iu":
        return np.asarray((array.astype(target) * target.type(1.0 / np.iinfo(array.dtype).max)).astype(target))
    scaled = (array * array.dtype.type(float(np.iinfo(target).max) + 0.5)).astype(array.dtype)
    if saturate:
        return saturate_cast(scaled, target)
    return np.asarray(scaled.astype(target))
