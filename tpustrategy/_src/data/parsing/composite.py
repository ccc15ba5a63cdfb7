"""Building FixedLenSequence, Sparse and Ragged results from per-unit value lists.

Every composite kind reads what a ``VarLenFeature`` reads: for each unit (an
example, or a step of a feature list) the values of a key and their count.
The functions here turn those ``(values, counts)`` pairs into the kind's
result with NumPy operations over the whole batch, so that they are as fast as
the VarLen parse underneath (any of its paths).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.data.parsing.feature_kinds import (
    RaggedFeature,
    RaggedTensorValue,
    RowLengths,
    RowLimits,
    RowSplits,
    RowStarts,
    SparseFeature,
    UniformRowLength,
    ValueRowIds,
)
from tpustrategy._src.data.transformations.ragged_batch import RaggedBatch
from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.sparse.tensor import SparseTensor

_STRING = np.dtype(object)
_TYPE_NAME = {np.dtype(np.int64): "int64", np.dtype(np.float32): "float", _STRING: "string"}

VarLen = tuple[np.ndarray, np.ndarray]  # (values, counts per unit)


def _unit_of(counts: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(counts.size, dtype=np.int64), counts)


def _first_of(counts: np.ndarray) -> np.ndarray:
    """The index of each unit's first entry (its start), for units that have entries."""
    firsts: np.ndarray = (np.cumsum(counts) - counts)[counts > 0]
    return firsts


def padded_rows(values: np.ndarray, counts: np.ndarray, row_shape: tuple[int, ...], pad: Any,
                dtype: np.dtype) -> np.ndarray:
    """``values`` cut per unit into rows of ``row_shape`` and padded with ``pad``: ``[units, max_rows, *row_shape]``."""
    stride = int(np.prod(row_shape, dtype=np.int64))
    rows = counts // stride
    longest = int(rows.max()) if rows.size else 0
    out = np.empty((counts.size, longest * stride), dtype=dtype)
    if dtype == _STRING:
        out.reshape(-1)[:] = [pad] * out.size
    else:
        out[...] = pad
    if values.size:
        width = longest * stride
        if (counts == width).all():
            out.reshape(-1)[:] = values
        else:  # each unit's values fill the front of its row, in order (one boolean scatter)
            out[np.arange(width) < counts[:, None]] = values
    return out.reshape(counts.size, longest, *row_shape)


def check_stride(counts: np.ndarray, row_shape: tuple[int, ...], key: str, dtype: np.dtype,
                 names: list[str] | None = None) -> None:
    """Every unit's count is a multiple of one row's size (a FixedLenSequenceFeature in an Example)."""
    stride = int(np.prod(row_shape, dtype=np.int64))
    bad = np.flatnonzero(counts % stride)
    if bad.size:
        i = int(bad[0])
        name = names[i] if names else "<unknown>"
        raise InvalidArgumentError(
            f"Name: {name}, Key: {key}, Index: {i}.  Number of {_TYPE_NAME[dtype]} values is not a multiple "
            f"of stride length. Saw {int(counts[i])} values but output shape is: [?,{','.join(map(str, row_shape))}]"
            f"\nFix: store whole rows of shape {list(row_shape)} under {key!r}, or correct the feature's shape.")


def sparse(key: str, spec: SparseFeature, indices: list[VarLen], values: VarLen, batched: bool) -> SparseTensor:
    """A SparseFeature's SparseTensor from its index lists and value list (``tf.sparse.sparse_merge``)."""
    vals, counts = values
    for ix_key, (_, ix_counts) in zip(spec.index_keys, indices):
        bad = np.flatnonzero(ix_counts != counts)
        if bad.size:
            i = int(bad[0])
            raise InvalidArgumentError(
                f"Dimensions {int(ix_counts[i])} and {int(counts[i])} are not compatible: "
                f"feature {key}: the index feature {ix_key!r} of example {i} has {int(ix_counts[i])} values but the "
                f"value feature {spec.value_key!r} has {int(counts[i])}; SparseFeature needs one index per value "
                "in every dimension.\nFix: write as many indices as values in each example.")
    unit = _unit_of(counts)
    cols = [ix for ix, _ in indices]
    if not spec.already_sorted and vals.size > 1:
        order = sort_order(unit, cols)
        if order is not None:
            unit, cols, vals = unit[order], [c[order] for c in cols], vals[order]
    sizes = np.asarray(spec.sizes, dtype=np.int64)
    if batched:
        idx = np.stack([unit, *cols], axis=1) if vals.size else np.zeros((0, 1 + len(cols)), np.int64)
        shape = np.concatenate([[counts.size], sizes]).astype(np.int64)
    else:
        idx = np.stack(cols, axis=1) if vals.size else np.zeros((0, len(cols)), np.int64)
        shape = sizes
    return SparseTensor(idx.astype(np.int64, copy=False), vals, shape)


def sort_order(unit: np.ndarray, cols: list[np.ndarray]) -> np.ndarray | None:
    """The stable order of entries by (unit, *cols) -- ``np.lexsort``'s -- or None when they are in
    order already. The keys are folded into one int64 where their ranges allow (one stable argsort
    instead of a pass per key)."""
    key = unit.astype(np.int64)
    for c in cols:
        lo, hi = int(c.min()), int(c.max())
        span = hi - lo + 1
        if int(key.max()) >= (1 << 62) // span:
            return np.lexsort([*reversed(cols), unit])  # too wide to fold
        key = key * span + (c - lo)
    if (key[1:] >= key[:-1]).all():
        return None
    return np.argsort(key, kind="stable")


