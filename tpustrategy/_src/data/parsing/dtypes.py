"""The dtypes a ``tf.train.Example`` stores (int64, float32, bytes) and their accepted spellings."""

from __future__ import annotations

import numpy as np

_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype(np.float32)
_STRING = np.dtype(object)
_KIND_OF = {_INT64: "int64_list", _FLOAT32: "float_list", _STRING: "bytes_list"}
_NAME_OF = {_INT64: "int64", _FLOAT32: "float32", _STRING: "string"}
_STRING_ALIASES = ("string", "str", "bytes", "object")


def canonical_dtype(dtype: object, *, api: str) -> np.dtype:
    """Returns int64, float32 or object (for strings) for an accepted dtype spelling.

    Accepted: the names "int64", "float32", "string"; ``np.int64``,
    ``np.float32``, ``bytes``, ``str``, ``object`` and their NumPy dtypes; and
    any object whose ``.name`` is one of the names (such as ``tf.int64``).
    """
    name = getattr(dtype, "name", None) if not isinstance(dtype, str | np.dtype) else None
    if isinstance(name, str) and name in ("int64", "float32", "string"):
        dtype = name
    if isinstance(dtype, str) and dtype in _STRING_ALIASES:
        return _STRING
    if dtype in (bytes, str, object, np.bytes_, np.str_, np.object_):
        return _STRING
    try:
        np_dtype = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        np_dtype = None
    if np_dtype in (_INT64, _FLOAT32):
        return np_dtype
    if np_dtype is not None and np_dtype.kind in "OSU":
        return _STRING
    raise ValueError(
        f"{api}: dtype must be int64, float32 or string (the kinds a tf.train.Example "
        f"stores). Received: dtype={dtype!r}.\nFix: pass 'int64', 'float32' or 'string' "
        "(or np.int64, np.float32, bytes); cast the parsed array afterwards if you need "
        "another dtype."
    )
