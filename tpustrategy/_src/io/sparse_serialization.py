"""``tf.io.serialize_sparse`` / ``serialize_many_sparse`` / ``deserialize_many_sparse``.

A sparse tensor is written as TensorFlow writes it: a string vector of three serialized
``TensorProto``s (``serialize_tensor`` bytes) -- the int64 ``indices``, the ``values`` and the
int64 ``dense_shape`` -- so the rows can be stored in TFRecord files that TensorFlow reads
back with ``tf.io.deserialize_many_sparse``, and the reverse.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.io import _wire
from tpustrategy._src.io._tensors import as_dtype, dtype_name
from tpustrategy._src.io.tensor_proto import (
    DTYPE_ENUMS,
    _shape,
    _shape_proto,
    parse_tensor,
    serialize_tensor,
    tf_type_name,
)
from tpustrategy._src.sparse.tensor import SparseTensor, as_sparse


def _check_out_type(out_type: Any, api: str) -> None:
    text = getattr(out_type, "name", out_type)
    if text in ("string", str, bytes, object) or (isinstance(text, np.dtype) and text.kind == "O"):
        return
    raise TypeError(
        f"{api}: out_type must be tf.string (a string vector of serialized TensorProtos); received "
        f"{out_type!r}.\nFix: leave out_type at its default; tpustrategy has no tf.variant tensors.")


def _strings(items: list[bytes]) -> np.ndarray:
    out = np.empty(len(items), object)
    out[:] = items
    return out


def _check_indices(indices: np.ndarray, shape: np.ndarray, api: str) -> None:
    """TensorFlow's ``SparseTensor::IndicesValid``: in bounds, strictly increasing in row-major order."""
    bound = "[" + ",".join(str(int(d)) for d in shape) + "]"
    for n, row in enumerate(indices):
        text = "[" + ",".join(str(int(v)) for v in row) + "]"
        if np.any(row < 0) or np.any(row >= shape):
            raise InvalidArgumentError(f"indices[{n}] = {text} is out of bounds: need 0 <= index < {bound}\n"
                                       f"{api}: Fix: keep every index inside dense_shape.")
        if n:
            prev = tuple(int(v) for v in indices[n - 1])
            here = tuple(int(v) for v in row)
            if here == prev:
                raise InvalidArgumentError(f"indices[{n}] = {text} is repeated\n"
                                           f"{api}: Fix: merge the duplicate entries.")
            if here < prev:
                raise InvalidArgumentError(
                    f"indices[{n}] = {text} is out of order. Many sparse ops require sorted indices.\n"
                    "    Use `tf.sparse.reorder` to create a correctly ordered copy.\n"
                    f"{api}: Fix: pass tps.sparse.reorder(sp_input).")


