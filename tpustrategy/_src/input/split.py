"""Splitting a global batch across replicas: the one algorithm of DESIGN §4.

A batch of b examples is cut into R contiguous pieces, in order: the first
``b mod R`` replicas get ``ceil(b/R)`` examples, the rest ``floor(b/R)``. A piece
never crosses a batch boundary; when b < R some pieces are empty (shape
``[0, ...]`` with the inner dimensions kept). Slices are NumPy views.

A sparse component (``SparseTensor``, ``sparse_batch``'s ``SparseBatch``) is one leaf
here: its batch dimension is ``dense_shape[0]``, and it is cut by its first index
column into per-replica sparse values with rows re-based to 0 and dense shape
``[piece, *inner dims]``, as TensorFlow rebatches a ``SparseTensor``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.data.core.structure import flatten_with_paths, has_sparse
from tpustrategy._src.sparse.batching import batch_rows, is_sparse, split_rows, with_rows


def piece_sizes(b: int, r: int) -> list[int]:
    """Sizes of the R pieces of a batch of b examples."""
    base, extra = divmod(b, r)
    return [base + 1 if i < extra else base for i in range(r)]


def pipeline_share(global_batch: int, num_replicas: int, num_pipelines: int, pipeline_id: int) -> int:
    """Examples of a full global batch that go to one pipeline's replicas."""
    per = num_replicas // num_pipelines
    sizes = piece_sizes(global_batch, num_replicas)
    return sum(sizes[pipeline_id * per:(pipeline_id + 1) * per])


def batch_size_of(leaves: list[tuple[str, Any]], api: str, num_replicas: int) -> int:
    """The common leading dimension of an element's leaves."""
    sizes = {}
    for path, leaf in leaves:
        if is_sparse(leaf):
            sizes[path] = batch_rows(leaf)
            continue
        shape = np.shape(leaf) if not isinstance(leaf, bytes) else ()
        if len(shape) == 0:
            raise ValueError(
                f"{api}: element{path} is a scalar (shape ()), but the strategy has "
                f"{num_replicas} replicas and the dataset is not batched, so there is no batch "
                "dimension to split.\nFix: call .batch(global_batch_size) on the dataset before "
                "distributing it, or use distribute_datasets_from_function to batch per replica."
            )
        sizes[path] = shape[0]
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"element{p}: {n}" for p, n in sizes.items())
        raise ValueError(
            f"{api}: the leaves of one element have different batch dimensions ({listed}); every "
            "leaf must have the same leading (batch) dimension to be split across replicas."
        )
    return next(iter(sizes.values())) if sizes else 0


def split_element(element: Any, sizes: list[int]) -> list[Any]:
    """Cuts every leaf of ``element`` into consecutive pieces of the given sizes."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten(element, is_leaf=is_sparse)
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    cut = {i: split_rows(leaf, sizes) for i, leaf in enumerate(leaves) if is_sparse(leaf)}
    pieces = []
    for k in range(len(sizes)):
        lo, hi = bounds[k], bounds[k + 1]
        pieces.append(jax.tree_util.tree_unflatten(
            treedef, [cut[i][k] if i in cut else leaf[lo:hi] for i, leaf in enumerate(leaves)]))
    return pieces


def leaves_with_paths(element: Any) -> list[tuple[str, Any]]:
    """The leaves of ``element`` with their paths, a sparse value counting as one leaf."""
    if is_sparse(element):
        return [("", element)]
    if isinstance(element, tuple) and has_sparse(element):
        return [(f"[{i}]{p}", leaf) for i, v in enumerate(element) for p, leaf in leaves_with_paths(v)]
    if isinstance(element, dict) and has_sparse(element):
        return [(f"[{k!r}]{p}", leaf) for k in sorted(element) for p, leaf in leaves_with_paths(element[k])]
    return list(flatten_with_paths(element))


def empty_like_spec(spec: Any) -> Any:
    """A ``[0, ...]`` piece for each leaf of an element spec (inner dims kept, unknown -> 0)."""
    import jax

    def make(s: Any) -> Any:
        if is_sparse(s):
            rank = s.dense_shape.shape[0] if s.dense_shape.shape and s.dense_shape.shape[0] is not None else 1
            return type(s)(np.zeros((0, rank), np.int64), np.empty((0,), s.values.dtype), np.zeros((rank,), np.int64))
        shape = tuple(0 if d is None else d for d in s.shape)
        shape = (0,) + shape[1:] if shape else (0,)
        return np.empty(shape, dtype=s.dtype)

    return jax.tree_util.tree_map(make, spec, is_leaf=lambda x: is_sparse(x) or (hasattr(x, "shape") and hasattr(x, "dtype")))


def pad_piece(piece: Any, size: int) -> tuple[Any, np.ndarray]:
    """Pads each leaf of ``piece`` with zeros (``b""`` for bytes) to ``size``; returns the mask."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten(piece, is_leaf=is_sparse)
    n = (batch_rows(leaves[0]) if is_sparse(leaves[0]) else np.shape(leaves[0])[0]) if leaves else 0
    mask = np.zeros(size, dtype=bool)
    mask[:n] = True
    if n == size:
        return piece, mask
    padded = []
    for leaf in leaves:
        if is_sparse(leaf):
            padded.append(with_rows(leaf, size))
            continue
        leaf = np.asarray(leaf)
        fill = np.empty((size - n,) + leaf.shape[1:], dtype=leaf.dtype)
        fill[...] = b"" if leaf.dtype == object else 0
        padded.append(np.concatenate([leaf, fill]))
    return jax.tree_util.tree_unflatten(treedef, padded), mask
