"""Fast parsing of serialized ``tf.train.Example`` records, without protobuf.

:func:`parse_batch` takes one of three ways, all giving exactly what the
record-by-record protobuf parse (``example._parse_records``) gives:

* **Layout templates** (most batches): the records are joined into one byte
  buffer; the first record is walked in Python (:func:`_layout`) to learn
  which of its bytes are structure (tags, lengths, keys) and where the
  requested values lie. Every record of its length whose structure bytes are
  the same (one gather and compare for the batch; for int64 values, also the
  same varint widths) has its values at the same offsets: bytes values are
  sliced, numbers gathered as one ``(records, bytes)`` block. Records of
  another layout (a label needing a second varint byte, say) get the next
  template. Layouts are cached by record length across batches.
* **The field walk** (batches of many layouts, such as VarLen lists): the
  wire format is walked for all records at once, one nesting level at a time
  (``Example`` -> ``Features`` -> map entries -> ``Feature`` -> value lists);
  each step reads the next field of every message with NumPy gathers (varints
  through :mod:`.wire`), so the Python work grows with the number of fields
  in one message, not with the number of records. Requested keys are matched
  as integers (keys up to 8 bytes) or byte rows.
* **Record by record in Python** (a batch of fewer than ``MIN_BATCH`` records,
  or of records over ``LARGE_RECORD`` bytes, which would cost more to join
  than to walk): :func:`_walk_record`.

Bytes values come out as Python ``bytes``; float lists as their payload bytes
viewed as little-endian float32; int64 lists decoded by
:func:`.wire.read_packed_varints`. The values of unrequested features are not
looked at (as in TensorFlow's parser).

Whatever these ways do not decode exactly as protobuf does -- a repeated
``features`` field or map-entry field (protobuf merges them), a key twice in
one record (the last wins), unknown fields, unpacked number lists (on the
template and record ways), a ``Feature`` with two kinds, a malformed record, a
kind or count the request rejects, a missing required feature -- makes
:func:`parse_batch` return None, and the caller parses record by record with
protobuf, which gives the same results and raises the errors with their
messages.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from tpustrategy._src.data.parsing._example_layout import _decode_varints as _decode_fixed_varints
from tpustrategy._src.data.parsing.example_proto import BytesList
from tpustrategy._src.data.parsing.wire import (
    VARINT_PAD,
    WireError,
    read_packed_varints,
    read_varint,
    read_varints,
)

_PAD = bytes(max(VARINT_PAD, 160))  # after the data: reads never leave the buffer
_INT64 = np.dtype(np.int64)
_FLOAT32 = np.dtype(np.float32)
_STRING = np.dtype(object)
_KIND = {_STRING: 1, _FLOAT32: 2, _INT64: 3}  # Feature's field numbers: bytes/float/int64 list
_LIST_WIRE_TYPES = {1: (2,), 2: (2, 5), 3: (0, 2)}  # packed, or one value per field
_LE_F32 = np.dtype("<f4")
_WIDTH_MASK = np.array([(1 << (8 * w)) - 1 for w in range(9)], dtype=np.uint64)  # low w bytes
_NO_KEY = np.uint64(2**64 - 1)  # not the code of any key of at most 8 bytes and its length
_EMPTY = np.zeros(0, dtype=np.int64)

#: Batches smaller than this are walked record by record (the NumPy steps of the
#: all-at-once walk cost more than they save for a few records).
MIN_BATCH = 8
#: Records longer than this on average are walked record by record: joining
#: them into one buffer would copy more bytes than the walk costs.
LARGE_RECORD = 16384


class _Bail(Exception):
    """The batch needs protobuf's record-by-record parse."""


# What the walks raise on a batch they leave to protobuf (a malformed record's
# varint, a read past a record's end, a key that is not UTF-8, or _Bail).
_STEP_ASIDE = (_Bail, WireError, IndexError, UnicodeDecodeError)


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
    general = False  # some tag is not a one-byte tag of a length-delimited field
    while msg.size:
        tag = buf[pos]
        if general:
            tag, vs, ve = _any_field(buf, pos, end)
        else:
            length, vs = read_varints(buf, pos + 1)
            ve = vs + length.astype(np.int64)
            if ((tag & 0x87) != 2).any():
                general = True  # read this step again, field by field
                continue
        steps.append((msg, tag, vs, ve, end))
        more = ve < end
        left = np.count_nonzero(more)
        if left == more.size:
            pos = ve
            continue
        if not left:
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
    tag = tag.astype(np.uint64, copy=False)
    num = (tag >> np.uint64(3)).astype(np.int64)
    if (num == 0).any():
        raise _Bail
    return Fields(msg, num, (tag & np.uint64(7)).astype(np.int64), vs, ve)


