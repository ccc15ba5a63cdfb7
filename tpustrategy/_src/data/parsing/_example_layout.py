"""Vectorised parsing of a batch of serialized Examples that share one byte layout.

Examples with fixed-size numeric features serialize to the same bytes except
inside the packed value payloads: same length, same tags, same keys, same
length prefixes. For such a batch the first record is walked once on the wire
(protobuf encoding) to find where each requested feature's packed payload
lies; the batch is then one ``(batch, length)`` byte matrix, and

* every byte outside the requested payloads (and outside the value lists of
  features not requested, whose contents TensorFlow does not look at either)
  must equal the first record's, so every record has the first one's
  structure;
* a float payload is a column block viewed as little-endian float32;
* an int64 payload is decoded as varints column-wise, after checking that every
  record has the first one's continuation-bit pattern (same varint widths).

Anything unusual -- records of different lengths, unknown fields, unpacked
lists, duplicate keys, empty ``Feature`` messages, string features, a kind or
count the request does not accept -- makes :func:`parse_uniform_batch` return
None, and the caller parses record by record (which also raises the errors).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.data.parsing.wire import WireError, read_varint

_KINDS = {0x0A: "bytes_list", 0x12: "float_list", 0x1A: "int64_list"}
_WANT_KIND = {np.dtype(np.float32): "float_list", np.dtype(np.int64): "int64_list"}
_LE_F32 = np.dtype("<f4")


class _Bail(Exception):
    """The record is not in the simple layout this module decodes."""


def _field(buf: bytes, i: int, end: int) -> tuple[int, int, int]:
    """Reads a tag and a length prefix; returns (tag, content start, content end)."""
    tag, i = read_varint(buf, i, end)
    if tag & 7 != 2:
        raise _Bail
    length, i = read_varint(buf, i, end)
    if i + length > end:
        raise _Bail
    return tag, i, i + length


def walk(buf: bytes) -> dict[str, tuple[str, int, int]] | None:
    """Maps each feature key of one serialized Example to ``(kind, start, end)``.

    ``start:end`` is the content of the feature's BytesList/FloatList/Int64List
    message. Returns None for anything but the plain layout.
    """
    n = len(buf)
    out: dict[str, tuple[str, int, int]] = {}
    try:
        tag, i, fend = _field(buf, 0, n)
        if tag != 0x0A or fend != n:
            return None
        while i < fend:
            tag, i, eend = _field(buf, i, fend)
            if tag != 0x0A:
                return None
            key = feat = None
            while i < eend:
                tag, start, i = _field(buf, i, eend)
                if tag == 0x0A and key is None:
                    key = buf[start:i].decode("utf-8")
                elif tag == 0x12 and feat is None:
                    feat = (start, i)
                else:
                    return None
            if key is None or feat is None or key in out or feat[0] == feat[1]:
                return None
            tag, start, end = _field(buf, feat[0], feat[1])
            if end != feat[1] or tag not in _KINDS:
                return None
            out[key] = (_KINDS[tag], start, end)
    except (_Bail, WireError, UnicodeDecodeError):
        return None
    return out


def _packed_payload(buf: bytes, start: int, end: int) -> tuple[int, int]:
    """The (start, end) of the single packed field filling a list's content."""
    if start == end:
        return start, start
    tag, s, e = _field(buf, start, end)
    if tag != 0x0A or e != end:
        raise _Bail
    return s, e


def _varint_widths(buf: bytes, start: int, end: int) -> list[int]:
    widths = []
    i = start
    while i < end:
        _, j = read_varint(buf, i, end)
        if j - i > 10:
            raise _Bail
        widths.append(j - i)
        i = j
    return widths


def _decode_varints(block: np.ndarray, widths: list[int]) -> np.ndarray:
    """Decodes rows of varints with the given (shared) widths into int64."""
    rows = block.shape[0]
    if all(w == 1 for w in widths):
        return block.astype(np.int64)
    starts = np.cumsum([0, *widths[:-1]])
    w_arr = np.asarray(widths)
    out = np.zeros((rows, len(widths)), dtype=np.uint64)
    wide = block.astype(np.uint64)
    for width in sorted(set(widths)):
        cols = np.flatnonzero(w_arr == width)
        acc = np.zeros((rows, cols.size), dtype=np.uint64)
        for t in range(width):
            part = wide[:, starts[cols] + t] & np.uint64(0x7F)
            acc |= np.left_shift(part, np.uint64(7 * t))
        out[:, cols] = acc
    return out.view(np.int64)


def parse_uniform_batch(batch: list[bytes], specs: dict[str, Any]) -> dict[str, Any] | None:
    """Parses ``batch`` with NumPy if all records share one layout, else returns None.

    Args:
      batch: serialized Examples (``bytes``).
      specs: name -> FixedLenFeature/VarLenFeature (dtypes already canonical).

    Returns:
      The same dict ``parsing.parse_example`` returns, or None.
    """
    if not batch or any(spec.dtype not in _WANT_KIND for spec in specs.values()):
        return None
    first = batch[0]
    length = len(first)
    if length == 0 or any(len(b) != length for b in batch):
        return None
    layout = walk(first)
    if layout is None:
        return None
    keep = np.ones(length, dtype=bool)
    for _kind, start, end in layout.values():
        keep[start:end] = False  # contents of lists not requested are not looked at
    plans = []
    try:
        for key, spec in specs.items():
            if key not in layout or layout[key][0] != _WANT_KIND[spec.dtype]:
                return None
            kind, start, end = layout[key]
            s, e = _packed_payload(first, start, end)
            keep[start:s] = True  # the packed field's tag and length prefix
            if kind == "float_list":
                if (e - s) % 4:
                    return None
                widths = None
                count = (e - s) // 4
            else:
                widths = _varint_widths(first, s, e)
                count = len(widths)
            shape = getattr(spec, "shape", None)
            if shape is not None and count != int(np.prod(shape)):
                return None
            plans.append((key, spec, s, e, widths, count))
    except (_Bail, WireError):
        return None
    rows = len(batch)
    arr = np.frombuffer(b"".join(batch), dtype=np.uint8).reshape(rows, length)
    if rows > 1:
        skeleton = arr[:, keep]
        if not (skeleton == skeleton[0]).all():
            return None
    out: dict[str, Any] = {}
    for key, spec, s, e, widths, count in plans:
        block = arr[:, s:e]
        if widths is None:
            values = np.ascontiguousarray(block).view(_LE_F32).astype(np.float32, copy=False)
        else:
            cont = block >= 0x80
            if rows > 1 and not (cont == cont[0]).all():
                return None
            values = _decode_varints(block, widths)
        values = values.reshape(rows, count)
        shape = getattr(spec, "shape", None)
        if shape is not None:
            out[key] = values.reshape((rows, *shape))
        else:
            out[key] = (values.reshape(-1), np.full(rows, count, dtype=np.int64))
    return out
