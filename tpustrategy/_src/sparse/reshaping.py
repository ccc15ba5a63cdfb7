"""Sparse ops that move entries: ``reorder``, ``reshape``, ``concat``, ``slice``, ``split``,
``transpose``, ``expand_dims``, ``reset_shape``.

Each keeps the values and computes new indices with NumPy; where TensorFlow's
result is in row-major order (``reorder``, ``concat``, ``transpose``) so is ours.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.sparse.tensor import SparseTensor, as_sparse, shape_text, sort_order


def _sorted(indices: np.ndarray, values: np.ndarray, shape: np.ndarray) -> SparseTensor:
    order = sort_order(indices)
    return SparseTensor(indices[order], values[order], shape)


def reorder(sp_input: Any, name: str | None = None) -> SparseTensor:
    """The same sparse tensor with indices in row-major order (``tf.sparse.reorder``)."""
    st = as_sparse(sp_input, "tps.sparse.reorder")
    return _sorted(st.indices, st.values, st.dense_shape)


def reshape(sp_input: Any, shape: Any, name: str | None = None) -> SparseTensor:
    """The sparse tensor with a new dense shape, entries in the same order (``tf.sparse.reshape``).

    Args:
      sp_input: a `SparseTensor`.
      shape: the new shape; one dimension may be -1 (inferred).
      name: ignored.

    Raises:
      InvalidArgumentError: the sizes differ, or more than one -1 (TensorFlow's messages).
    """
    api = "tps.sparse.reshape"
    st = as_sparse(sp_input, api)
    new = [int(d) for d in np.asarray(shape).reshape(-1).tolist()]
    total = int(np.prod(st.dense_shape, dtype=np.int64))
    unknown = [i for i, d in enumerate(new) if d == -1]
    if len(unknown) > 1:
        raise InvalidArgumentError(f"only one output dimension may be -1, not both {unknown[0]} and {unknown[1]}\n"
                                   f"({api}: Fix: give every dimension but one.)")
    known = int(np.prod([d for d in new if d != -1], dtype=np.int64))
    if unknown:
        if known == 0 or total % known:
            raise InvalidArgumentError(
                f"Input to reshape is a SparseTensor with {total} dense values, but the requested shape requires a "
                f"multiple of {known}. input_shape={shape_text(st.dense_shape)} output_shape={shape_text(new)}\n"
                f"({api}: Fix: pick dimensions whose product divides {total}.)")
        new[unknown[0]] = total // known
    elif known != total:
        raise InvalidArgumentError(
            f"Input to reshape is a tensor with {total} dense values, but the requested shape has {known}. "
            f"input_shape={shape_text(st.dense_shape)} output_shape={shape_text(new)}\n"
            f"({api}: Fix: keep the number of elements, or use -1 for one dimension.)")
    out_shape = np.array(new, dtype=np.int64)
    if st.indices.shape[0] == 0:
        return SparseTensor(np.zeros((0, len(new)), np.int64), st.values, out_shape)
    linear = np.ravel_multi_index(tuple(st.indices.T), tuple(st.dense_shape.tolist()))
    indices = np.stack(np.unravel_index(linear, tuple(new)), axis=1).astype(np.int64)
    return SparseTensor(indices, st.values, out_shape)


def concat(axis: Any, sp_inputs: Any, expand_nonconcat_dims: bool = False, name: str | None = None) -> SparseTensor:
    """Concatenates sparse tensors along ``axis`` (``tf.sparse.concat``).

    Args:
      axis: the dimension to join along (negative counts from the end).
      sp_inputs: a list of `SparseTensor` of one rank.
      expand_nonconcat_dims: let the other dimensions differ; the result takes their maximum.
      name: ignored.

    Raises:
      InvalidArgumentError: other dimensions differ without ``expand_nonconcat_dims``.
    """
    api = "tps.sparse.concat"
    sts = [as_sparse(s, api, "sp_inputs") for s in sp_inputs]
    if not sts:
        raise ValueError(f"{api}: `sp_inputs` is empty.\nFix: pass at least one SparseTensor.")
    if len(sts) == 1:  # TensorFlow returns a single input as it is, whatever the axis
        return sts[0]
    rank = sts[0].dense_shape.size
    for pos, s in enumerate(sts[1:], 1):
        if s.dense_shape.size != rank:
            raise ValueError(
                f"{api}: input {pos} has rank {s.dense_shape.size} but input 0 has rank {rank}; sparse tensors "
                "concatenate only with one rank.\nFix: tps.sparse.expand_dims or reshape the inputs to one rank.")
    if not -rank <= int(axis) < rank:
        raise InvalidArgumentError(f"Concat dimension must be in range [{-rank}, {rank}), got {int(axis)}\n"
                                   f"({api}: Fix: pass an axis of the inputs.)")
    a = int(axis) % rank
    shapes = np.stack([s.dense_shape for s in sts])
    out_shape = shapes.max(axis=0) if expand_nonconcat_dims else shapes[0].copy()
    for pos, s in enumerate(sts[1:], 1):
        for d in range(rank):
            if d != a and not expand_nonconcat_dims and s.dense_shape[d] != shapes[0][d]:
                raise InvalidArgumentError(
                    f"Input shapes must match: expected {shapes[0][d]} for dimension {d} but got "
                    f"{s.dense_shape[d]} at position {pos}\n({api}: Fix: give the inputs equal sizes outside the "
                    "concat axis, or pass expand_nonconcat_dims=True.)")
    offsets = np.concatenate([[0], np.cumsum(shapes[:, a])])
    out_shape[a] = offsets[-1]
    parts = []
    for s, off in zip(sts, offsets):
        idx = s.indices.copy()
        idx[:, a] += off
        parts.append(idx)
    indices = np.concatenate(parts).astype(np.int64)
    values = np.concatenate([s.values for s in sts])
    return _sorted(indices, values, out_shape.astype(np.int64))


def slice(sp_input: Any, start: Any, size: Any, name: str | None = None) -> SparseTensor:  # noqa: A001
    """The entries inside ``[start, start + size)``, shifted to start at 0 (``tf.sparse.slice``).

    The result's shape is ``size`` cut at the input's end.
    """
    api = "tps.sparse.slice"
    st = as_sparse(sp_input, api)
    begin = np.asarray(start, dtype=np.int64).reshape(-1)
    extent = np.asarray(size, dtype=np.int64).reshape(-1)
    for arg, vec in (("start", begin), ("size", extent)):
        if vec.size != st.dense_shape.size:
            raise InvalidArgumentError(
                f"Expected {arg} to be a vector of length {st.dense_shape.size} but got length {vec.size}\n"
                f"({api}: Fix: give one {arg} per dimension of dense_shape {st.dense_shape.tolist()}.)")
    end = np.minimum(begin + extent, st.dense_shape)
    keep = ((st.indices >= begin) & (st.indices < end)).all(axis=1)
    shape = np.maximum(end - begin, 0)
    return SparseTensor(st.indices[keep] - begin, st.values[keep], shape.astype(np.int64))


def split(sp_input: Any = None, num_split: Any = None, axis: Any = None, name: str | None = None) -> list[SparseTensor]:
    """``num_split`` sparse tensors along ``axis``; the first ``size % num_split`` get one more (``tf.sparse.split``)."""
    api = "tps.sparse.split"
    for arg, value in (("sp_input", sp_input), ("num_split", num_split), ("axis", axis)):
        if value is None:
            raise ValueError(f"{arg} is required\n({api}: Fix: e.g. split(sp_input=st, num_split=2, axis=0).)")
    st = as_sparse(sp_input, api)
    k = int(num_split)
    rank = st.dense_shape.size
    if np.ndim(axis) != 0:
        raise InvalidArgumentError(f"axis should be a scalar but received shape {list(np.shape(axis))}\n"
                                   f"({api}: Fix: pass one axis.)")
    if not -rank <= int(axis) < rank:
        raise InvalidArgumentError(f"axis should be in range [{-rank}, {rank}), got {int(axis)}\n"
                                   f"({api}: Fix: pass an axis of sp_input.)")
    a = int(axis) % rank
    outside = ((st.indices < 0) | (st.indices >= st.dense_shape)).any(axis=1) if st.indices.size else []
    if np.any(outside):
        i = int(np.nonzero(outside)[0][0])
        raise InvalidArgumentError(f"Index {st.indices[i].tolist()} at position {i} is out of bounds for dense_shape "
                                   f"{st.dense_shape.tolist()}\n({api}: Fix: keep every index inside dense_shape.)")
    size = int(st.dense_shape[a])
    if not 1 <= k <= size:
        raise InvalidArgumentError(
            f"Input num_split should be between 1 and the splitting dimension size ({size}), got {k}\n"
            f"({api}: Fix: split into at most {size} pieces.)")
    base, extra = divmod(size, k)
    out, begin = [], 0
    for i in range(k):
        width = base + (1 if i < extra else 0)
        start = np.zeros(st.dense_shape.size, np.int64)
        start[a] = begin
        extent = st.dense_shape.copy()
        extent[a] = width
        out.append(slice(st, start, extent))
        begin += width
    return out


def transpose(sp_input: Any, perm: Any = None, name: str | None = None) -> SparseTensor:
    """The dimensions permuted by ``perm`` (default: reversed), entries in row-major order (``tf.sparse.transpose``)."""
    st = as_sparse(sp_input, "tps.sparse.transpose")
    rank = st.dense_shape.size
    order = list(range(rank - 1, -1, -1)) if perm is None else [int(p) for p in np.asarray(perm).reshape(-1)]
    if sorted(order) != list(range(rank)):
        raise InvalidArgumentError(f"tps.sparse.transpose: perm {order} is not a permutation of 0..{rank - 1}.\n"
                                   "Fix: list every dimension once.")
    return _sorted(st.indices[:, order], st.values, st.dense_shape[order])


def expand_dims(sp_input: Any, axis: Any = None, name: str | None = None) -> SparseTensor:
    """A size-1 dimension inserted at ``axis`` (``tf.sparse.expand_dims``)."""
    api = "tps.sparse.expand_dims"
    st = as_sparse(sp_input, api)
    rank = st.dense_shape.size
    a = int(axis if axis is not None else 0)
    if not -(rank + 1) <= a <= rank:
        raise InvalidArgumentError(f"{api}: axis {a} is out of range for rank {rank}; it must be in "
                                   f"[{-(rank + 1)}, {rank}].\nFix: pass a valid axis.")
    a = a % (rank + 1)
    indices = np.insert(st.indices, a, 0, axis=1)
    return SparseTensor(indices.astype(np.int64), st.values, np.insert(st.dense_shape, a, 1).astype(np.int64))


def reset_shape(sp_input: Any, new_shape: Any = None) -> SparseTensor:
    """The same entries with dense shape ``new_shape`` (None: the tightest shape) (``tf.sparse.reset_shape``).

    Raises:
      ValueError: ``new_shape`` is smaller than ``dense_shape`` in a dimension, or of another rank.
    """
    api = "tps.sparse.reset_shape"
    st = as_sparse(sp_input, api)
    tight = st.indices.max(axis=0) + 1 if st.indices.shape[0] else np.zeros(st.dense_shape.size, np.int64)
    if new_shape is None:
        return SparseTensor(st.indices, st.values, tight.astype(np.int64))
    shape = np.asarray(new_shape, dtype=np.int64).reshape(-1)
    if shape.size != st.dense_shape.size:
        raise ValueError(f"Dimensions {st.dense_shape.size} and {shape.size} are not compatible\n"
                         f"({api}: new_shape {shape.tolist()} must have rank {st.dense_shape.size}.)")
    if (shape < st.dense_shape).any():
        raise ValueError(
            "Requested new_shape should have dimension sizes >= sp_input.shape.  Found new_shape "
            f"({shape.tolist()}), sp_input.shape ({st.dense_shape.tolist()}).\n"
            f"({api}: Fix: pass a shape at least dense_shape in every dimension, or None for the tightest.)")
    return SparseTensor(st.indices, st.values, shape)