def _repeated_field(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                    max_steps: int | None = None) -> tuple[np.ndarray, ...] | None:
    """For messages made only of field 1, length-delimited (tag ``0x0A``): (msg, vs, ve).

    The shape of ``Features`` (map entries) and ``BytesList`` (values): the
    same walk as :func:`scan_fields` with the checks done once at the end.
    Returns None if some field is another one (then :func:`scan_fields` reads them),
    and ``TOO_MANY_STEPS`` if a message has more than ``max_steps`` fields.
    """
    fields = _walk_repeated(buf, starts, ends, True, max_steps)
    if fields is _LONG_LENGTH:
        fields = _walk_repeated(buf, starts, ends, False, max_steps)
    return fields


# _walk_repeated's answer when a length needs more than one byte, and _repeated_field's
# when the walk would take too many steps (distinct objects, compared by identity).
_LONG_LENGTH: tuple[np.ndarray, ...] = (np.zeros(0, np.int64),)
TOO_MANY_STEPS: tuple[np.ndarray, ...] = (np.zeros(0, np.int64),)


def _walk_repeated(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                   one_byte_lengths: bool, max_steps: int | None) -> tuple[np.ndarray, ...] | None:
    """:func:`_repeated_field`'s walk; with ``one_byte_lengths`` it reads every length as
    one byte (short fields, the usual case, in fewer steps) and returns ``_LONG_LENGTH``
    at the first that is not."""
    msg = np.flatnonzero(starts < ends)
    pos, end = (starts, ends) if msg.size == starts.size else (starts[msg], ends[msg])
    steps: list[tuple[np.ndarray, ...]] = []
    while msg.size:
        if max_steps is not None and len(steps) == max_steps:
            return TOO_MANY_STEPS
        if one_byte_lengths:
            length = buf[pos + 1]
            if (length & 0x80).any():
                return _LONG_LENGTH
            vs = pos + 2
            ve = vs + length
        else:
            length, vs = read_varints(buf, pos + 1)
            ve = vs + length.astype(np.int64)
        steps.append((msg, pos, vs, ve, end))
        more = ve < end
        left = np.count_nonzero(more)
        if left == more.size:
            pos = ve
            continue
        if not left:
            break
        at = np.flatnonzero(more)
        msg, pos, end = msg[at], ve[at], end[at]
    if not steps:
        return _EMPTY, _EMPTY, _EMPTY
    if len(steps) == 1:
        msg, pos, vs, ve, end = steps[0]
    else:
        msg, pos, vs, ve, end = (np.concatenate(c) for c in zip(*steps))
    if (buf[pos] != 0x0A).any():
        return None
    if (ve > end).any() or (ve < vs).any():
        raise _Bail  # a field runs past its message, or an absurd length
    if len(steps) > 1:
        order = np.argsort(msg, kind="stable")
        msg, vs, ve = msg[order], vs[order], ve[order]
    return msg, vs, ve


