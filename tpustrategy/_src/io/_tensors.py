"""How ``tps.io`` ops read TensorFlow tensors given as NumPy values: strings and dtypes.

A scalar string tensor is ``bytes`` (``tpsd``'s ``StringScalar`` is a ``bytes``
subclass); a string tensor of any rank is an object array of ``bytes``. Python ``str``
is taken as its UTF-8 bytes, as ``tf.constant("...")`` does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError

_OBJECT = np.dtype(object)

# TensorFlow's dtype names -> NumPy dtypes (bfloat16 is looked up lazily from ml_dtypes).
_NAMES = {
    "float16": np.float16, "half": np.float16, "float32": np.float32, "float": np.float32,
    "float64": np.float64, "double": np.float64, "int8": np.int8, "uint8": np.uint8,
    "int16": np.int16, "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32,
    "int64": np.int64, "uint64": np.uint64, "bool": np.bool_, "complex64": np.complex64,
    "complex128": np.complex128, "string": object,
}


def dtype_name(dtype: np.dtype) -> str:
    """TensorFlow's name of a NumPy dtype (``object`` is ``string``)."""
    return "string" if dtype == _OBJECT else dtype.name


def as_dtype(dtype: Any, *, api: str, arg: str) -> np.dtype:
    """A NumPy dtype for ``dtype`` given as a NumPy dtype or type, a name, or a ``tf.DType``."""
    if dtype in (bytes, str) or (isinstance(dtype, np.dtype) and dtype.kind in "OSU"):
        return _OBJECT
    name = dtype if isinstance(dtype, str) else getattr(dtype, "name", None)
    if isinstance(name, str) and not isinstance(dtype, np.dtype | type):
        if name == "bfloat16":
            import ml_dtypes  # a dependency of JAX; only bfloat16 needs it

            return np.dtype(ml_dtypes.bfloat16)
        if name in _NAMES:
            return np.dtype(_NAMES[name])
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(
            f"{api}: {arg} must be a dtype (a NumPy dtype, a name such as 'uint8', or a tf.DType). "
            f"Received: {arg}={dtype!r}.\nFix: pass e.g. {arg}=np.uint8 or {arg}='uint8'.") from None


def to_bytes(value: Any) -> bytes:
    """One string element as ``bytes``."""
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytearray | memoryview | np.bytes_):
        return bytes(value)
    raise TypeError(f"expected a string (bytes or str), received {type(value).__name__}: {value!r}")


def string_array(value: Any, *, api: str, arg: str) -> np.ndarray:
    """A string tensor as an object array of ``bytes`` (any rank; bytes -> 0-d)."""
    if hasattr(value, "numpy") and not isinstance(value, bytes | np.ndarray):
        value = value.numpy()
    if isinstance(value, bytes | str | bytearray | memoryview | np.bytes_):
        out = np.empty((), _OBJECT)
        out[()] = to_bytes(value)
        return out
    arr = np.asarray(value, dtype=object) if not isinstance(value, np.ndarray) else value
    if arr.dtype.kind not in "OSU":
        raise TypeError(
            f"{api}: {arg} must be a string tensor (bytes, or an array of bytes). Received an "
            f"array of dtype {arr.dtype}.\nFix: pass the serialized bytes (e.g. the output of "
            "read_file or a bytes feature of parse_single_example).")
    out = np.empty(arr.shape, _OBJECT)
    try:
        for index, item in np.ndenumerate(arr):
            out[index] = to_bytes(item)
    except TypeError as e:
        raise TypeError(f"{api}: {arg}: {e}") from None
    return out


def scalar_string(value: Any, *, api: str, arg: str = "contents") -> bytes:
    """A 0-d string tensor as ``bytes``; TensorFlow's InvalidArgumentError for other ranks."""
    if isinstance(value, bytes):
        return bytes(value)
    arr = string_array(value, api=api, arg=arg)
    if arr.ndim != 0:
        raise InvalidArgumentError(
            f"`{arg}` must be scalar but got shape{list(arr.shape)}".replace(", ", ",")
            + f"\n{api}: decode one string at a time; for a batch, map the op over the "
            "elements (dataset.map before .batch).")
    return arr[()]


def as_int(value: Any, *, api: str, arg: str) -> int:
    """A Python int from an int or a 0-d integer array (an attribute or scalar input)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) and not (
            isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu"):
        raise TypeError(f"{api}: {arg} must be an int. Received: {arg}={value!r}.")
    return int(value)
