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

from typing import Any, NamedTuple

import numpy as np

from tpustrategy._src.data.parsing._batch_scan import (
    _LIST_WIRE_TYPES,
    _PAD,
    _STEP_ASIDE,
    _canonical_entries,
    _check_utf8_keys,
    _feature_kinds,
    _general_entries,
    _join,
    _ranges,
    _repeated_field,
    _single_fields,
    bytes_values,
    scan_fields,
)
from tpustrategy._src.data.parsing._batch_walk import (
    _KIND,
    _LE_F32,
    _Bail,
    _decode_varints,
    _object_array,
)


class Lists(NamedTuple):
    """One key's feature lists over a batch: the values, each step's count, each record's steps."""

    values: np.ndarray
    step_counts: np.ndarray  # int64, one per step of every record, in record order
    steps: np.ndarray  # int64, one per record
    present: np.ndarray  # bool, one per record: the record has the feature list


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
    if not keys:
        return contexts, {}
    found = []
    for key in keys:
        cand = np.flatnonzero(names == key.encode("utf-8"))
        rec = entry_rec[cand]
        if rec.size > 1 and (rec[1:] == rec[:-1]).any():
            raise _Bail  # the key twice in one record: the last wins in protobuf
        found.append((rec, value_s[cand], value_e[cand]))
    # The steps of all the keys' FeatureLists, walked together: each a Feature (field 1).
    list_bounds = np.cumsum([0] + [f[0].size for f in found])
    step_msg, fs, fe = _spans(buf, np.concatenate([f[1] for f in found]), np.concatenate([f[2] for f in found]))
    # Each step's Feature: one kind field (1 bytes, 2 float, 3 int64) or none.
    feat_msg, feat_num, vs, ve = _feature_kinds(buf, fs, fe)
    step_bounds = np.searchsorted(step_msg, list_bounds)
    feat_bounds = np.searchsorted(feat_msg, step_bounds)
    out: dict[str, Any] = {}
    for j, (key, dtype) in enumerate(keys.items()):
        rec = found[j][0]
        s0, s1 = int(step_bounds[j]), int(step_bounds[j + 1])
        f0, f1 = int(feat_bounds[j]), int(feat_bounds[j + 1])
        present = np.zeros(n, bool)
        present[rec] = True
        steps = np.zeros(n, np.int64)
        steps[rec] = np.bincount(step_msg[s0:s1] - list_bounds[j], minlength=rec.size)
        want = _KIND[dtype]
        if (feat_num[f0:f1] != want).any():
            raise _Bail  # a step of another kind: protobuf's path raises it
        values, counts = _values(joined, buf, vs[f0:f1], ve[f0:f1], feat_msg[f0:f1] - s0, want, s1 - s0)
        out[key] = Lists(values, counts, steps, present)
    return contexts, out


def _values(joined: bytes, buf: np.ndarray, vs: np.ndarray, ve: np.ndarray, step: np.ndarray, want: int,
            nsteps: int) -> tuple[Any, np.ndarray]:
    """The values of the lists ``buf[vs:ve]`` (of kind ``want``, at steps ``step``) and their count per step."""
    # Usually one field per list (a bytes value or a packed run).
    single = _single_fields(buf, vs, ve)
    if single is not None and (single[1] == 0x0A).all():
        seg_msg, _, sv, se = single
    elif want == 1:  # several values in a list: all lists in one call of protobuf's C parser
        strings, per_list = bytes_values(joined, buf, vs, ve)
        return strings, np.bincount(step, weights=per_list, minlength=nsteps).astype(np.int64)
    else:
        lists = scan_fields(buf, vs, ve)
        if (lists.num != 1).any() or not np.isin(lists.wt, _LIST_WIRE_TYPES[want]).all():
            raise _Bail
        seg_msg, sv, se = lists.msg, lists.vs, lists.ve
    seg_step = step[seg_msg]
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
    return values, counts.astype(np.int64, copy=False)