def _single_fields(buf: np.ndarray, starts: np.ndarray,
                   ends: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """For messages that each hold one length-delimited field (or none): (msg, tag, vs, ve).

    Returns None unless every non-empty message is exactly one such field with
    a one-byte tag -- the usual shape of an ``Example`` (one ``features``), a
    ``Feature`` (one kind) and a numeric list (one packed run). Checking that
    costs fewer steps than :func:`scan_fields`.
    """
    msg = np.flatnonzero(starts < ends)
    pos, end = (starts, ends) if msg.size == starts.size else (starts[msg], ends[msg])
    tag = buf[pos]
    if ((tag & 0x87) != 2).any():
        return None
    length, vs = read_varints(buf, pos + 1)
    ve = vs + length.astype(np.int64)
    if (ve != end).any():
        return None
    return msg, tag, vs, ve


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
    klen, ks = read_varints(buf, es + 1)
    ke = ks + klen.astype(np.int64)
    ok = (buf[es] == 0x0A) & (ke < ee) & (ke >= ks)
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
    if fields.msg.size > 1 and (fields.msg[1:] == fields.msg[:-1]).any():
        raise _Bail
    return fields.vs, fields.ve


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] + 0 .. lengths[i] - 1`` for all i, concatenated."""
    total = int(lengths.sum())
    shift = starts - (np.cumsum(lengths) - lengths)
    out: np.ndarray = np.arange(total, dtype=np.int64) + np.repeat(shift, lengths)
    return out


def _join(joined: bytes, buf: np.ndarray, vs: np.ndarray, ve: np.ndarray) -> np.ndarray:
    """The bytes of all the spans, joined, as uint8."""
    lengths = ve - vs
    if lengths.size and lengths.sum() > 64 * lengths.size:  # long spans: copy each at once
        view = memoryview(joined)
        return np.frombuffer(b"".join([view[s:e] for s, e in zip(vs.tolist(), ve.tolist())]), np.uint8)
    out: np.ndarray = buf[_ranges(vs, lengths)]
    return out


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
    except _STEP_ASIDE:
        return None


def _walk_record(rec: bytes, index: dict[bytes, int], kinds: list[int]) -> list[Any]:
    """Per requested feature of one record: None (missing) or the list of its field payloads
    (each bytes value, or each packed run of numbers), found by a Python walk."""
    found: list[Any] = [None] * len(kinds)
    end = len(rec)
    if not end:
        return found
    if rec[0] != 0x0A:
        raise _Bail
    length, i = _varint(rec, 1)
    if i + length != end:
        raise _Bail  # another field after `features`, or a bad length
    while i < end:
        if rec[i] != 0x0A:
            raise _Bail
        length, es = _varint(rec, i + 1)
        i = es + length
        if i > end or rec[es] != 0x0A:
            raise _Bail
        klen, ks = _varint(rec, es + 1)
        ke = ks + klen
        if ke >= i or rec[ke] != 0x12:
            raise _Bail  # not a canonical map entry
        key = rec[ks:ke]
        if not key.isascii():
            key.decode("utf-8")  # protobuf rejects a key that is not UTF-8
        length, vs = _varint(rec, ke + 1)
        if vs + length != i:
            raise _Bail
        j = index.get(key)
        if j is None:
            continue
        if found[j] is not None:
            raise _Bail  # the key twice: protobuf keeps the last
        pieces: list[bytes] = []
        found[j] = pieces
        if vs == i:
            found[j] = _NO_KIND  # a Feature with no kind: missing
            continue
        kind = rec[vs] >> 3
        length, ls = _varint(rec, vs + 1)
        if rec[vs] & 7 != 2 or ls + length != i:
            raise _Bail
        if kind != kinds[j]:
            raise _Bail  # a kind mismatch (or an unknown field): protobuf's path
        while ls < i:  # the list's fields: each bytes value, or one packed run
            if rec[ls] != 0x0A:
                raise _Bail  # unpacked numbers or unknown fields
            length, vs = _varint(rec, ls + 1)
            ls = vs + length
            if ls > i:
                raise _Bail
            pieces.append(rec[vs:ls])
    return [None if f is _NO_KIND else f for f in found]


_NO_KIND: list[bytes] = []  # a placeholder: the key was seen, its Feature has no kind


def _parse_each(batch: list[bytes], specs: dict[str, Any], n: int) -> dict[str, Any]:
    """The record-by-record walk: Python over each record's fields, NumPy per feature."""
    index = {key.encode("utf-8"): j for j, key in enumerate(specs)}
    kinds = [_KIND[spec.dtype] for spec in specs.values()]
    if n == 1:
        return _parse_one(batch[0], specs, index, kinds)
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


