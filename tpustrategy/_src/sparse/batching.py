"""Batching, concatenating and splitting `SparseTensor` values along a leading batch dimension.

TensorFlow batches ``SparseTensor`` dataset elements (``Dataset.batch``) by prepending the
element's position in the batch to each index row, concatenating the values, and giving
the batch a dense shape of ``[batch, max over elements of each dimension]``. Splitting such a
batch across replicas cuts it by the first index column, each piece's rows re-based to 0
and its dense shape ``[piece rows, *inner dims]``. These NumPy functions do both; they take
any object with ``indices``, ``values`` and ``dense_shape`` (``SparseTensor``,
``tpsd.SparseBatch``) and return the same type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.sparse.tensor import SparseTensor

_FIELDS = ("indices", "values", "dense_shape")


def is_sparse(x: Any) -> bool:
    """Whether ``x`` is a sparse value: a `SparseTensor` or a named tuple with its three fields."""
    return isinstance(x, SparseTensor) or (isinstance(x, tuple) and getattr(type(x), "_fields", None) == _FIELDS)


def _coo_parts(st: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    indices = np.asarray(st.indices, dtype=np.int64)
    shape = np.asarray(st.dense_shape, dtype=np.int64).reshape(-1)
    values = np.asarray(st.values)
    if indices.size == 0:
        indices = indices.reshape(0, shape.size)
    return indices, values, shape


def batch_sparse(elements: Sequence[Any], api: str = "Dataset.batch", path: str = "") -> Any:
    """One `SparseTensor` of ``len(elements)`` sparse elements of the same rank (``Dataset.batch``).

    Element ``i``'s index rows become ``[i, *row]``; the dense shape is ``[len(elements),
    max of each dimension]``.

    Raises:
      InvalidArgumentError: the elements' ranks differ.
    """
    parts = [_coo_parts(e) for e in elements]
    rank = parts[0][2].size
    for i, (_, _, shape) in enumerate(parts):
        if shape.size != rank:
            where = f" in component {path}" if path else ""
            raise InvalidArgumentError(
                f"{api}: cannot batch SparseTensors of different ranks{where}: element 0 has rank {rank} and "
                f"element {i} has rank {shape.size}.\nFix: give every element's SparseTensor the same number "
                "of dimensions (tps.sparse.reshape).")
    indices = np.concatenate(
        [np.concatenate([np.full((len(idx), 1), i, np.int64), idx], axis=1) for i, (idx, _, _) in enumerate(parts)])
    values = np.concatenate([v for _, v, _ in parts])
    dims = np.max(np.stack([s for _, _, s in parts]), axis=0) if rank else np.zeros((0,), np.int64)
    return type(elements[0])(indices, values, np.concatenate([[len(parts)], dims]).astype(np.int64))


def concat_sparse_batches(parts: Sequence[Any]) -> Any:
    """Batched sparse values joined along the batch dimension (rows of later parts shifted)."""
    arrays = [_coo_parts(p) for p in parts]
    offsets = np.cumsum([0] + [int(s[0]) for _, _, s in arrays])
    indices = np.concatenate([idx + np.eye(1, idx.shape[1], dtype=np.int64) * off
                              for (idx, _, _), off in zip(arrays, offsets)])
    values = np.concatenate([v for _, v, _ in arrays])
    inner = np.max(np.stack([s[1:] for _, _, s in arrays]), axis=0)
    return type(parts[0])(indices, values, np.concatenate([[offsets[-1]], inner]).astype(np.int64))


def batch_rows(st: Any) -> int:
    """The batch dimension of a batched sparse value: ``dense_shape[0]``."""
    shape = np.asarray(st.dense_shape).reshape(-1)
    return int(shape[0]) if shape.size else -1


def slice_rows(st: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of a batched sparse value, re-based to 0 (dense shape ``[stop - start, ...]``)."""
    indices, values, shape = _coo_parts(st)
    keep = (indices[:, 0] >= start) & (indices[:, 0] < stop)
    picked = indices[keep].copy()
    picked[:, 0] -= start
    return type(st)(picked, values[keep], np.concatenate([[stop - start], shape[1:]]).astype(np.int64))


def split_rows(st: Any, sizes: Sequence[int]) -> list[Any]:
    """A batched sparse value cut into consecutive pieces of ``sizes`` rows."""
    bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(int).tolist()
    return [slice_rows(st, bounds[k], bounds[k + 1]) for k in range(len(sizes))]


def with_rows(st: Any, rows: int) -> Any:
    """The same entries with the batch dimension set to ``rows`` (a piece padded with empty rows)."""
    indices, values, shape = _coo_parts(st)
    return type(st)(indices, values, np.concatenate([[rows], shape[1:]]).astype(np.int64))


def unbatch_rows(st: Any, start: int, stop: int) -> list[Any]:
    """Elements ``start:stop`` of a batched sparse value, each without the batch dimension."""
    indices, values, shape = _coo_parts(st)
    out = []
    for row in range(start, stop):
        keep = indices[:, 0] == row
        out.append(type(st)(indices[keep][:, 1:], values[keep], shape[1:].copy()))
    return out
