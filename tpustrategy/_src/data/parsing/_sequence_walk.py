"""The vectorised walk of a batch of serialized SequenceExamples (see :mod:`.sequence_example`).

The records are joined into one buffer and walked one nesting level at a time
for all records at once, with :mod:`._batch_scan`'s field readers:
``SequenceExample`` -> its ``context`` fields (cut out as they are: together
they are an ``Example``) and its ``feature_lists`` -> map entries -> per
requested key, the ``FeatureList``'s ``Feature`` steps -> each step's kind and
value list. Python work grows with the number of requested keys, not with the
records or steps.

Whatever protobuf would read differently or reject -- unknown or repeated
top-level fields, a key twice in one record, a step of another kind than
requested, a step with two kinds, a malformed record -- makes :func:`walk`
return None, and the caller reads the records with protobuf (which raises the
errors with their messages).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.data.parsing._batch_scan import (
    _LIST_WIRE_TYPES,
    _PAD,
    _STEP_ASIDE,
    _canonical_entries,
    _check_utf8_keys,
    _general_entries,
    _join,
    _ranges,
    _repeated_field,
    _single_fields,
    scan_fields,
)
from tpustrategy._src.data.parsing._batch_walk import (
    _KIND,
    _LE_F32,
    _Bail,
    _decode_varints,
    _object_array,
)


def walk(batch: list[bytes], keys: dict[str, np.dtype]) -> tuple[list[bytes], dict[str, Any]] | None:
    """Each record's context as Example bytes and the feature lists of ``keys``, or None (protobuf's turn)."""
    if not batch:
        return None
    try:
        return _walk(batch, keys)
    except _STEP_ASIDE:
        return None


def _spans(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """(message, start, end) of the field-1 length-delimited fields of messages made only of them."""
    fields = _repeated_field(buf, starts, ends)
    if fields is None:
        general = scan_fields(buf, starts, ends)
        if (general.wt != 2).any() or (general.num != 1).any():
            raise _Bail
        fields = general.msg, general.vs, general.ve
    return fields


def _walk(batch: list[bytes], keys: dict[str, np.dtype]) -> tuple[list[bytes], dict[str, Any]]:
    from tpustrategy._src.data.parsing.sequence_example import Lists

    n = len(batch)
    joined = b"".join([*batch, _PAD])
    buf = np.frombuffer(joined, np.uint8)
    lens = np.fromiter(map(len, batch), np.int64, n)
    rec_end = np.cumsum(lens)
    top = scan_fields(buf, rec_end - lens, rec_end)
    if (top.wt != 2).any() or ((top.num != 1) & (top.num != 2)).any():
        raise _Bail  # unknown fields: protobuf keeps them, and may reject them
    # The context: the record's field-1 fields as they are (tag, length, Features) form an Example.
    is_ctx = top.num == 1
    contexts = [b""] * n
    if is_ctx.any():
        vs, ve = top.vs[is_ctx], top.ve[is_ctx]
        length = ve - vs
        width = 1 + (length >= 1 << 7) + (length >= 1 << 14) + (length >= 1 << 21) + (length >= 1 << 28)
        starts = vs - 1 - width
        for r, s, e in zip(top.msg[is_ctx].tolist(), starts.tolist(), ve.tolist()):
            contexts[r] = contexts[r] + joined[s:e] if contexts[r] else joined[s:e]
    # The feature lists: at most one field 2 per record (several would be merged by key).
    is_fl = top.num == 2
    fl_rec = top.msg[is_fl]
    if fl_rec.size > 1 and (fl_rec[1:] == fl_rec[:-1]).any():
        raise _Bail
    entry_msg, entry_s, entry_e = _spans(buf, top.vs[is_fl], top.ve[is_fl])
    entry_rec = fl_rec[entry_msg]
    canonical = _canonical_entries(buf, entry_s, entry_e)
    if canonical is not None:
        key_s, key_e, value_s, value_e = canonical
    else:
        key_s, key_e, value_s, value_e = _general_entries(buf, entry_s, entry_e)
    key_len = key_e - key_s
    if key_len.size and (buf[_ranges(key_s, key_len)] >= 0x80).any():
        _check_utf8_keys(joined, key_s, key_e)
    names = np.empty(key_s.size, dtype=object)
    names[:] = [joined[s:e] for s, e in zip(key_s.tolist(), key_e.tolist())]
    out: dict[str, Any] = {}
    for key, dtype in keys.items():
        cand = np.flatnonzero(names == key.encode("utf-8"))
        rec = entry_rec[cand]
        if rec.size > 1 and (rec[1:] == rec[:-1]).any():
            raise _Bail  # the key twice in one record: the last wins in protobuf
        out[key] = _lists(joined, buf, rec, value_s[cand], value_e[cand], _KIND[dtype], n, Lists)
    return contexts, out


def _lists(joined: bytes, buf: np.ndarray, rec: np.ndarray, ls: np.ndarray, le: np.ndarray, want: int, n: int,
           lists_type: Any) -> Any:
    """One key's FeatureLists ``buf[ls:le]`` (of records ``rec``) as a ``Lists``."""
    present = np.zeros(n, bool)
    present[rec] = True
    step_msg, fs, fe = _spans(buf, ls, le)
    per_list = np.bincount(step_msg, minlength=rec.size).astype(np.int64)
    steps = np.zeros(n, np.int64)
    steps[rec] = per_list
    nsteps = fs.size
    # Each step's Feature: one kind field (1 bytes, 2 float, 3 int64) or none.
    one = _single_fields(buf, fs, fe)
    if one is not None:
        feat_msg, tag, vs, ve = one
        if ((tag != 0x0A) & (tag != 0x12) & (tag != 0x1A)).any():
            raise _Bail
        feat_num = tag.astype(np.int64) >> 3
    else:
        feat = scan_fields(buf, fs, fe)
        if (feat.wt != 2).any() or ((feat.num < 1) | (feat.num > 3)).any():
            raise _Bail
        if feat.msg.size > 1 and (feat.msg[1:] == feat.msg[:-1]).any():
            raise _Bail  # two kinds: protobuf keeps the last
        feat_msg, feat_num, vs, ve = feat.msg, feat.num, feat.vs, feat.ve
    if (feat_num != want).any():
        raise _Bail  # a step of another kind: protobuf's path raises it
    # The value lists of the steps that have one: usually one field each (a bytes value or a packed run).
    single = _single_fields(buf, vs, ve)
    if single is not None and (single[1] == 0x0A).all():
        seg_msg, _, sv, se = single
    elif want == 1:
        seg_msg, sv, se = _spans(buf, vs, ve)
    else:
        lists = scan_fields(buf, vs, ve)
        if (lists.num != 1).any() or not np.isin(lists.wt, _LIST_WIRE_TYPES[want]).all():
            raise _Bail
        seg_msg, sv, se = lists.msg, lists.vs, lists.ve
    seg_step = feat_msg[seg_msg]
    if want == 1:
        values: Any = _object_array([joined[s:e] for s, e in zip(sv.tolist(), se.tolist())])
        counts = np.bincount(seg_step, minlength=nsteps)
    elif want == 2:
        seg_len = se - sv
        if (seg_len & 3).any():
            raise _Bail
        values = _join(joined, buf, sv, se).view(_LE_F32).astype(np.float32)
        counts = np.bincount(seg_step, weights=seg_len >> 2, minlength=nsteps)
    else:
        values, counts = _decode_varints(_join(joined, buf, sv, se), se - sv, seg_step, nsteps)
    return lists_type(values, counts.astype(np.int64, copy=False), steps, present)