def _parse_one(rec: bytes, specs: dict[str, Any], index: dict[bytes, int],
               kinds: list[int]) -> dict[str, Any]:
    """One record (a batch of one), with as few array steps as possible."""
    out: dict[str, Any] = {}
    for (key, spec), kind, got in zip(specs.items(), kinds, _walk_record(rec, index, kinds)):
        shape = getattr(spec, "shape", None)
        if got is None:
            if shape is None:
                out[key] = (_object_array([]) if kind == 1 else np.zeros(0, spec.dtype),
                            np.zeros(1, np.int64))
                continue
            if spec._default is None:
                raise _Bail  # a missing required feature: protobuf's path raises it
            out[key] = spec._default.reshape((1, *shape)).copy()
            continue
        if kind == 1:
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
            out[key] = (values, np.array([values.size], np.int64))
        elif values.size != math.prod(shape):
            raise _Bail  # a wrong count: protobuf's path raises it
        else:
            out[key] = values.reshape((1, *shape))
    return out


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


def _parse_joined(batch: list[bytes], specs: dict[str, Any], n: int) -> dict[str, Any]:
    """The all-at-once walk over the joined records (by layout templates if they fit)."""
    joined = b"".join([*batch, _PAD])
    buf = np.frombuffer(joined, np.uint8)
    lens = np.fromiter(map(len, batch), np.int64, n)
    rec_end = np.cumsum(lens)
    by_template = _parse_by_templates(batch, specs, n, joined, buf, lens, rec_end - lens)
    if by_template is not None:
        return by_template
    # Example: at most one `features` field (several would be merged).
    starts = rec_end - lens
    top = _single_fields(buf, starts, rec_end)
    if top is not None and (top[1] == 0x0A).all():
        top_rec, _, fs, fe = top
    else:
        general = scan_fields(buf, starts, rec_end)
        fs, fe = _split_one(n, general, 1)
        top_rec = general.msg
    # Features: map entries (field 1), each {1: key, 2: value}.
    entries = _repeated_field(buf, fs, fe)
    if entries is None:
        general = scan_fields(buf, fs, fe)
        if (general.wt != 2).any() or (general.num != 1).any():
            raise _Bail
        entries = general.msg, general.vs, general.ve
    entry_msg, entry_s, entry_e = entries
    entry_rec = top_rec[entry_msg]
    canonical = _canonical_entries(buf, entry_s, entry_e)
    if canonical is not None:
        key_s, key_e, value_s, value_e = canonical
    else:
        key_s, key_e, value_s, value_e = _general_entries(buf, entry_s, entry_e)
    key_len = key_e - key_s
    if key_len.size and (buf[_ranges(key_s, key_len)] >= 0x80).any():
        _check_utf8_keys(joined, key_s, key_e)

    # Match the requested keys; one (record, Feature span) list per key.
    names = [key.encode("utf-8") for key in specs]
    short = max(map(len, names)) <= 8
    if short:  # every requested key fits in 8 bytes: compare keys as integers
        words = np.ndarray((buf.size - 8, 8), np.uint8, buf, strides=(1, 1))[key_s].view("<u8")
        codes = words.reshape(-1) & _WIDTH_MASK[np.minimum(key_len, 8)]
        codes[key_len > 8] = _NO_KEY
    found = []
    for name in names:
        if short:
            code = np.uint64(int.from_bytes(name, "little"))
            cand = np.flatnonzero((codes == code) & (key_len == len(name)))
        else:
            cand = np.flatnonzero(key_len == len(name))
            if name and cand.size:
                same = buf[key_s[cand][:, None] + np.arange(len(name))] == np.frombuffer(name, np.uint8)
                cand = cand[same.all(axis=1)]
        rec = entry_rec[cand]
        if rec.size > 1 and (rec[1:] == rec[:-1]).any():
            raise _Bail  # the key twice in one record: the last wins in protobuf
        found.append((rec, value_s[cand], value_e[cand]))
    bounds = np.cumsum([0] + [f[0].size for f in found])
    # Feature messages: one kind field (1 bytes_list, 2 float_list, 3 int64_list) or none.
    feat_s = np.concatenate([f[1] for f in found])
    feat_e = np.concatenate([f[2] for f in found])
    one = _single_fields(buf, feat_s, feat_e)
    if one is not None:
        feat_msg, tag, list_vs, list_ve = one
        if ((tag != 0x0A) & (tag != 0x12) & (tag != 0x1A)).any():
            raise _Bail
        feat_num = tag.astype(np.int64) >> 3
    else:
        feat = scan_fields(buf, feat_s, feat_e)
        if (feat.wt != 2).any() or ((feat.num < 1) | (feat.num > 3)).any():
            raise _Bail
        if feat.msg.size > 1 and (feat.msg[1:] == feat.msg[:-1]).any():
            raise _Bail  # two kinds: protobuf keeps the last
        feat_msg, feat_num, list_vs, list_ve = feat.msg, feat.num, feat.vs, feat.ve
    kind = np.zeros(bounds[-1], np.int64)
    kind[feat_msg] = feat_num
    list_s = np.zeros(bounds[-1], np.int64)
    list_e = np.zeros(bounds[-1], np.int64)
    list_s[feat_msg], list_e[feat_msg] = list_vs, list_ve

    out: dict[str, Any] = {}
    for j, (key, spec) in enumerate(specs.items()):
        want = _KIND[spec.dtype]
        lo, hi = bounds[j], bounds[j + 1]
        k = kind[lo:hi]
        rec = found[j][0]
        ls, le = list_s[lo:hi], list_e[lo:hi]
        if not (k == want).all():
            if ((k != 0) & (k != want)).any():
                raise _Bail  # a kind mismatch: protobuf's path raises it
            has = k == want
            rec, ls, le = rec[has], ls[has], le[has]
        present = rec
        # The fields of this feature's lists: usually one each (a bytes value or a packed run).
        one = _single_fields(buf, ls, le)
        if one is not None and (one[1] == 0x0A).all():
            seg_msg, _, vs, ve = one
        elif want == 1 and (fields := _repeated_field(buf, ls, le, 4)) is not None:
            if fields is TOO_MANY_STEPS:  # long lists: protobuf's C parser per list is quicker
                strings, counts = _bytes_lists(joined, ls, le, rec, n)
                out[key] = _assemble(spec, strings, counts, present, n)
                continue
            seg_msg, vs, ve = fields
        else:
            lists = scan_fields(buf, ls, le)
            allowed = _LIST_WIRE_TYPES[want]
            if (lists.num != 1).any() or not np.isin(lists.wt, allowed).all():
                raise _Bail
            seg_msg, vs, ve = lists.msg, lists.vs, lists.ve
        seg_rec = rec[seg_msg]
        if want == 1:
            values: Any = _object_array([joined[s:e] for s, e in zip(vs.tolist(), ve.tolist())])
            counts = np.bincount(seg_rec, minlength=n)
        elif want == 2:
            seg_len = ve - vs
            if (seg_len & 3).any():
                raise _Bail
            values = _join(joined, buf, vs, ve).view(_LE_F32).astype(np.float32)
            counts = np.bincount(seg_rec, weights=seg_len >> 2, minlength=n).astype(np.int64)
        else:
            values, counts = _decode_varints(_join(joined, buf, vs, ve), ve - vs, seg_rec, n)
        out[key] = _assemble(spec, values, counts.astype(np.int64, copy=False), present, n)
    return out


