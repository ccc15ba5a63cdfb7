"""Vectorised parsing of a batch of serialized Examples of any layout.

The records are joined into one byte buffer and the protobuf wire format is
walked for all of them at once, one nesting level at a time
(``Example`` -> ``Features`` -> map entries -> ``Feature`` -> value lists):
:func:`scan_fields` reads the i-th field of every message of a level in one
step (NumPy gathers; the varints through :func:`.wire.read_varints`), so the
Python work grows with the number of fields in one message, not with the
number of records. Requested keys are matched by comparing key bytes as
arrays; then

* a ``bytes_list`` value becomes a Python ``bytes`` (one slice of the joined
  buffer per value);
* a ``float_list`` is its payload bytes, joined and viewed as little-endian
  float32;
* an ``int64_list`` is its payload bytes, joined and decoded as varints in one
  pass (continuation bits -> value boundaries -> shifted 7-bit groups summed);

and the values of each feature are split by record with per-record counts.
Unrequested features' values are not looked at (as TensorFlow's parser).

Whatever this module does not decode exactly as protobuf does -- a repeated
``features`` field or map-entry field (protobuf merges them), a key requested
twice in one record (the last wins), unknown fields, a ``Feature`` with two
kinds, a malformed record, a kind or count the request rejects, a missing
required feature -- makes :func:`parse_batch` return None, and the caller
parses record by record with protobuf, which gives the same results and raises
the errors with their messages.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tpustrategy._src.data.parsing.wire import VARINT_PAD, WireError, read_varint, read_varints

_PAD = bytes(max(VARINT_PAD, 160))  # after the data: reads never leave the buffer
_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype(np.float32)
_STRING = np.dtype(object)
_KIND = {_STRING: 1, _FLOAT32: 2, _INT64: 3}  # Feature's field numbers: bytes/float/int64 list
_LIST_WIRE_TYPES = {1: (2,), 2: (2, 5), 3: (0, 2)}  # packed, or one value per field
_LE_F32 = np.dtype("<f4")
_EMPTY = np.zeros(0, dtype=np.int64)

#: Batches smaller than this are walked record by record (the NumPy steps of the
#: all-at-once walk cost more than they save for a few records).
MIN_BATCH = 8
#: Records longer than this on average are walked record by record: joining
#: them into one buffer would copy more bytes than the walk costs.
LARGE_RECORD = 16384


class _Bail(Exception):
    """The batch needs protobuf's record-by-record parse."""


class Fields(NamedTuple):
    """Fields of a set of messages, ordered by message, then position."""

    msg: np.ndarray  # index of the message holding the field
    num: np.ndarray  # field number
    wt: np.ndarray  # wire type
    vs: np.ndarray  # value start (the payload of a length-delimited field)
    ve: np.ndarray  # value end


def scan_fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Fields:
    """Every field of the messages ``buf[starts[i]:ends[i]]``, read for all messages at once.

    One step reads the next field of every message that has one. The bounds
    are checked once at the end (a field running past its message's end stops
    that message's walk; the check then rejects it).

    Raises:
      _Bail: a malformed field, a group (wire types 3/4) or field number 0.
    """
    msg = np.flatnonzero(starts < ends)
    if msg.size == starts.size:
        pos, end = starts, ends
    else:
        pos, end = starts[msg], ends[msg]
    steps = []
    rectangular = True  # every step read a field of every message
    while msg.size:
        tag = buf[pos]
        if ((tag & 0x87) != 2).any():  # not all one-byte tags of length-delimited fields
            tag, vs, ve = _any_field(buf, pos, end)
        else:
            tag = tag.astype(np.uint64)
            length, vs = read_varints(buf, pos + 1)
            ve = vs + length.astype(np.int64)
        steps.append((msg, tag, vs, ve, end))
        more = ve < end
        if more.all():
            pos = ve
            continue
        if not more.any():
            break
        rectangular = False
        msg, pos, end = msg[more], ve[more], end[more]
    if not steps:
        return Fields(_EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY)
    if len(steps) == 1:
        msg, tag, vs, ve, end = steps[0]
    elif rectangular:
        msg, tag, vs, ve, end = (np.stack(c, axis=1).reshape(-1) for c in zip(*steps))
    else:
        msg, tag, vs, ve, end = (np.concatenate(c) for c in zip(*steps))
        order = np.argsort(msg, kind="stable")
        msg, tag, vs, ve, end = msg[order], tag[order], vs[order], ve[order], end[order]
    if (ve > end).any() or (ve < vs).any():
        raise _Bail  # a field runs past its message, or an absurd length
    num = (tag >> np.uint64(3)).astype(np.int64)
    if (num == 0).any():
        raise _Bail
    return Fields(msg, num, (tag & np.uint64(7)).astype(np.int64), vs, ve)


