"""``serialize_tensor`` / ``parse_tensor``: a tensor as TensorFlow's ``TensorProto`` bytes.

The bytes are those ``tf.io.serialize_tensor`` writes (field for field, in TensorFlow's
order): ``dtype`` (1), ``tensor_shape`` (2, always present), then either ``string_val``
(8, one entry per element) for strings or ``tensor_content`` (4, the little-endian
element bytes; left out when empty). ``parse_tensor`` also reads the typed ``*_val``
fields TensorFlow uses for scalars and splats (``tf.make_tensor_proto``), filling the
rest of the tensor with the last value given, as TensorFlow does.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.io import _wire
from tpustrategy._src.io._tensors import as_dtype, dtype_name, string_array, to_bytes

# TensorFlow's DataType enum (types.proto) and the names its kernels print (DataTypeString).
_ENUM = {"float32": 1, "float64": 2, "int32": 3, "uint8": 4, "int16": 5, "int8": 6, "string": 7,
         "complex64": 8, "int64": 9, "bool": 10, "bfloat16": 14, "uint16": 17, "complex128": 18,
         "float16": 19, "uint32": 22, "uint64": 23}
_TF_NAME = {"float32": "float", "float64": "double", "float16": "half"}
_FROM_ENUM = {v: k for k, v in _ENUM.items()}
DTYPE_ENUMS = _FROM_ENUM  # DataType enum number -> NumPy dtype name (for readers of TensorProto bytes)

# Typed value fields: field number -> (wire element kind, dtypes it may hold).
_INT_VAL, _INT64_VAL, _UINT32_VAL, _UINT64_VAL, _BOOL_VAL, _HALF_VAL = 7, 10, 16, 17, 11, 13
_FLOAT_VAL, _DOUBLE_VAL, _SCOMPLEX_VAL, _DCOMPLEX_VAL, _STRING_VAL = 5, 6, 9, 12, 8
_VAL_FIELD = {"float32": _FLOAT_VAL, "float64": _DOUBLE_VAL, "int32": _INT_VAL, "int16": _INT_VAL,
              "int8": _INT_VAL, "uint8": _INT_VAL, "uint16": _INT_VAL, "int64": _INT64_VAL,
              "uint32": _UINT32_VAL, "uint64": _UINT64_VAL, "bool": _BOOL_VAL,
              "float16": _HALF_VAL, "bfloat16": _HALF_VAL, "complex64": _SCOMPLEX_VAL,
              "complex128": _DCOMPLEX_VAL, "string": _STRING_VAL}


def tf_type_name(name: str) -> str:
    """The name TensorFlow's kernels print for a dtype (``float``, ``double``, ``half`` ...)."""
    return _TF_NAME.get(name, name)


def _is_python_leaf(value: Any) -> bool:
    # np.float64 and np.bool_ subclass Python types but keep their NumPy dtype in TensorFlow.
    return isinstance(value, bool | int | float | complex | str | bytes) and not isinstance(
        value, np.generic)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def to_tensor(value: Any, *, api: str, arg: str) -> np.ndarray:
    """A value as TensorFlow's ``convert_to_tensor`` would type it, as a NumPy array.

    Python ints become int32 (int64 when out of int32's range), floats float32, complex
    complex128, str/bytes strings (an object array of bytes); NumPy values keep their dtype.
    """
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    if isinstance(value, bytes | str | bytearray | np.bytes_ | np.str_):
        out = np.empty((), object)
        out[()] = to_bytes(value.encode() if isinstance(value, np.str_) else value)
        return out
    if isinstance(value, list | tuple) or _is_python_leaf(value):
        leaves = _leaves(value)
        if leaves and all(_is_python_leaf(v) for v in leaves):
            if any(isinstance(v, str | bytes) for v in leaves):
                if not all(isinstance(v, str | bytes) for v in leaves):
                    raise TypeError(f"{api}: {arg} mixes strings and numbers. Received: {arg}={value!r}.")
                arr = np.asarray(value, dtype=object)
                return np.vectorize(to_bytes, otypes=[object])(arr) if arr.size else arr
            if all(isinstance(v, bool) for v in leaves):
                return np.asarray(value, dtype=np.bool_)
            if all(isinstance(v, int) for v in leaves):
                lo, hi = min(leaves), max(leaves)
                if -2**31 <= lo and hi < 2**31:
                    return np.asarray(value, dtype=np.int32)
                if -2**63 <= lo and hi < 2**63:
                    return np.asarray(value, dtype=np.int64)
                raise ValueError("Can't convert Python sequence with out-of-range integer to Tensor.")
            if any(isinstance(v, complex) for v in leaves):
                return np.asarray(value, dtype=np.complex128)
            return np.asarray(value, dtype=np.float32)
    arr = np.asarray(value)
    if arr.dtype.kind in "OSU":
        out = np.empty(arr.shape, object)
        for index, item in np.ndenumerate(arr):
            out[index] = to_bytes(item.encode() if isinstance(item, str) else item)
        return out
    return arr