#: At most this many layouts are tried per batch, each taking at least this
#: share of the records left (else the batch is walked field by field).
MAX_TEMPLATES = 4
MIN_TEMPLATE_SHARE = 0.25


def _parse_by_templates(batch: list[bytes], specs: dict[str, Any], n: int, joined: bytes,
                        buf: np.ndarray, lens: np.ndarray,
                        starts: np.ndarray) -> dict[str, Any] | None:
    """Parses the batch as a few groups of records that each share one byte layout, or None.

    The first record not yet parsed is walked in Python (:func:`_layout`): where
    its requested values lie, and which bytes are structure (tags, lengths,
    keys) rather than values. The records of its length whose structure bytes
    are the same -- and, for int64 values, whose varints have the same widths --
    have their values at the same offsets; they are read for all those records
    at once. Records of other layouts wait for the next template.
    """
    kinds = [_KIND[spec.dtype] for spec in specs.values()]
    request = tuple(zip(specs, kinds))
    left = np.arange(n)
    groups: list[tuple[np.ndarray, list[Any]]] = []
    while left.size:
        if len(groups) == MAX_TEMPLATES:
            return None
        first = int(left[0])
        same = left[lens[left] == lens[first]]
        if same.size < MIN_TEMPLATE_SHARE * left.size:
            return None
        cache_key = (request, int(lens[first]))
        template = _TEMPLATES.get(cache_key)
        rows = None
        if template is not None:
            rows = _matching(buf, starts, same, template[0])
            if not rows.size or rows[0] != first:
                rows = None  # the cached layout is not this record's: walk it
        if rows is None:
            index = {key.encode("utf-8"): j for j, key in enumerate(specs)}
            template = _layout(batch[first], index, kinds)
            if len(_TEMPLATES) >= _MAX_CACHED:
                _TEMPLATES.clear()
            _TEMPLATES[cache_key] = template
            rows = _matching(buf, starts, same, template[0])
        assert template is not None
        groups.append((rows, _read_group(joined, buf, starts[rows], template[1], kinds)))
        if rows.size == left.size:
            break
        done = np.zeros(n, dtype=bool)
        done[rows] = True
        left = left[~done[left]]
    out: dict[str, Any] = {}
    for j, (key, spec) in enumerate(specs.items()):
        parts = [(rows, got[j]) for rows, got in groups]
        out[key] = _merge(spec, parts, n)
    return out


