"""Shared argument checks of the image ops: the image rank rules and TensorFlow's messages.

TensorFlow checks shapes statically when it knows them, raising ``ValueError``; a NumPy array's
shape is always known, so these checks raise ``ValueError`` with TensorFlow's text first.
"""

from __future__ import annotations

from typing import Any

import numpy as np

FLOAT_DTYPES = (np.float16, np.float32, np.float64)


def as_image(image: Any, api: str, name: str = "image") -> np.ndarray:
    """``image`` as a NumPy array (lists, scalars and array-likes are converted)."""
    if isinstance(image, np.ndarray):
        return image
    try:
        array = np.asarray(image)
    except Exception as error:  # ragged lists and the like
        raise TypeError(
            f"{api}: {name} must be an array of numbers; received {type(image).__name__}: {error}.\n"
            f"Fix: pass a NumPy array of shape [height, width, channels] or "
            f"[batch, height, width, channels].") from error
    if array.dtype == object or array.dtype.kind in "USV":
        raise TypeError(
            f"{api}: {name} must be numeric; received dtype {array.dtype}.\n"
            "Fix: decode the image first (tps.io.decode_image) and pass the array.")
    # TensorFlow's conversion of Python numbers: floats become float32, ints int32.
    if array.dtype == np.float64 and not isinstance(image, np.generic):
        array = array.astype(np.float32)
    elif array.dtype == np.int64 and not isinstance(image, np.generic):
        array = array.astype(np.int32)
    return array


def check_3d_or_4d(image: np.ndarray, api: str, name: str = "image") -> bool:
    """True for a batch (4-D); raises TensorFlow's ``ValueError`` for other ranks."""
    if image.ndim == 3:
        if 0 in image.shape:
            raise ValueError(
                f"inner 3 dims of '{name}.shape' must be > 0: {tuple(image.shape)}\n"
                f"{api}: Fix: pass a non-empty image.")
        return False
    if image.ndim == 4:
        if 0 in image.shape[1:]:
            raise ValueError(
                f"inner 3 dims of '{name}.shape' must be > 0: {tuple(image.shape)}\n"
                f"{api}: Fix: pass non-empty images.")
        return True
    raise ValueError(
        f"'{name}' (shape {tuple(image.shape)}) must have either 3 or 4 dimensions.\n"
        f"{api}: received a {image.ndim}-D array; Fix: pass [height, width, channels] or "
        "[batch, height, width, channels] (add a channels axis with image[..., None]).")


def check_at_least_3d(image: np.ndarray, api: str, name: str = "image") -> None:
    """TensorFlow's ``_CheckAtLeast3DImage``: rank >= 3 and non-empty inner 3 dims."""
    if image.ndim < 3:
        raise ValueError(
            f"'{name}' (shape {tuple(image.shape)}) must be at least three-dimensional.\n"
            f"{api}: Fix: pass [height, width, channels] or [..., height, width, channels].")
    if 0 in image.shape[-3:]:
        raise ValueError(
            f"inner 3 dims of '{name}.shape' must be > 0: {tuple(image.shape)}\n"
            f"{api}: Fix: pass a non-empty image.")


def check_channels(image: np.ndarray, channels: int, api: str, name: str = "images") -> None:
    """The last axis must have ``channels`` entries (RGB ops: 3)."""
    if image.ndim < 1 or image.shape[-1] != channels:
        raise ValueError(
            f"{api}: the last dimension of {name} must be {channels}; received shape "
            f"{tuple(image.shape)}.\nFix: pass an image of shape [..., {channels}].")


def as_int(value: Any, api: str, name: str) -> int:
    """A Python int from an int-like scalar (NumPy 0-d arrays included)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"{api}: {name} must be an int; received {type(value).__name__}: {value!r}.\n"
            f"Fix: pass {name} as a Python int.")
    return int(value)


def is_float(dtype: np.dtype) -> bool:
    return np.dtype(dtype).kind == "f"