def _any_field(buf: np.ndarray, pos: np.ndarray,
               end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One field per message, of any wire type but groups: (tag, value start, value end)."""
    tag, after = read_varints(buf, pos)
    wt = tag & np.uint64(7)
    is2, is0, is1, is5 = wt == 2, wt == 0, wt == 1, wt == 5
    if not (is2 | is0 | is1 | is5).all() or (after > end).any():
        raise _Bail
    vs, ve = after.copy(), np.empty_like(after)
    if is2.any():
        length, vs2 = read_varints(buf, after[is2])
        vs[is2] = vs2
        ve[is2] = vs2 + length.astype(np.int64)
    if is0.any():
        ve[is0] = read_varints(buf, after[is0])[1]
    ve[is1] = after[is1] + 8
    ve[is5] = after[is5] + 4
    return tag, vs, ve


def _canonical_entries(buf: np.ndarray, es: np.ndarray,
                       ee: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """Key and value spans of map entries written as ``0A klen key 12 vlen value``, or None.

    This is how protobuf serializes a map entry; checking that every entry has
    this form costs a few array operations, against a general walk of two
    fields per entry (:func:`scan_fields`).
    """
    if not es.size:
        return None
    klen = buf[es + 1].astype(np.int64)
    ks = es + 2
    ke = ks + klen
    ok = (buf[es] == 0x0A) & (klen < 0x80) & (ke < ee)
    if not ok.all() or (buf[ke] != 0x12).any():
        return None
    vlen, vs = read_varints(buf, ke + 1)
    ve = vs + vlen.astype(np.int64)
    if (ve != ee).any():
        return None
    return ks, ke, vs, ve


def _split_one(n: int, fields: Fields, number: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) per message of its only field ``number``; bails on repeats or other fields."""
    if (fields.wt != 2).any() or (fields.num != number).any():
        raise _Bail
    if fields.msg.size > 1 and (np.diff(fields.msg) == 0).any():
        raise _Bail
    return fields.vs, fields.ve


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] + 0 .. lengths[i] - 1`` for all i, concatenated."""
    total = int(lengths.sum())
    shift = starts - (np.cumsum(lengths) - lengths)
    return np.arange(total, dtype=np.int64) + np.repeat(shift, lengths)


def _join(joined: bytes, vs: np.ndarray, ve: np.ndarray) -> np.ndarray:
    """The bytes of all the spans, joined, as uint8."""
    view = memoryview(joined)
    return np.frombuffer(b"".join([view[s:e] for s, e in zip(vs.tolist(), ve.tolist())]), np.uint8)


def _object_array(values: list[bytes]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _decode_varints(data: np.ndarray, seg_len: np.ndarray, seg_rec: np.ndarray,
                    n: int) -> tuple[np.ndarray, np.ndarray]:
    """Values (int64) of the packed varints in ``data`` and their count per record."""
    if not data.size:
        return np.zeros(0, np.int64), np.zeros(n, np.int64)
    if not (data & 0x80).any():
        return data.astype(np.int64), np.bincount(seg_rec, weights=seg_len, minlength=n).astype(np.int64)
    term = data < 0x80
    nonempty = seg_len > 0
    if not term[np.cumsum(seg_len)[nonempty] - 1].all():
        raise _Bail  # a segment ends inside a varint
    last = np.flatnonzero(term)
    first = np.empty_like(last)
    first[0] = 0
    first[1:] = last[:-1] + 1
    widths = last - first + 1
    if widths.max() > 10:
        raise _Bail
    within = np.arange(data.size, dtype=np.int64) - np.repeat(first, widths)
    parts = (data & 0x7F).astype(np.uint64) << (7 * within).astype(np.uint64)
    values = np.add.reduceat(parts, first).view(np.int64)
    value_rec = np.repeat(seg_rec, seg_len)[last]
    return values, np.bincount(value_rec, minlength=n).astype(np.int64)


def parse_batch(batch: list[bytes], specs: dict[str, Any]) -> dict[str, Any] | None:
    """Parses ``batch`` (serialized Examples) for ``specs``, or returns None (see module doc).

    A batch of a few records, or of large records (where copying them into one
    buffer would cost more than walking each in Python), is walked record by
    record (:func:`_parse_each`); any other batch all at once (:func:`_parse_joined`).

    Args:
      batch: serialized Examples (``bytes``).
      specs: name -> FixedLenFeature/VarLenFeature (dtypes already canonical).

    Returns:
      The dict ``parse_example`` returns, or None.
    """
    n = len(batch)
    if not n:
        return None
    try:
        if n < MIN_BATCH or sum(map(len, batch)) > LARGE_RECORD * n:
            return _parse_each(batch, specs, n)
        return _parse_joined(batch, specs, n)
    except (_Bail, WireError, IndexError, UnicodeDecodeError):
        return None


def _parse_each(batch: list[bytes], specs: dict[str, Any], n: int) -> dict[str, Any]:
    """The record-by-record walk: Python over each record's fields, NumPy per feature."""
    index = {key.encode("utf-8"): j for j, key in enumerate(specs)}
    kinds = [_KIND[spec.dtype] for spec in specs.values()]
    pieces: list[list[bytes]] = [[] for _ in kinds]
    piece_rec: list[list[int]] = [[] for _ in kinds]
    present: list[list[int]] = [[] for _ in kinds]
    for r, rec in enumerate(batch):
        end = len(rec)
        if not end:
            continue
        if rec[0] != 0x0A:
            raise _Bail
        length, i = _varint(rec, 1)
        if i + length != end:
            raise _Bail  # another field after `features`, or a bad length
        seen = 0
        while i < end:
            if rec[i] != 0x0A:
                raise _Bail
            length, es = _varint(rec, i + 1)
            i = es + length
            klen = rec[es + 1] if es + 1 < i else 0x80
            ke = es + 2 + klen
            if i > end or rec[es] != 0x0A or klen >= 0x80 or ke >= i or rec[ke] != 0x12:
                raise _Bail  # not a canonical map entry
            key = rec[es + 2 : ke]
            if not key.isascii():
                key.decode("utf-8")  # protobuf rejects a key that is not UTF-8
            length, vs = _varint(rec, ke + 1)
            if vs + length != i:
                raise _Bail
            j = index.get(key)
            if j is None:
                continue
            if seen >> j & 1:
                raise _Bail  # the key twice: protobuf keeps the last
            seen |= 1 << j
            if vs == i:
                continue  # a Feature with no kind: missing
            kind = rec[vs] >> 3
            length, ls = _varint(rec, vs + 1)
            if rec[vs] & 7 != 2 or ls + length != i:
                raise _Bail
            if kind != kinds[j]:
                raise _Bail  # a kind mismatch (or an unknown field): protobuf's path
            present[j].append(r)
            while ls < i:  # the list's fields: each bytes value, or one packed run
                if rec[ls] != 0x0A:
                    raise _Bail  # unpacked numbers or unknown fields
                length, vs = _varint(rec, ls + 1)
                ls = vs + length
                if ls > i:
                    raise _Bail
                pieces[j].append(rec[vs:ls])
                piece_rec[j].append(r)
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


