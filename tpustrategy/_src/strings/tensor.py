"""Turning arguments into string / numeric arrays, and results back into TensorFlow's forms.

One place decides what a "string tensor" is here: ``bytes`` for a scalar and an
object array of ``bytes`` otherwise (DESIGN §1, "strings as bytes"); ``str``
values are encoded as UTF-8, as ``tf.constant("é")`` does. A 0-d string result
is returned as ``bytes`` and a 0-d number as a NumPy scalar, the forms a
dataset map function meets for scalars.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError

OBJECT = np.dtype(object)


def _to_bytes(value: Any, api: str, arg: str) -> bytes:
    if isinstance(value, bytes):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, np.bytes_):
        return bytes(value)
    raise TypeError(
        f"{api}: `{arg}` must hold strings (bytes or str); received an element of type "
        f"{type(value).__name__}: {value!r}.\n"
        f"Fix: pass bytes, str or an object array of bytes; for numbers use tps.strings.as_string first."
    )


def string_array(value: Any, api: str, arg: str = "input") -> np.ndarray:
    """``value`` as an object array of ``bytes`` (any shape; 0-d for a scalar)."""
    if isinstance(value, (bytes, str, np.bytes_)):
        out = np.empty((), dtype=OBJECT)
        out[()] = _to_bytes(value, api, arg)
        return out
    arr = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=OBJECT)
    if arr.dtype.kind == "U" or arr.dtype.kind == "S" or arr.dtype == OBJECT:
        flat = [_to_bytes(v, api, arg) for v in arr.reshape(-1).tolist()]
        out = np.empty(arr.shape, dtype=OBJECT)
        out.reshape(-1)[:] = flat if flat else []
        return out
    raise TypeError(
        f"{api}: `{arg}` must be a string tensor (bytes, str, or an object array of bytes); received "
        f"dtype {arr.dtype}.\nFix: convert numbers first with tps.strings.as_string({arg})."
    )


def string_result(arr: np.ndarray) -> Any:
    """An object array of ``bytes``, or ``bytes`` itself when 0-d."""
    if arr.ndim == 0:
        return bytes(arr[()])
    return arr


def numeric_result(arr: np.ndarray) -> Any:
    """A numeric array, or a NumPy scalar when 0-d."""
    return arr[()] if arr.ndim == 0 else arr


def new_strings(shape: tuple[int, ...], fill: bytes = b"") -> np.ndarray:
    """An object array of ``shape`` filled with ``fill``."""
    out = np.empty(shape, dtype=OBJECT)
    out.reshape(-1)[:] = [fill] * out.size
    return out


def map_strings(fn: Any, arr: np.ndarray, dtype: Any = OBJECT) -> np.ndarray:
    """``fn`` applied to each ``bytes`` of ``arr``, in an array of ``arr``'s shape."""
    flat = [fn(v) for v in arr.reshape(-1).tolist()]
    if dtype == OBJECT:
        out = np.empty(arr.shape, dtype=OBJECT)
        out.reshape(-1)[:] = flat if flat else []
        return out
    return np.array(flat, dtype=dtype).reshape(arr.shape)


def int_array(value: Any, api: str, arg: str) -> np.ndarray:
    """``value`` as an integer array (TensorFlow's int32 / int64 arguments)."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise TypeError(
            f"{api}: `{arg}` must be an integer tensor (int32 or int64); received dtype {arr.dtype}: {value!r}.\n"
            f"Fix: pass Python ints or an int32 / int64 array."
        )
    return arr


def check_choice(value: Any, allowed: tuple[str, ...], api: str, arg: str) -> str:
    """``value`` if it is one of ``allowed``; else TensorFlow's attr error (an InvalidArgumentError)."""
    if value not in allowed:
        listed = ", ".join(f'"{a}"' for a in allowed)
        raise InvalidArgumentError(
            f"Value for attr '{arg}' of \"{value}\" is not in the list of allowed values: {listed}\n"
            f"({api}: received {arg}={value!r}. Fix: pass one of {list(allowed)}.)"
        )
    return str(value)


_TF_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half", "object": "string"}


def tf_type_name(dtype: np.dtype) -> str:
    """TensorFlow's name of a dtype in its messages (``float`` for float32, ``double`` for float64, ...)."""
    return _TF_TYPE_NAMES.get(np.dtype(dtype).name, np.dtype(dtype).name)
