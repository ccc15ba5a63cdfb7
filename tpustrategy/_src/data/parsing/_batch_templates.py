"""Layout templates: a batch of same-shaped Example records read at fixed offsets.

The first record of a layout is walked once (`_layout`) to find its structure bytes and where
each requested value sits; every record of the same length whose structure bytes match (and,
for int64 values, the same varint widths) is then read at those offsets for all records in one
NumPy gather (`_read_group`). At most `MAX_TEMPLATES` layouts are tried per batch, each only while
it covers `MIN_TEMPLATE_SHARE` of the records left; layouts are cached by record length across
batches (`_TEMPLATES`). Records no template fits go to the field walk (`_batch_scan`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tpustrategy._src.data.parsing._batch_walk import (
    _EMPTY,
    _KIND,
    _LE_F32,
    _STRING,
    _Bail,
    _object_array,
    _varint,
    record_entries,
)
from tpustrategy._src.data.parsing._example_layout import _decode_varints as _decode_fixed_varints

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
        seen = 0
        for key, vs, i in record_entries(rec):
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
