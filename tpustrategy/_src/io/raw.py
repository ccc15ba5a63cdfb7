"""``decode_raw``: the bytes of each string reinterpreted as numbers (``tf.io.decode_raw``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.io._tensors import as_dtype, as_int, dtype_name, string_array

_ALLOWED = {"float16", "float32", "float64", "int32", "uint16", "uint8", "int16", "int8",
            "int64", "bool", "complex64", "complex128", "bfloat16", "uint32", "uint64"}
_PADDED_ALLOWED = {"float16", "float32", "float64", "int32", "uint16", "uint8", "int16", "int8",
                   "int64", "bfloat16"}


# (out_type as given, little_endian) -> (dtype, dtype of the bytes read), for the fast paths.
_READ_AS: dict[tuple[Any, bool], tuple[np.dtype, np.dtype]] = {}


def _read_as(out_type: Any, little_endian: bool) -> tuple[np.dtype, np.dtype] | None:
    """``(dtype, dtype to read the bytes as)`` for a numeric ``out_type`` other than bool and
    complex; None where the general path decides (also for an unhashable or invalid type)."""
    try:
        dtypes = _READ_AS.get((out_type, little_endian))
    except TypeError:
        return None
    if dtypes is None:
        try:
            dtype = as_dtype(out_type, api="tps.io.decode_raw", arg="out_type")
        except TypeError:
            return None
        if dtype_name(dtype) not in _ALLOWED or dtype.kind in "cb":
            return None
        read = dtype.newbyteorder("<" if little_endian else ">") if dtype.itemsize > 1 else dtype
        dtypes = (dtype, read)
        if len(_READ_AS) < 256:
            _READ_AS[(out_type, little_endian)] = dtypes
    return dtypes


def _decode_fast(input_bytes: Any, out_type: Any, little_endian: bool) -> np.ndarray | None:
    """One ``bytes`` or an object array of ``bytes`` of one non-zero length that is a multiple
    of the type's size, decoded without the general path's per-string copies; None for
    anything else (the general path decides, and raises)."""
    dtypes = _read_as(out_type, little_endian)
    if dtypes is None:
        return None
    dtype, read = dtypes
    if isinstance(input_bytes, bytes):
        if not input_bytes or len(input_bytes) % dtype.itemsize:
            return None
        return np.frombuffer(input_bytes, read).astype(dtype)
    flat = input_bytes.reshape(-1)
    if not flat.size:
        return None
    try:
        joined = bytearray().join(flat)  # one copy, and a writable array over it
    except TypeError:
        return None  # str or other items: the general path converts or rejects them
    size = len(joined) // flat.size
    if not size or size % dtype.itemsize or set(map(len, flat.tolist())) != {size}:
        return None
    values = np.frombuffer(joined, read)
    if read != dtype:
        values = values.astype(dtype)  # bytes in the other order than this machine's
    return values.reshape(input_bytes.shape + (size // dtype.itemsize,))


def decode_raw(input_bytes: Any, out_type: Any, little_endian: bool = True,
               fixed_length: Any = None, name: str | None = None) -> np.ndarray:
    """Reinterprets the bytes of each string as a vector of numbers (``tf.io.decode_raw``).

    Args:
      input_bytes: a string tensor of any shape: ``bytes`` or an object array of ``bytes``.
        Without ``fixed_length`` every string must have the same length, a multiple of the
        size of ``out_type``.
      out_type: the element dtype (``np.uint8``, ``'float32'``, ``tf.int16`` ...).
      little_endian: whether the bytes are little-endian (ignored for 1-byte types).
      fixed_length: if given, each string is cut or zero-padded to this many bytes, which must
        be a multiple of the size of ``out_type``.
      name: unused (TensorFlow's op name).

    Returns:
      An array of shape ``input_bytes.shape + [length // itemsize]`` and dtype ``out_type``.

    Raises:
      tps.errors.InvalidArgumentError: strings of different lengths, or a length that is not a
        multiple of the dtype's size (TensorFlow's messages).
    """
    del name
    if fixed_length is None and (isinstance(input_bytes, bytes) or (
            isinstance(input_bytes, np.ndarray) and input_bytes.dtype == object)):
        fast = _decode_fast(input_bytes, out_type, little_endian)
        if fast is not None:
            return fast
    api = "tps.io.decode_raw"
    dtype = as_dtype(out_type, api=api, arg="out_type")
    type_name = dtype_name(dtype)
    strings = string_array(input_bytes, api=api, arg="input_bytes")
    flat = strings.reshape(-1)
    size = dtype.itemsize
    if fixed_length is not None:
        if type_name not in _PADDED_ALLOWED:
            raise TypeError(f"{api}: out_type {type_name} is not supported with fixed_length; "
                            f"supported: {sorted(_PADDED_ALLOWED)}.")
        length = as_int(fixed_length, api=api, arg="fixed_length")
        if length % size:
            raise InvalidArgumentError(
                f"fixed_length ({length}) must be a multiple of the size of out_type ({size})")
        flat = np.array([s[:length].ljust(length, b"\0") for s in flat] or [], dtype=object)
        str_size = length
    else:
        if type_name not in _ALLOWED:
            raise TypeError(f"{api}: out_type {type_name} is not supported; supported: "
                            f"{sorted(_ALLOWED)}.")
        str_size = len(flat[0]) if flat.size else 0
        for i, s in enumerate(flat):
            if len(s) != str_size:
                raise InvalidArgumentError(
                    "DecodeRaw requires input strings to all be the same size, but element "
                    f"{i} has size {str_size} != {len(s)}\nFix: pass fixed_length= to pad or "
                    "cut every string to one length.")
        if str_size == 0:
            return np.zeros(strings.shape + (0,), dtype)
        if str_size % size:
            raise InvalidArgumentError(
                f"Input to DecodeRaw has length {str_size} that is not a multiple of {size}, "
                f"the size of {type_name}")
    count = str_size // size
    if str_size == 0:
        return np.zeros(strings.shape + (0,), dtype)
    swapped = dtype.newbyteorder("<" if little_endian else ">") if size > 1 else dtype
    if dtype.kind == "c":  # TensorFlow swaps the real and imaginary parts separately
        part = np.dtype(f"f{size // 2}").newbyteorder("<" if little_endian else ">")
        buf = np.frombuffer(b"".join(flat), part).astype(np.dtype(f"f{size // 2}"))
        values = buf[0::2] + 1j * buf[1::2]
        return values.astype(dtype).reshape(strings.shape + (count,))
    if type_name == "bool":
        values = np.frombuffer(b"".join(flat), np.uint8) != 0
        return values.reshape(strings.shape + (count,))
    values = np.frombuffer(b"".join(flat), swapped).astype(dtype)
    return values.reshape(strings.shape + (count,))
