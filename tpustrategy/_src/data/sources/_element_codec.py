"""Bytes for one dataset element, and JSON for an element spec (the format of ``save`` / ``snapshot``).

A record is the element's leaves in flattening order, each as
``kind (1 byte) + header + payload``: ``b`` bytes scalar (uint64 length),
``n`` numeric array (dtype string, rank, dims, raw little-endian data), ``s``
string array (rank, dims, one uint64 length per item, then the items). No
pickle: loading runs no code. The structure is not in the record; it comes
from the spec JSON written once (tuples, dicts with str keys, TensorSpec
leaves; a namedtuple is written as a tuple).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from tpustrategy._src.data.core.structure import OBJECT, TensorSpec, flatten, unflatten_as

_Q = struct.Struct("<Q")


def encode(element: Any) -> bytes:
    parts: list[bytes] = []
    for leaf in flatten(element):
        if isinstance(leaf, bytes):
            parts += [b"b", _Q.pack(len(leaf)), leaf]
            continue
        arr = np.asarray(leaf)
        dims = b"".join(_Q.pack(d) for d in arr.shape)
        if arr.dtype == OBJECT or arr.dtype.kind in "SU":
            items = [x if isinstance(x, bytes) else str(x).encode() for x in arr.reshape(-1).tolist()]
            parts += [b"s", bytes([arr.ndim]), dims, b"".join(_Q.pack(len(x)) for x in items), *items]
        else:
            dt = arr.dtype.newbyteorder("<").str.encode()
            parts += [b"n", bytes([len(dt)]), dt, bytes([arr.ndim]), dims,
                      np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()]
    return b"".join(parts)


def decode(record: bytes, template: Any) -> Any:
    leaves: list[Any] = []
    mv, i = memoryview(record), 0
    while i < len(record):
        kind = record[i : i + 1]
        i += 1
        if kind == b"b":
            (n,) = _Q.unpack_from(record, i)
            leaves.append(bytes(mv[i + 8 : i + 8 + n]))
            i += 8 + n
            continue
        if kind == b"n":
            k = record[i]
            dt = np.dtype(record[i + 1 : i + 1 + k].decode())
            i += 1 + k
        rank = record[i]
        shape = tuple(_Q.unpack_from(record, i + 1 + 8 * j)[0] for j in range(rank))
        i += 1 + 8 * rank
        size = int(np.prod(shape, dtype=np.int64))
        if kind == b"n":
            nbytes = size * dt.itemsize
            arr = np.frombuffer(record, dtype=dt, count=size, offset=i).reshape(shape).astype(dt.newbyteorder("="))
            i += nbytes
            leaves.append(arr if arr.ndim else arr[()])
        elif kind == b"s":
            lens = np.frombuffer(record, dtype="<u8", count=size, offset=i).tolist()
            i += 8 * size
            items = []
            for n in lens:
                items.append(bytes(mv[i : i + n]))
                i += n
            out = np.empty(size, dtype=OBJECT)
            out[:] = items
            leaves.append(out.reshape(shape))
        else:
            raise ValueError(f"load: a record is corrupt (unknown leaf kind {kind!r} at byte {i - 1}).")
    return unflatten_as(template, leaves)


def spec_to_json(spec: Any) -> Any:
    if isinstance(spec, TensorSpec):
        dt = "string" if spec.dtype == OBJECT else spec.dtype.str
        return {"spec": {"shape": list(spec.shape), "dtype": dt}}
    if isinstance(spec, tuple):
        return {"tuple": [spec_to_json(s) for s in spec]}
    if isinstance(spec, dict):
        return {"dict": [[str(k), spec_to_json(v)] for k, v in spec.items()]}
    raise TypeError(f"save: cannot record an element spec of type {type(spec).__name__}: {spec!r}.")


def spec_from_json(data: Any) -> Any:
    if "spec" in data:
        s = data["spec"]
        return TensorSpec(s["shape"], OBJECT if s["dtype"] == "string" else np.dtype(s["dtype"]))
    if "tuple" in data:
        return tuple(spec_from_json(s) for s in data["tuple"])
    return {k: spec_from_json(v) for k, v in data["dict"]}
