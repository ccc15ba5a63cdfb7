"""Example records walked one at a time in Python, and the pieces every batch path shares.

The batch scanner (`_batch_scan`) takes this path for batches under `_batch_scan.MIN_BATCH`
records, for records over `_batch_scan.LARGE_RECORD` bytes and for ``parse_single_example``; it
also holds what the scanner's paths have in common: the dtypes and Feature kinds, `_Bail` (step
aside to the protobuf path), the varint readers for one record, and `_assemble`, which makes a
feature's result from values and counts as ``parse_example`` gives it.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tpustrategy._src.data.parsing.wire import (
    read_packed_varints,
    read_varint,
)

_EMPTY = np.zeros(0, dtype=np.int64)

_INT64 = np.dtype(np.int64)

_FLOAT32 = np.dtype(np.float32)

_STRING = np.dtype(object)

_KIND = {_STRING: 1, _FLOAT32: 2, _INT64: 3}  # Feature's field numbers: bytes/float/int64 list

_LE_F32 = np.dtype("<f4")

class _Bail(Exception):
    """The batch needs protobuf's record-by-record parse."""

def _object_array(values: list[bytes]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr

def _decode_varints(data: np.ndarray, seg_len: np.ndarray, seg_rec: np.ndarray,
                    n: int) -> tuple[np.ndarray, np.ndarray]:
    """Values (int64) of the packed varints in ``data`` (runs of ``seg_len`` bytes, one per
    field, of records ``seg_rec``) and their count per record."""
    if not data.size:
        return np.zeros(0, np.int64), np.zeros(n, np.int64)
    values, last = read_packed_varints(data)
    if last.size == data.size:
        per_seg = seg_len
    else:
        seg_end = np.cumsum(seg_len)
        if not (data[seg_end[seg_len > 0] - 1] < 0x80).all():
            raise _Bail  # a run ends inside a varint
        upto = np.searchsorted(last, seg_end)
        per_seg = upto.copy()
        per_seg[1:] -= upto[:-1]
    counts = np.bincount(seg_rec, weights=per_seg, minlength=n).astype(np.int64)
    return values.view(np.int64), counts

def record_entries(rec: bytes) -> list[tuple[bytes, int, int]]:
    """``(key, value_start, value_end)`` of each feature-map entry of one non-empty serialized
    Example, in wire order; `_Bail` unless the record is one ``features`` field of canonical map
    entries (key field, then a ``Feature`` field) with UTF-8 keys. (One-byte varints are read
    inline: this walk runs once per record of ``parse_single_example``.)"""
    end = len(rec)
    if end < 2 or rec[0] != 0x0A:
        raise _Bail
    length, i = rec[1], 2
    if length >= 0x80:
        length, i = _varint(rec, 1)
    if i + length != end:
        raise _Bail  # another field after `features`, or a bad length
    out = []
    while i < end:
        if rec[i] != 0x0A or i + 1 >= end:
            raise _Bail
        length, es = rec[i + 1], i + 2
        if length >= 0x80:
            length, es = _varint(rec, i + 1)
        i = es + length
        if i > end or es + 1 >= i or rec[es] != 0x0A:
            raise _Bail
        klen, ks = rec[es + 1], es + 2
        if klen >= 0x80:
            klen, ks = _varint(rec, es + 1)
        ke = ks + klen
        if ke + 1 >= i or rec[ke] != 0x12:
            raise _Bail  # not a canonical map entry
        key = rec[ks:ke]
        if not key.isascii():
            key.decode("utf-8")  # protobuf rejects a key that is not UTF-8
        length, vs = rec[ke + 1], ke + 2
        if length >= 0x80:
            length, vs = _varint(rec, ke + 1)
        if vs + length != i:
            raise _Bail
        out.append((key, vs, i))
    return out


def _walk_record(rec: bytes, index: dict[bytes, int], kinds: list[int]) -> list[Any]:
    """Per requested feature of one record: None (missing) or the list of its field payloads
    (each bytes value, or each packed run of numbers), found by a Python walk."""
    found: list[Any] = [None] * len(kinds)
    end = len(rec)
    if not end:
        return found
    for key, vs, i in record_entries(rec):
        j = index.get(key)
        if j is None:
            continue
        if found[j] is not None:
            raise _Bail  # the key twice: protobuf keeps the last
        if vs == i:
            found[j] = _NO_KIND  # a Feature with no kind: missing
            continue
        tag = rec[vs]
        if tag & 7 != 2 or tag >> 3 != kinds[j] or vs + 1 >= i:
            raise _Bail  # a kind mismatch (or an unknown field): protobuf's path
        length, ls = rec[vs + 1], vs + 2
        if length >= 0x80:
            length, ls = _varint(rec, vs + 1)
        if ls + length != i:
            raise _Bail
        pieces: list[bytes] = []
        found[j] = pieces
        while ls < i:  # the list's fields: each bytes value, or one packed run
            if rec[ls] != 0x0A or ls + 1 >= i:
                raise _Bail  # unpacked numbers or unknown fields
            length, vs = rec[ls + 1], ls + 2
            if length >= 0x80:
                length, vs = _varint(rec, ls + 1)
            ls = vs + length
            if ls > i:
                raise _Bail
            pieces.append(rec[vs:ls])
    if any(f is _NO_KIND for f in found):
        return [None if f is _NO_KIND else f for f in found]
    return found

_NO_KIND: list[bytes] = []  # a placeholder: the key was seen, its Feature has no kind

class RecordPlan:
    """What the walk needs of a request of FixedLen / VarLen features, made once per request:
    the features in order, the index of each key (as bytes), its Feature kind, shape and size."""

    __slots__ = ("specs", "index", "kinds", "shapes", "sizes")

    def __init__(self, specs: dict[str, Any]):
        self.specs = specs
        self.index = {key.encode("utf-8"): j for j, key in enumerate(specs)}
        self.kinds = [_KIND[spec.dtype] for spec in specs.values()]
        self.shapes = [getattr(spec, "shape", None) for spec in specs.values()]
        self.sizes = [None if shape is None else math.prod(shape) for shape in self.shapes]


def _parse_each(batch: list[bytes], specs: dict[str, Any], n: int) -> dict[str, Any]:
    """The record-by-record walk: Python over each record's fields, NumPy per feature."""
    plan = RecordPlan(specs)
    if n == 1:
        one = parse_record(batch[0], plan)
        return {key: _batch_of_one(spec, one[key]) for key, spec in specs.items()}
    index, kinds = plan.index, plan.kinds
    pieces: list[list[bytes]] = [[] for _ in kinds]
    piece_rec: list[list[int]] = [[] for _ in kinds]
    present: list[list[int]] = [[] for _ in kinds]
    for r, rec in enumerate(batch):
        for j, got in enumerate(_walk_record(rec, index, kinds)):
            if got is not None:
                present[j].append(r)
                pieces[j] += got
                piece_rec[j] += [r] * len(got)
    out: dict[str, Any] = {}
    for j, (key, spec) in enumerate(specs.items()):
        seg_rec = np.array(piece_rec[j], dtype=np.int64)
        if kinds[j] == 1:
            values: Any = _object_array(pieces[j])
            counts = np.bincount(seg_rec, minlength=n).astype(np.int64)
        else:
            seg_len = np.fromiter(map(len, pieces[j]), np.int64, len(pieces[j]))
            data = np.frombuffer(b"".join(pieces[j]), np.uint8)
            if kinds[j] == 2:
                if (seg_len % 4).any():
                    raise _Bail
                values = data.view(_LE_F32).astype(np.float32)
                counts = np.bincount(seg_rec, weights=seg_len // 4, minlength=n).astype(np.int64)
            else:
                values, counts = _decode_varints(data, seg_len, seg_rec, n)
        out[key] = _assemble(spec, values, counts, np.array(present[j], dtype=np.int64), n)
    return out


def parse_record(rec: bytes, plan: RecordPlan) -> dict[str, Any]:
    """One record as ``parse_single_example`` gives it (no batch axis: a FixedLen feature of its
    shape, ``bytes`` for a scalar string, a VarLen feature's values), with as few array steps as
    possible; `_Bail` for anything the protobuf path must decide (or raise)."""
    out: dict[str, Any] = {}
    found = _walk_record(rec, plan.index, plan.kinds)
    for key, spec, kind, shape, size, got in zip(plan.specs, plan.specs.values(), plan.kinds, plan.shapes,
                                                 plan.sizes, found):
        if got is None:
            if shape is None:
                out[key] = _object_array([]) if kind == 1 else np.zeros(0, spec.dtype)
            elif spec._default is None:
                raise _Bail  # a missing required feature: protobuf's path raises it
            else:
                default = spec._default
                out[key] = bytes(default[()]) if kind == 1 and not shape else default.copy()
            continue
        if kind == 1:
            if shape == ():
                if len(got) != 1:
                    raise _Bail  # a wrong count: protobuf's path raises it
                out[key] = got[0]
                continue
            values: Any = _object_array(got)
        else:
            data = got[0] if len(got) == 1 else b"".join(got)
            if kind == 2:
                if len(data) % 4:
                    raise _Bail
                values = np.frombuffer(data, _LE_F32).astype(np.float32)
            elif len(data) <= 32:
                values = np.array(_small_varints(data), dtype=np.int64)
            else:
                raise _Bail  # many varints of one record: protobuf's C decoder is quicker
        if shape is None:
            out[key] = values
        elif values.size != size:
            raise _Bail  # a wrong count: protobuf's path raises it
        else:
            out[key] = values.reshape(shape)
    return out


def _batch_of_one(spec: Any, value: Any) -> Any:
    """A value of `parse_record` as ``parse_example`` gives it for a batch of one."""
    shape = getattr(spec, "shape", None)
    if shape is None:
        return value, np.array([value.size], np.int64)
    if type(value) is bytes:
        return _object_array([value])
    return value.reshape((1, *shape))


def _small_varints(data: bytes) -> list[int]:
    """The int64 values of a short run of packed varints (``wire.read_varint`` one by one)."""
    values = []
    i, end = 0, len(data)
    while i < end:
        value, i = read_varint(data, i, end)
        values.append(value - (1 << 64) if value >> 63 else value)
    return values

def _varint(rec: bytes, i: int) -> tuple[int, int]:
    """``wire.read_varint`` with the one-byte case inline; bails past the record's end."""
    if i >= len(rec):
        raise _Bail
    byte = rec[i]
    if byte < 0x80:
        return byte, i + 1
    return read_varint(rec, i)

def _assemble(spec: Any, values: np.ndarray, counts: np.ndarray, present: np.ndarray,
              n: int) -> Any:
    shape = getattr(spec, "shape", None)
    if shape is None:  # VarLenFeature
        return values, counts
    size = math.prod(shape)
    if (counts[present] != size).any():
        raise _Bail  # a wrong count: protobuf's path raises it
    if present.size == n:
        return values.reshape((n, *shape))
    if spec._default is None:
        raise _Bail  # a missing required feature: protobuf's path raises it
    out = np.empty((n, size), dtype=values.dtype)
    out[:] = spec._default.reshape(1, size)
    out[present] = values.reshape(present.size, size)
    return out.reshape((n, *shape))