# Layouts seen before, by (requested keys and kinds, record length): a batch
# usually has the layout of the one before it. A cached layout is only used
# for records whose structure bytes it matches, so any layout may be tried.
_TEMPLATES: dict[tuple[Any, int], tuple[Any, list[Any]]] = {}
_MAX_CACHED = 64


def _matching(buf: np.ndarray, starts: np.ndarray, same: np.ndarray,
              structure: tuple[np.ndarray, ...]) -> np.ndarray:
    """The records among ``same`` (all of the layout's length) whose structure matches it."""
    cols, expect, cont_cols, cont_expect = structure
    base = starts[same]
    ok = (buf[base[:, None] + cols] == expect).all(axis=1)
    if cont_cols.size:
        ok &= ((buf[base[:, None] + cont_cols] >= 0x80) == cont_expect).all(axis=1)
    rows: np.ndarray = same[ok]
    return rows


def _layout(rec: bytes, index: dict[bytes, int],
            kinds: list[int]) -> tuple[tuple[np.ndarray, ...], list[Any]]:
    """One record's layout: its structure bytes and, per requested feature, where its values lie.

    Returns ``((cols, expect, cont_cols, cont_expect), plans)``: the positions
    and values of the structure bytes; the positions of int64 payload bytes and
    their continuation bits; per feature None (missing) or ``(spans, widths)``
    -- the value spans (one per bytes value, one per packed run) and, for
    int64, each varint's width.
    """
    end = len(rec)
    values = np.zeros(end, dtype=bool)  # bytes that are values (not compared)
    cont_cols: list[np.ndarray] = []
    plans: list[Any] = [None] * len(kinds)
    if end:
        if rec[0] != 0x0A:
            raise _Bail
        length, i = _varint(rec, 1)
        if i + length != end:
            raise _Bail
        seen = 0
        while i < end:
            if rec[i] != 0x0A:
                raise _Bail
            length, es = _varint(rec, i + 1)
            i = es + length
            if i > end or rec[es] != 0x0A:
                raise _Bail
            klen, ks = _varint(rec, es + 1)
            ke = ks + klen
            if ke >= i or rec[ke] != 0x12:
                raise _Bail
            key = rec[ks:ke]
            if not key.isascii():
                key.decode("utf-8")
            length, vs = _varint(rec, ke + 1)
            if vs + length != i:
                raise _Bail
            j = index.get(key)
            if j is None:
                values[vs:i] = True  # an unrequested feature: its contents are not looked at
                continue
            if seen >> j & 1:
                raise _Bail
            seen |= 1 << j
            if vs == i:
                continue
            length, ls = _varint(rec, vs + 1)
            if rec[vs] & 7 != 2 or ls + length != i or rec[vs] >> 3 != kinds[j]:
                raise _Bail
            spans = []
            while ls < i:
                if rec[ls] != 0x0A:
                    raise _Bail
                length, s = _varint(rec, ls + 1)
                ls = s + length
                if ls > i:
                    raise _Bail
                spans.append((s, ls))
                values[s:ls] = True
            widths = None
            if kinds[j] == 2 and any((e - s) % 4 for s, e in spans):
                raise _Bail
            if kinds[j] == 3:
                payload = np.concatenate([np.arange(s, e) for s, e in spans] or [_EMPTY])
                cont = np.frombuffer(rec, np.uint8)[payload] >= 0x80
                if cont.size and cont[-1]:
                    raise _Bail
                stops = np.flatnonzero(~cont)
                widths = np.diff(np.concatenate([[-1], stops])).tolist()
                if any(w > 10 for w in widths):
                    raise _Bail
                cont_cols.append(payload)
                for s, e in spans:  # a run must end at a varint's end
                    if e > s and rec[e - 1] >= 0x80:
                        raise _Bail
            plans[j] = (spans, widths)
    cols = np.flatnonzero(~values)
    expect = np.frombuffer(rec, np.uint8)[cols]
    cc = np.concatenate(cont_cols) if cont_cols else _EMPTY
    cont_expect = np.frombuffer(rec, np.uint8)[cc] >= 0x80 if cc.size else np.zeros(0, bool)
    return (cols, expect, cc, cont_expect), plans