def _parts(sp_input: Any, api: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    st = as_sparse(sp_input, api=api, arg="sp_input")
    indices = np.asarray(st.indices, np.int64)
    shape = np.asarray(st.dense_shape, np.int64).reshape(-1)
    return indices.reshape(-1, shape.size), np.asarray(st.values), shape


def _string_values(values: np.ndarray) -> bytes:
    """A string vector as TensorFlow's sparse serialization writes it: ``tensor_content`` holding
    every element's length (varints), then the elements' bytes."""
    items = [v.encode() if isinstance(v, str) else bytes(v) for v in values.reshape(-1)]
    content = b"".join(_wire.varint(len(v)) for v in items) + b"".join(items)
    out = _wire.tag(1, _wire.VARINT) + _wire.varint(7) + _wire.length_delimited(2, _shape_proto(values.shape))
    return out + (_wire.length_delimited(4, content) if content else b"")


def _parse_string_values(data: bytes) -> np.ndarray:
    """Reads ``_string_values``'s layout, or the ``string_val`` one of ``serialize_tensor``."""
    content, shape = None, []
    for field, wire_type, _number, payload in _wire.read_fields(data):
        if field == 4 and wire_type == _wire.LENGTH:
            content = payload
        elif field == 2 and wire_type == _wire.LENGTH:
            shape = _shape(payload)
    if content is None:
        return np.asarray(parse_tensor(data, "string"), object).reshape(-1)
    count = int(np.prod(shape)) if shape else 1
    sizes, pos = [], 0
    for _ in range(count):
        size, pos = _wire.read_varint(content, pos)
        sizes.append(size)
    items = []
    for size in sizes:
        items.append(content[pos:pos + size])
        pos += size
    if pos != len(content):
        raise _wire.WireFormatError("string tensor_content does not match its lengths")
    return _strings(items)


def _serialize(indices: np.ndarray, values: np.ndarray, shape: np.ndarray) -> list[bytes]:
    text = values.dtype == object or values.dtype.kind in "SU"
    return [serialize_tensor(indices), _string_values(values) if text else serialize_tensor(values),
            serialize_tensor(shape)]


def serialize_sparse(sp_input: Any, out_type: Any = "string", name: str | None = None) -> np.ndarray:
    """Serializes a sparse tensor into three ``TensorProto`` strings (``tf.io.serialize_sparse``).

    Args:
      sp_input: a ``tps.sparse.SparseTensor`` (or any object with ``indices``, ``values`` and
        ``dense_shape``).
      out_type: ``tf.string`` (the default; ``"string"``). ``tf.variant`` does not exist here.
      name: unused (TensorFlow's op name).

    Returns:
      A ``[3]`` object array of ``bytes``: ``serialize_tensor`` of the int64 ``indices``, the
      ``values`` and the int64 ``dense_shape``, byte for byte as TensorFlow 2.21 writes them.
    """
    del name
    api = "tps.io.serialize_sparse"
    _check_out_type(out_type, api)
    return _strings(_serialize(*_parts(sp_input, api)))


def serialize_many_sparse(sp_input: Any, out_type: Any = "string", name: str | None = None) -> np.ndarray:
    """Serializes each row (first dimension) of a sparse tensor (``tf.io.serialize_many_sparse``).

    Args:
      sp_input: a ``tps.sparse.SparseTensor`` of rank > 1, indices in row-major order.
      out_type: ``tf.string`` (the default).
      name: unused (TensorFlow's op name).

    Returns:
      An ``[N, 3]`` object array: row ``i`` is ``serialize_sparse`` of ``sp_input[i]`` (rank
      ``R - 1``, dense shape ``dense_shape[1:]``).

    Raises:
      tps.errors.InvalidArgumentError: rank 1 or less, or indices out of order or bounds (as
        TensorFlow).
    """
    del name
    api = "tps.io.serialize_many_sparse"
    _check_out_type(out_type, api)
    indices, values, shape = _parts(sp_input, api)
    if shape.size < 2:
        raise InvalidArgumentError(
            f"Rank of input SparseTensor should be > 1, but saw rank: {shape.size}\n"
            f"{api}: Fix: the first dimension is the batch; for one tensor use tps.io.serialize_sparse.")
    _check_indices(indices, shape, api)
    rows = np.empty((int(shape[0]), 3), object)
    for i in range(int(shape[0])):
        mine = indices[:, 0] == i
        rows[i] = _serialize(np.ascontiguousarray(indices[mine, 1:]), values[mine], shape[1:])
    return rows


def _serialized_dtype(data: bytes) -> str | None:
    try:
        for field, wire_type, number, _payload in _wire.read_fields(data):
            if field == 1 and wire_type == _wire.VARINT:
                return DTYPE_ENUMS.get(number, f"type enum {number}")
    except _wire.WireFormatError:
        return None
    return "invalid"


def deserialize_many_sparse(serialized_sparse: Any, dtype: Any, rank: int | None = None,
                            name: str | None = None) -> SparseTensor:
    """Joins ``[N, 3]`` serialized sparse tensors into one of rank ``R + 1``
    (``tf.io.deserialize_many_sparse``).

    Row ``i``'s entries get ``i`` as their first index (kept in the order serialized); the dense
    shape is ``[N]`` followed by the largest size of each dimension over the rows.

    Args:
      serialized_sparse: an ``[N, 3]`` string array, e.g. rows of ``serialize_sparse`` results
        stacked, or ``serialize_many_sparse``'s result (TensorFlow's bytes too).
      dtype: the dtype of the values.
      rank: the rank ``R + 1`` of the result, if known; checked.
      name: unused (TensorFlow's op name).

    Returns:
      A ``tps.sparse.SparseTensor``.

    Raises:
      tps.errors.InvalidArgumentError: not ``[N, 3]`` with ``N > 0``, bytes that are not
        TensorProtos, values of another dtype, or rows of different ranks (TensorFlow's messages).
    """
    del name
    api = "tps.io.deserialize_many_sparse"
    want = dtype_name(as_dtype(dtype, api=api, arg="dtype"))
    ser = np.asarray(serialized_sparse, dtype=object)
    if ser.ndim != 2 or ser.shape[1] != 3:
        raise InvalidArgumentError(
            f"Serialized sparse should have shape [N, 3]; received shape {list(ser.shape)}\n"
            f"{api}: Fix: stack the 3-vectors of serialize_sparse (np.stack), or pass "
            "serialize_many_sparse's result.")
    if ser.shape[0] == 0:
        raise InvalidArgumentError(
            "Serialized sparse should have at least 1 serialized tensor, but has a zero dimension [0,3]\n"
            f"{api}: Fix: pass at least one row.")
    all_indices, all_values, shapes = [], [], []
    for i, (s_ind, s_val, s_shape) in enumerate(ser):
        parsed = []
        for data, kind in ((s_ind, "int64"), (s_val, want), (s_shape, "int64")):
            data = data.encode() if isinstance(data, str) else bytes(data)
            got = _serialized_dtype(data)
            if got is None:
                raise InvalidArgumentError(f"Could not parse serialized proto\n{api}: Fix: row {i} is not "
                                           "serialize_sparse output.")
            if len(parsed) == 1 and got != want:
                raise InvalidArgumentError(
                    f"Requested SparseTensor of type {tf_type_name(want)} but SparseTensor[{i}].values.dtype() "
                    f"== {tf_type_name(got)}\n{api}: Fix: pass dtype={got!r}.")
            if len(parsed) == 1 and want == "string":
                try:
                    parsed.append(_parse_string_values(data))
                except _wire.WireFormatError:
                    raise InvalidArgumentError(f"Could not parse serialized proto\n{api}: Fix: row {i} is "
                                               "not serialize_sparse output.") from None
            else:
                parsed.append(parse_tensor(data, kind))
        ind, val, shape = parsed
        shape = np.asarray(shape, np.int64).reshape(-1)
        ind = np.asarray(ind, np.int64).reshape(-1, shape.size)
        if shapes and shape.size != shapes[0].size:
            raise InvalidArgumentError(
                f"Inconsistent shape across SparseTensors: rank prior to SparseTensor[{i}] was: "
                f"{shapes[0].size} but rank of SparseTensor[{i}] is: {shape.size}\n"
                f"{api}: Fix: every row must have the same rank.")
        shapes.append(shape)
        all_indices.append(np.concatenate([np.full((len(ind), 1), i, np.int64), ind], axis=1))
        all_values.append(np.asarray(val).reshape(-1))
    dense_shape = np.concatenate([[len(shapes)], np.max(np.stack(shapes), axis=0)]).astype(np.int64)
    if rank is not None and int(rank) != dense_shape.size:
        raise ValueError(f"{api}: rank={rank} but the rows deserialize to rank {dense_shape.size} "
                         f"(dense shape {dense_shape.tolist()}).\nFix: pass rank={dense_shape.size} or None.")
    values = np.concatenate(all_values) if want != "string" else _strings(
        [v for part in all_values for v in part])
    return SparseTensor(np.concatenate(all_indices), values, dense_shape)