def _varint(rec: bytes, i: int) -> tuple[int, int]:
    """``wire.read_varint`` with the one-byte case inline; bails past the record's end."""
    if i >= len(rec):
        raise _Bail
    byte = rec[i]
    if byte < 0x80:
        return byte, i + 1
    return read_varint(rec, i)


def _parse_joined(batch: list[bytes], specs: dict[str, Any], n: int) -> dict[str, Any]:
    """The all-at-once walk over the joined records."""
    joined = b"".join([*batch, _PAD])
    buf = np.frombuffer(joined, np.uint8)
    lens = np.fromiter(map(len, batch), np.int64, n)
    rec_end = np.cumsum(lens)
    # Example: at most one `features` field (several would be merged).
    top = scan_fields(buf, rec_end - lens, rec_end)
    fs, fe = _split_one(n, top, 1)
    # Features: map entries (field 1), each {1: key, 2: value}.
    entries = scan_fields(buf, fs, fe)
    if (entries.wt != 2).any() or (entries.num != 1).any():
        raise _Bail
    entry_rec = top.msg[entries.msg]
    canonical = _canonical_entries(buf, entries.vs, entries.ve)
    if canonical is not None:
        key_s, key_e, value_s, value_e = canonical
    else:
        key_s, key_e, value_s, value_e = _general_entries(buf, entries.vs, entries.ve)
    key_len = key_e - key_s
    if key_len.size and (buf[_ranges(key_s, key_len)] >= 0x80).any():
        _check_utf8_keys(joined, key_s, key_e)

    # Match the requested keys; one (record, Feature span) list per key.
    found = []
    for key in specs:
        name = np.frombuffer(key.encode("utf-8"), np.uint8)
        cand = np.flatnonzero(key_len == name.size)
        if name.size and cand.size:
            same = buf[key_s[cand][:, None] + np.arange(name.size)] == name
            cand = cand[same.all(axis=1)]
        rec = entry_rec[cand]
        if rec.size > 1 and (np.diff(rec) == 0).any():
            raise _Bail  # the key twice in one record: the last wins in protobuf
        found.append((rec, value_s[cand], value_e[cand]))
    bounds = np.cumsum([0] + [f[0].size for f in found])
    # Feature messages: one kind field (1 bytes_list, 2 float_list, 3 int64_list) or none.
    feat = scan_fields(buf, np.concatenate([f[1] for f in found]), np.concatenate([f[2] for f in found]))
    if (feat.wt != 2).any() or ((feat.num < 1) | (feat.num > 3)).any():
        raise _Bail
    if feat.msg.size > 1 and (np.diff(feat.msg) == 0).any():
        raise _Bail
    kind = np.zeros(bounds[-1], np.int64)
    kind[feat.msg] = feat.num
    list_s = np.zeros(bounds[-1], np.int64)
    list_e = np.zeros(bounds[-1], np.int64)
    list_s[feat.msg], list_e[feat.msg] = feat.vs, feat.ve
    # The value lists of every requested feature at once.
    lists = scan_fields(buf, list_s, list_e)
    if (lists.num != 1).any():
        raise _Bail
    cuts = np.searchsorted(lists.msg, bounds)

    out: dict[str, Any] = {}
    for j, (key, spec) in enumerate(specs.items()):
        want = _KIND[spec.dtype]
        lo, hi = bounds[j], bounds[j + 1]
        k = kind[lo:hi]
        if ((k != 0) & (k != want)).any():
            raise _Bail  # a kind mismatch: protobuf's path raises it
        rec = found[j][0]
        present = rec[k == want] if (k == 0).any() else rec
        # Fields of this feature's lists, and the record of each.
        a, b = cuts[j], cuts[j + 1]
        wt, vs, ve = lists.wt[a:b], lists.vs[a:b], lists.ve[a:b]
        seg_rec = rec[lists.msg[a:b] - lo]
        allowed = _LIST_WIRE_TYPES[want]
        if len(allowed) == 1:
            if (wt != allowed[0]).any():
                raise _Bail
        elif ((wt != allowed[0]) & (wt != allowed[1])).any():
            raise _Bail
        if want == 1:
            values: Any = _object_array([joined[s:e] for s, e in zip(vs.tolist(), ve.tolist())])
            counts = np.bincount(seg_rec, minlength=n).astype(np.int64)
        elif want == 2:
            seg_len = ve - vs
            if (seg_len % 4).any():
                raise _Bail
            values = _join(joined, vs, ve).view(_LE_F32).astype(np.float32)
            counts = np.bincount(seg_rec, weights=seg_len // 4, minlength=n).astype(np.int64)
        else:
            values, counts = _decode_varints(_join(joined, vs, ve), ve - vs, seg_rec, n)
        out[key] = _assemble(spec, values, counts, present, n)
    return out


def _general_entries(buf: np.ndarray, es: np.ndarray, ee: np.ndarray) -> tuple[np.ndarray, ...]:
    """Key and value spans of map entries of any field order; a missing value is empty."""
    count = es.size
    kv = scan_fields(buf, es, ee)
    if (kv.wt != 2).any():
        raise _Bail
    is_key, is_value = kv.num == 1, kv.num == 2
    if not (is_key | is_value).all():
        raise _Bail
    if (np.bincount(kv.msg[is_key], minlength=count) != 1).any():
        raise _Bail  # a missing key ("") or a repeated one: protobuf's rules
    if is_value.sum() and np.bincount(kv.msg[is_value], minlength=count).max() > 1:
        raise _Bail
    value_s = np.zeros(count, np.int64)
    value_e = np.zeros(count, np.int64)
    value_s[kv.msg[is_value]] = kv.vs[is_value]
    value_e[kv.msg[is_value]] = kv.ve[is_value]
    return kv.vs[is_key], kv.ve[is_key], value_s, value_e


def _check_utf8_keys(joined: bytes, key_s: np.ndarray, key_e: np.ndarray) -> None:
    """Protobuf rejects a map key that is not UTF-8 (a proto3 string); so does this parse."""
    try:
        for s, e in zip(key_s.tolist(), key_e.tolist()):
            joined[s:e].decode("utf-8")
    except UnicodeDecodeError:
        raise _Bail from None


def _assemble(spec: Any, values: np.ndarray, counts: np.ndarray, present: np.ndarray,
              n: int) -> Any:
    shape = getattr(spec, "shape", None)
    if shape is None:  # VarLenFeature
        return values, counts
    size = int(np.prod(shape))
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
