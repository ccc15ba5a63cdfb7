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

from typing import Any, NamedTuple

import numpy as np
from google.protobuf.message import DecodeError

from tpustrategy._src.data.parsing._batch_templates import _parse_by_templates
from tpustrategy._src.data.parsing._batch_walk import (
    _EMPTY,
    _KIND,
    _LE_F32,
    _assemble,
    _Bail,
    _decode_varints,
    _object_array,
    _parse_each,
)
from tpustrategy._src.data.parsing.example_proto import BytesList
from tpustrategy._src.data.parsing.wire import (
    VARINT_PAD,
    WireError,
    read_varints,
)

_PAD = bytes(max(VARINT_PAD, 160))  # after the data: reads never leave the buffer
_LIST_WIRE_TYPES = {1: (2,), 2: (2, 5), 3: (0, 2)}  # packed, or one value per field
_WIDTH_MASK = np.array([(1 << (8 * w)) - 1 for w in range(9)], dtype=np.uint64)  # low w bytes
_NO_KEY = np.uint64(2**64 - 1)  # not the code of any key of at most 8 bytes and its length

#: Batches smaller than this are walked record by record (the NumPy steps of the
#: all-at-once walk cost more than they save for a few records).
MIN_BATCH = 8
#: Records longer than this on average are walked record by record: joining
#: them into one buffer would copy more bytes than the walk costs.
LARGE_RECORD = 16384


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
            if (ve < vs).any():
                raise _Bail  # an absurd length (it would send the walk backwards)
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


def _feature_kinds(buf: np.ndarray, starts: np.ndarray,
                   ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The kind field of ``Feature`` messages (1 bytes_list, 2 float_list, 3 int64_list, or none):
    ``(msg, num, vs, ve)`` per kind field found; `_Bail` on anything protobuf would resolve otherwise."""
    one = _single_fields(buf, starts, ends)
    if one is not None:
        msg, tag, vs, ve = one
        if ((tag != 0x0A) & (tag != 0x12) & (tag != 0x1A)).any():
            raise _Bail
        return msg, tag.astype(np.int64) >> 3, vs, ve
    feat = scan_fields(buf, starts, ends)
    if (feat.wt != 2).any() or ((feat.num < 1) | (feat.num > 3)).any():
        raise _Bail
    if feat.msg.size > 1 and (feat.msg[1:] == feat.msg[:-1]).any():
        raise _Bail  # two kinds: protobuf keeps the last
    return feat.msg, feat.num, feat.vs, feat.ve


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
    feat_msg, feat_num, list_vs, list_ve = _feature_kinds(buf, feat_s, feat_e)
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
        elif want == 1:  # several values in a list: all lists in one call of protobuf's C parser
            strings, counts = _bytes_lists(joined, ls, le, rec, n)
            out[key] = _assemble(spec, strings, counts, present, n)
            continue
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


def _bytes_lists(joined: bytes, ls: np.ndarray, le: np.ndarray, rec: np.ndarray,
                 n: int) -> tuple[np.ndarray, np.ndarray]:
    """The values of BytesList messages ``joined[ls:le]`` (one per record ``rec``) and their count
    per record (:func:`bytes_values`)."""
    values, per_list = bytes_values(joined, np.frombuffer(joined, np.uint8), ls, le)
    counts = np.zeros(n, np.int64)
    counts[rec] = per_list
    return values, counts


def bytes_values(joined: bytes, buf: np.ndarray, ls: np.ndarray, le: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The values of the BytesList messages ``joined[ls:le]`` and their count per message.

    The messages, joined, are one BytesList (a repeated field's occurrences add up), parsed by
    protobuf's C parser in one call. Each value of length ``k`` took ``1 + width(k) + k`` bytes
    (its tag, its length as a varint, itself), so the values' ends fall on the messages'
    boundaries, which give each message's count -- unless a message holds anything else (an
    unknown field, a length written in more bytes than needed), which makes the sizes disagree:
    then :class:`_Bail`.
    """
    if ls.size < 64 or (le - ls).sum() > 64 * ls.size:  # few or long lists: copy each at once
        view = memoryview(joined)
        data = b"".join([view[s:e] for s, e in zip(ls.tolist(), le.tolist())])
    else:
        data = buf[_ranges(ls, le - ls)].tobytes()
    try:
        values = list(BytesList.FromString(data).value)
    except DecodeError:
        raise _Bail from None
    k = np.fromiter(map(len, values), np.int64, len(values))
    size = 1 + k + 1 + (k >= 1 << 7) + (k >= 1 << 14) + (k >= 1 << 21) + (k >= 1 << 28)
    ends = np.cumsum(size)
    bounds = np.cumsum(le - ls)
    if (ends[-1] if ends.size else 0) != (bounds[-1] if bounds.size else 0):
        raise _Bail
    upto = np.searchsorted(ends, bounds, side="right")
    if upto.size and (np.concatenate([[0], ends])[upto] != bounds).any():
        raise _Bail  # a value runs across two messages: they were not BytesLists of whole values
    per_list = np.diff(np.concatenate([[0], upto])).astype(np.int64)
    return _object_array(values), per_list


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