def _shape_proto(shape: tuple[int, ...]) -> bytes:
    dims = b""
    for size in shape:
        dim = _wire.tag(1, _wire.VARINT) + _wire.varint(size) if size else b""
        dims += _wire.length_delimited(2, dim)
    return dims


def serialize_tensor(tensor: Any, name: str | None = None) -> bytes:
    """Serializes a tensor into TensorFlow's ``TensorProto`` bytes (``tf.io.serialize_tensor``).

    The bytes are byte-identical to TensorFlow 2.21's for every dtype TensorFlow can
    serialize this way (float16/32/64, bfloat16, int8/16/32/64, uint8/16/32/64, bool,
    complex64/128, string), so they can be written to TFRecord files that TensorFlow reads
    back with ``tf.io.parse_tensor``, and the reverse.

    Args:
      tensor: a NumPy array or scalar, a JAX array, ``bytes``/``str`` (a string scalar), an
        object array of ``bytes`` (a string tensor), or a (nested) Python list, typed as
        ``tf.constant`` types it (ints int32, floats float32).
      name: unused (TensorFlow's op name).

    Returns:
      The serialized ``TensorProto`` as ``bytes`` (a scalar string tensor).

    Raises:
      TypeError: a dtype that has no TensorProto encoding here (e.g. float8, object of
        non-strings).
    """
    del name
    api = "tps.io.serialize_tensor"
    arr = to_tensor(tensor, api=api, arg="tensor")
    type_name = dtype_name(arr.dtype)
    if type_name not in _ENUM:
        raise TypeError(
            f"{api}: tensor has dtype {type_name}, which has no TensorProto encoding here. "
            f"Supported: {', '.join(sorted(_ENUM))}.\nFix: cast the array first (e.g. "
            "x.astype(np.float32)).")
    out = _wire.tag(1, _wire.VARINT) + _wire.varint(_ENUM[type_name])
    out += _wire.length_delimited(2, _shape_proto(arr.shape))
    if type_name == "string":
        for item in arr.reshape(-1):
            out += _wire.length_delimited(_STRING_VAL, item)
        return out
    content = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
    if content:
        out += _wire.length_delimited(4, content)
    return out


def _parse_error(data: bytes) -> InvalidArgumentError:
    return InvalidArgumentError(
        "Could not parse `serialized` as TensorProto, base64: "
        + base64.b64encode(data).decode("ascii")
        + "\ntps.io.parse_tensor: pass the bytes written by serialize_tensor (a TensorProto).")


def _numbers(values: list[tuple[int, int, bytes]], fmt: str, varint_bits: int) -> list[Any]:
    """Element values of one typed field, packed (one LENGTH field) or one per field."""
    out: list[Any] = []
    for wire_type, number, payload in values:
        if wire_type == _wire.LENGTH and fmt == "varint":
            pos = 0
            while pos < len(payload):
                item, pos = _wire.read_varint(payload, pos)
                out.append(_wire.signed(item, varint_bits) if varint_bits else item)
        elif wire_type == _wire.LENGTH:
            out.extend(np.frombuffer(payload, np.dtype(fmt)).tolist())
        elif wire_type == _wire.VARINT and fmt == "varint":
            out.append(_wire.signed(number, varint_bits) if varint_bits else number)
        elif wire_type in (_wire.FIXED32, _wire.FIXED64) and fmt != "varint":
            out.extend(np.frombuffer(payload, np.dtype(fmt)).tolist())
        else:
            raise _wire.WireFormatError("wire type does not match the field")
    return out