def _read_group(joined: bytes, buf: np.ndarray, base: np.ndarray, plans: list[Any],
                kinds: list[int]) -> list[Any]:
    """Per feature: None (missing in the group) or (values record-major, count per record)."""
    got: list[Any] = []
    offsets = base.tolist()
    for plan, kind in zip(plans, kinds):
        if plan is None:
            got.append(None)
            continue
        spans, widths = plan
        if kind == 1:
            if len(spans) == 1:
                s, e = spans[0]
                flat = [joined[o + s : o + e] for o in offsets]
            else:
                flat = [joined[o + s : o + e] for o in offsets for s, e in spans]
            got.append((_object_array(flat), len(spans)))
            continue
        cols = np.concatenate([np.arange(s, e) for s, e in spans] or [_EMPTY])
        block = buf[base[:, None] + cols]
        if kind == 2:
            values = block.view(_LE_F32).astype(np.float32).reshape(-1)
            got.append((values, cols.size // 4))
        else:
            values = _decode_fixed_varints(block, widths).reshape(-1)
            got.append((values, len(widths)))
    return got


def _merge(spec: Any, parts: list[tuple[np.ndarray, Any]], n: int) -> Any:
    """One feature's result from its groups' values."""
    shape = getattr(spec, "shape", None)
    dtype = spec.dtype
    if shape is not None:
        size = math.prod(shape)
        for _rows, got in parts:
            if got is None and spec._default is None:
                raise _Bail  # a missing required feature: protobuf's path raises it
            if got is not None and got[1] != size:
                raise _Bail  # a wrong count: protobuf's path raises it
        if len(parts) == 1 and parts[0][1] is not None:
            return parts[0][1][0].reshape((n, *shape))
        out = np.empty((n, size), dtype=dtype)
        for rows, got in parts:
            out[rows] = spec._default.reshape(1, size) if got is None else got[0].reshape(rows.size, size)
        return out.reshape((n, *shape))
    counts = np.zeros(n, np.int64)
    pieces, piece_rows = [], []
    for rows, got in parts:
        if got is None or not got[1]:
            continue
        counts[rows] = got[1]
        pieces.append(got[0])
        piece_rows.append(np.repeat(rows, got[1]))
    if not pieces:
        return _object_array([]) if dtype == _STRING else np.zeros(0, dtype), counts
    if len(pieces) == 1:
        return pieces[0], counts
    order = np.argsort(np.concatenate(piece_rows), kind="stable")
    return np.concatenate(pieces)[order], counts


def _bytes_lists(joined: bytes, ls: np.ndarray, le: np.ndarray, rec: np.ndarray,
                 n: int) -> tuple[np.ndarray, np.ndarray]:
    """The values of BytesList messages ``joined[ls:le]`` (one per record ``rec``), parsed by
    protobuf one list at a time, and their count per record."""
    parse = BytesList.FromString
    view = memoryview(joined)
    try:
        rows = [parse(view[s:e]).value for s, e in zip(ls.tolist(), le.tolist())]
    except DecodeError:
        raise _Bail from None
    counts = np.zeros(n, np.int64)
    counts[rec] = np.fromiter(map(len, rows), np.int64, len(rows))
    return _object_array(list(itertools.chain.from_iterable(rows))), counts


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
