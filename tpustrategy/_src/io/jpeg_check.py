"""``tf.io.is_jpeg`` (also ``tf.image.is_jpeg``): TensorFlow's JPEG signature check."""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.io._tensors import string_array

_SIGNATURE = b"\xff\xd8\xff"


def is_jpeg(contents: Any, name: str | None = None) -> Any:
    """Whether ``contents`` starts like a JPEG file (``tf.io.is_jpeg``, ``tf.image.is_jpeg``).

    As TensorFlow: true when the first three bytes are ``FF D8 FF`` (the SOI marker and the
    start of the next marker); nothing else of the file is checked.

    Args:
      contents: ``bytes`` (a string scalar) or an array of ``bytes``.
      name: unused (TensorFlow's op name).

    Returns:
      A NumPy ``bool`` for a scalar, else a bool array of ``contents``' shape.
    """
    del name
    arr = string_array(contents, api="tps.io.is_jpeg", arg="contents")
    out = np.array([bytes(b[:3]) == _SIGNATURE for b in arr.reshape(-1)], dtype=bool).reshape(arr.shape)
    return out[()] if out.ndim == 0 else out