def parse_tensor(serialized: Any, out_type: Any, name: str | None = None) -> Any:
    """Parses TensorFlow ``TensorProto`` bytes into an array (``tf.io.parse_tensor``).

    Args:
      serialized: the bytes (a scalar string tensor), e.g. from ``serialize_tensor`` or
        TensorFlow's ``tf.io.serialize_tensor``.
      out_type: the dtype the tensor must have (``np.float32``, ``'int64'``, ``tf.string`` ...).
      name: unused (TensorFlow's op name).

    Returns:
      A NumPy array of dtype ``out_type`` (an object array of ``bytes`` for strings; a string
      scalar is returned as ``bytes``).

    Raises:
      tps.errors.InvalidArgumentError: bytes that are not a TensorProto (``Could not parse
        `serialized` as TensorProto, base64: ...``), a dtype other than ``out_type`` (``Type
        mismatch between parsed tensor (float) and dtype (int32)``), or values that do not
        fit the shape (``Cannot parse tensor from proto: ...``).
    """
    del name
    api = "tps.io.parse_tensor"
    strings = string_array(serialized, api=api, arg="serialized")
    if strings.ndim:
        raise InvalidArgumentError(
            "Expected `serialized` to be a scalar, got shape: "
            + str(list(strings.shape)).replace(", ", ",")
            + f"\n{api}: parse one tensor at a time; for a batch, map the op over the elements "
            "(dataset.map before .batch).")
    data = bytes(strings[()])
    want = dtype_name(as_dtype(out_type, api=api, arg="out_type"))
    try:
        enum, shape, content = 0, [], None
        typed: list[tuple[int, int, int, bytes]] = []
        for field, wire_type, number, payload in _wire.read_fields(data):
            if field == 1 and wire_type == _wire.VARINT:
                enum = number
            elif field == 2 and wire_type == _wire.LENGTH:
                shape = _shape(payload)
            elif field == 4 and wire_type == _wire.LENGTH:
                content = payload
            else:
                typed.append((field, wire_type, number, payload))
    except _wire.WireFormatError:
        raise _parse_error(data) from None
    got = _FROM_ENUM.get(enum, f"type enum {enum}")
    if got != want:
        raise InvalidArgumentError(
            f"Type mismatch between parsed tensor ({tf_type_name(got)}) and dtype "
            f"({tf_type_name(want)})\n{api}: pass out_type={got!r}, the dtype that was serialized.")
    dtype = as_dtype(want, api=api, arg="out_type")
    if any(size < 0 for size in shape):
        raise _cannot_parse(got, shape, "a dimension is negative")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if want == "string":
        strs: list[Any] = [p for f, w, _n, p in typed if f == _STRING_VAL and w == _wire.LENGTH]
        return _fill(strs, count, shape, np.dtype(object), got)
    if content is not None:
        if len(content) != count * dtype.itemsize:
            raise _cannot_parse(got, shape, f"tensor_content has {len(content)} bytes, the shape "
                                f"needs {count * dtype.itemsize}")
        arr = np.frombuffer(content, dtype.newbyteorder("<")).astype(dtype).reshape(shape)
        return arr
    field = _VAL_FIELD[want]
    raw = [(w, n, p) for f, w, n, p in typed if f == field]
    try:
        if field in (_FLOAT_VAL, _SCOMPLEX_VAL):
            values = _numbers(raw, "<f4", 0)
        elif field in (_DOUBLE_VAL, _DCOMPLEX_VAL):
            values = _numbers(raw, "<f8", 0)
        else:
            bits = 0 if field in (_UINT32_VAL, _UINT64_VAL, _BOOL_VAL) else (
                64 if field == _INT64_VAL else 32)
            values = _numbers(raw, "varint", bits)
    except _wire.WireFormatError:
        raise _parse_error(data) from None
    if field in (_SCOMPLEX_VAL, _DCOMPLEX_VAL):
        values = [complex(r, i) for r, i in zip(values[0::2], values[1::2], strict=False)]
    if field == _HALF_VAL:  # the 16 bits of each half / bfloat16 value
        values = np.array(values, np.uint16).view(dtype).tolist() if values else []
    return _fill(values, count, shape, dtype, got)


def _shape(payload: bytes) -> list[int]:
    """The dimension sizes of a TensorShapeProto (``dim`` = 2, each with ``size`` = 1)."""
    shape = []
    for field, wire_type, _number, dim in _wire.read_fields(payload):
        if field == 2 and wire_type == _wire.LENGTH:
            size = 0
            for f, w, n, _p in _wire.read_fields(dim):
                if f == 1 and w == _wire.VARINT:
                    size = _wire.signed(n)
            shape.append(size)
    return shape


def _cannot_parse(type_name: str, shape: list[int], why: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Cannot parse tensor from proto: dtype: {type_name}, shape: {shape}: {why}."
        "\ntps.io.parse_tensor: the TensorProto is inconsistent; re-serialize the tensor.")


def _fill(values: list[Any], count: int, shape: list[int], dtype: np.dtype, got: str) -> Any:
    """The tensor from typed values: all of them, or fewer with the last one repeated."""
    if len(values) > count:
        raise _cannot_parse(got, shape, f"{len(values)} values for {count} elements")
    out = np.empty(count, dtype) if dtype == np.dtype(object) else np.zeros(count, dtype)
    if values:
        out[:len(values)] = np.array(values, dtype=dtype) if dtype != np.dtype(object) else values
        out[len(values):] = out[len(values) - 1]
    elif dtype == np.dtype(object):
        out[:] = b""
    out = out.reshape(shape)
    return out[()] if dtype == np.dtype(object) and out.ndim == 0 else out