def _misaligned(key: str, what: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Feature {key}: values and partitions are not aligned ({what}).\nFix: write partition features that "
        "describe exactly the values of each example (e.g. row lengths summing to the number of values).")


def ragged_parts(key: str, spec: RaggedFeature, values: VarLen,
                 partitions: dict[str, VarLen]) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """A RaggedFeature per unit: (flat values, rows per unit, inner row lengths outermost first)."""
    flat, rows = values
    rows = rows.astype(np.int64, copy=False)
    levels: list[np.ndarray] = []
    for part in reversed(spec.partitions):
        if isinstance(part, UniformRowLength):
            n = int(part.length)
            if n == 0 or (rows % n).any():
                raise _misaligned(key, f"UniformRowLength({n}) does not divide the rows of every example")
            if levels:
                levels.insert(0, np.full(int(rows.sum()) // n, n, np.int64))
            else:
                flat = flat.reshape(-1, n, *flat.shape[1:])
            rows = rows // n
            continue
        p, pc = partitions[part.key]
        p = p.astype(np.int64, copy=False)
        pc = pc.astype(np.int64, copy=False)
        if isinstance(part, RowSplits):
            firsts = _first_of(pc)
            if (p[firsts] != 0).any():
                raise _misaligned(key, f"row splits {part.key!r} do not start at 0")
            keep = np.ones(p.size, bool)
            keep[firsts] = False
            p, pc = p[keep], np.maximum(pc - 1, 0)
            part = RowLimits(part.key)
        if isinstance(part, RowLengths):
            lengths = p
            total = np.bincount(_unit_of(pc), weights=p, minlength=rows.size).astype(np.int64)
            if (p < 0).any() or (total != rows).any():
                raise _misaligned(key, f"row lengths {part.key!r} do not sum to the number of values")
        elif isinstance(part, RowLimits | RowStarts):
            firsts = _first_of(pc)
            if isinstance(part, RowLimits):
                prev = np.concatenate([[0], p[:-1]]).astype(np.int64)
                prev[firsts] = 0
                lengths = p - prev
                last = (np.cumsum(pc) - 1)[pc > 0]
                ends_ok = (p[last] == rows[pc > 0]).all()
            else:
                if (p[firsts] != 0).any():
                    raise _misaligned(key, f"row starts {part.key!r} do not start at 0")
                nxt = np.concatenate([p[1:], [0]]).astype(np.int64)
                last = (np.cumsum(pc) - 1)[pc > 0]
                nxt[last] = rows[pc > 0]
                lengths = nxt - p
                ends_ok = (p[last] <= rows[pc > 0]).all()
            if (lengths < 0).any() or not ends_ok or (rows[pc == 0] != 0).any():
                raise _misaligned(key, f"the partition {part.key!r} does not cover the values")
        elif isinstance(part, ValueRowIds):
            if (pc != rows).any() or (p < 0).any():
                raise _misaligned(key, f"value row ids {part.key!r} do not give one row id per value")
            unit = _unit_of(pc)
            if p.size > 1 and ((np.diff(p) < 0) & (unit[1:] == unit[:-1])).any():
                raise _misaligned(key, f"value row ids {part.key!r} are not sorted")
            nrows = np.zeros(rows.size, np.int64)
            if p.size:
                np.maximum.at(nrows, unit, p + 1)
            offset = np.cumsum(nrows) - nrows
            lengths = np.bincount(p + offset[unit], minlength=int(nrows.sum())).astype(np.int64)
            pc = nrows
        else:  # pragma: no cover - RaggedFeature checks the partition types
            raise ValueError(f"Unhandled partition type {part!r}")
        levels.insert(0, lengths.astype(np.int64, copy=False))
        rows = pc
    return flat, rows, levels


def ragged_batch(flat: np.ndarray, lengths: np.ndarray, splits_dtype: np.dtype) -> RaggedBatch:
    """Rows of ``lengths`` values of ``flat`` (``[N, *inner]``) as a RaggedBatch (padded values)."""
    inner = flat.shape[1:]
    longest = int(lengths.max()) if lengths.size else 0
    out = np.empty((lengths.size, longest, *inner), dtype=flat.dtype)
    if flat.dtype == _STRING:
        out.reshape(-1)[:] = [b""] * out.size
    else:
        out[...] = 0
    if flat.shape[0]:
        pos = np.arange(flat.shape[0], dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        out[_unit_of(lengths), pos] = flat
    shapes = np.empty((lengths.size, 1 + len(inner)), dtype=splits_dtype)
    shapes[:, 0] = lengths
    shapes[:, 1:] = inner
    return RaggedBatch(out, lengths.astype(splits_dtype), shapes)


def nested(flat: np.ndarray, levels: list[np.ndarray], splits_dtype: np.dtype) -> Any:
    """``flat`` partitioned by ``levels`` (row lengths, outermost first) as nested RaggedTensorValues."""
    out: Any = flat
    for lengths in reversed(levels):
        splits = np.zeros(lengths.size + 1, dtype=splits_dtype)
        np.cumsum(lengths, out=splits[1:])
        out = RaggedTensorValue(out, splits)
    return out


def ragged_result(flat: np.ndarray, outer: np.ndarray | None, levels: list[np.ndarray],
                  splits_dtype: np.dtype) -> Any:
    """The result type for a ragged value: ``outer`` (rows per unit, or None for no unit dimension) over
    ``levels``; an array when nothing is ragged, a RaggedBatch for one ragged dimension, else nested."""
    all_levels = levels if outer is None else [outer, *levels]
    if not all_levels:
        return flat
    if len(all_levels) == 1:
        return ragged_batch(flat, all_levels[0], splits_dtype)
    return nested(flat, all_levels, splits_dtype)
