"""Sparse arithmetic: ``add``, ``maximum``, ``minimum``, ``reduce_sum``, ``reduce_max``,
``softmax``, ``sparse_dense_matmul``, ``retain``, ``fill_empty_rows``, ``eye``,
``map_values`` and the ``segment_*`` reductions.

Entries present in one operand only are taken as they are (a missing entry is
0); results come in row-major order, as TensorFlow's kernels give them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.sparse.convert import to_dense
from tpustrategy._src.sparse.tensor import SparseTensor, as_sparse, sort_order, tf_type_name


def _is_sparse(value: Any) -> bool:
    return all(hasattr(value, f) for f in ("indices", "values", "dense_shape"))


def _union(a: SparseTensor, b: SparseTensor, api: str) -> tuple[np.ndarray, list[Any], list[Any]]:
    """Sorted union of indices, and each operand's value there (None where absent)."""
    if a.dense_shape.size != b.dense_shape.size:
        shapes = " ".join(map(str, a.dense_shape.tolist())), " ".join(map(str, b.dense_shape.tolist()))
        raise InvalidArgumentError(f"Operands do not have the same ranks; got shapes: {shapes[0]} and {shapes[1]}\n"
                                   f"({api}: Fix: give both operands one dense_shape.)")
    if (a.dense_shape != b.dense_shape).any():
        for d, (x, y) in enumerate(zip(a.dense_shape.tolist(), b.dense_shape.tolist())):
            if x != y:
                raise InvalidArgumentError(f"Operands' shapes do not match: got {x} and {y} for dimension {d}\n"
                                           f"({api}: Fix: give both operands one dense_shape.)")
        raise InvalidArgumentError(f"{api}: operands have ranks {a.dense_shape.size} and {b.dense_shape.size}.\n"
                                   "Fix: give both operands one dense_shape.")
    table: dict[tuple[int, ...], list[Any]] = {}
    for i, key in enumerate(map(tuple, a.indices.tolist())):
        table.setdefault(key, [None, None])[0] = a.values[i]
    for i, key in enumerate(map(tuple, b.indices.tolist())):
        table.setdefault(key, [None, None])[1] = b.values[i]
    keys = sorted(table)
    indices = np.array(keys, dtype=np.int64).reshape(len(keys), a.dense_shape.size)
    return indices, [table[k][0] for k in keys], [table[k][1] for k in keys]


def add(a: Any, b: Any, threshold: Any = 0) -> Any:
    """Sum of two sparse tensors, or of a sparse and a dense one (``tf.sparse.add``).

    Args:
      a, b: `SparseTensor` or dense arrays (at least one sparse).
      threshold: for two sparse operands, a sum of two entries whose magnitude is below it is dropped.

    Returns:
      A `SparseTensor` for two sparse operands, else a dense array.
    """
    api = "tps.sparse.add"
    if _is_sparse(a) and _is_sparse(b):
        sa, sb = as_sparse(a, api, "a"), as_sparse(b, api, "b")
        indices, va, vb = _union(sa, sb, api)
        dtype = np.result_type(sa.values, sb.values)
        keep, values = [], []
        for x, y in zip(va, vb):
            both = x is not None and y is not None
            v = (x if y is None else y if x is None else x + y)
            keep.append(not both or abs(v) >= threshold)
            values.append(v)
        keep_arr = np.array(keep, dtype=bool)
        return SparseTensor(indices[keep_arr], np.array(values, dtype=dtype)[keep_arr], sa.dense_shape)
    if _is_sparse(a) or _is_sparse(b):
        sp, dense = (a, b) if _is_sparse(a) else (b, a)
        st = as_sparse(sp, api)
        out = np.array(dense, dtype=st.values.dtype, copy=True)
        for d in range(st.indices.shape[1]):
            bad = np.nonzero((st.indices[:, d] < 0) | (st.indices[:, d] >= out.shape[d]))[0]
            if bad.size:
                i = int(bad[0])
                raise InvalidArgumentError(
                    f"Sparse tensor has an invalid index on dimension {d}: a_indices({i},{d}) = "
                    f"{int(st.indices[i, d])}, dense tensor shape: {' '.join(map(str, out.shape))}\n"
                    f"({api}: Fix: keep the sparse indices inside the dense operand's shape.)")
        np.add.at(out, tuple(st.indices.T), st.values)
        return out
    raise TypeError(f"{api}: at least one of `a`, `b` must be a SparseTensor; received {type(a).__name__} and "
                    f"{type(b).__name__}.\nFix: add dense arrays with +.")


def _elementwise(sp_a: Any, sp_b: Any, fn: Any, api: str) -> SparseTensor:
    a, b = as_sparse(sp_a, api, "sp_a"), as_sparse(sp_b, api, "sp_b")
    indices, va, vb = _union(a, b, api)
    dtype = np.result_type(a.values, b.values)
    zero = np.zeros((), dtype)[()]
    values = np.array([fn(zero if x is None else x, zero if y is None else y) for x, y in zip(va, vb)], dtype=dtype)
    return SparseTensor(indices, values, a.dense_shape)


def maximum(sp_a: Any, sp_b: Any, name: str | None = None) -> SparseTensor:
    """Element-wise maximum over the union of entries, missing ones as 0 (``tf.sparse.maximum``)."""
    return _elementwise(sp_a, sp_b, max, "tps.sparse.maximum")


def minimum(sp_a: Any, sp_b: Any, name: str | None = None) -> SparseTensor:
    """Element-wise minimum over the union of entries, missing ones as 0 (``tf.sparse.minimum``)."""
    return _elementwise(sp_a, sp_b, min, "tps.sparse.minimum")


def _axes(axis: Any, rank: int, api: str) -> list[int]:
    if axis is None:
        return list(range(rank))
    out = set()
    for a in np.asarray(axis).reshape(-1).tolist():
        if not -rank <= int(a) < rank:
            raise InvalidArgumentError(f"Invalid reduction dimension {int(a)}, for input with {rank} dimensions.\n"
                                       f"({api}: Fix: pass axes in [-{rank}, {rank}).)")
        out.add(int(a) % rank)
    return sorted(out)


def _reduce(sp_input: Any, axis: Any, keepdims: Any, output_is_sparse: bool, ufunc: Any, api: str) -> Any:
    st = as_sparse(sp_input, api)
    rank = st.dense_shape.size
    axes = _axes(axis, rank, api)
    kept = [d for d in range(rank) if d not in axes]
    groups: dict[tuple[int, ...], Any] = {}
    for key, v in zip(map(tuple, st.indices[:, kept].tolist()), st.values.tolist()):
        groups[key] = v if key not in groups else ufunc(groups[key], v)
    out_shape = [int(st.dense_shape[d]) for d in kept]
    keys = sorted(groups)
    if keepdims:
        out_shape = [1 if d in axes else int(st.dense_shape[d]) for d in range(rank)]
        keys_full = [tuple(0 if d in axes else k[kept.index(d)] for d in range(rank)) for k in keys]
    else:
        keys_full = keys
    values = np.array([groups[k] for k in keys], dtype=st.values.dtype)
    indices = np.array(keys_full, dtype=np.int64).reshape(len(keys), len(out_shape))
    if output_is_sparse:
        return SparseTensor(indices, values, np.array(out_shape, dtype=np.int64))
    out = np.zeros(out_shape, dtype=st.values.dtype)
    if len(keys) and out.ndim == 0:
        return values[0]
    if len(keys):
        out[tuple(indices.T)] = values
    return out[()] if out.ndim == 0 else out


def reduce_sum(sp_input: Any, axis: Any = None, keepdims: Any = None, output_is_sparse: bool = False,
               name: str | None = None) -> Any:
    """Sum of the entries along ``axis`` (``tf.sparse.reduce_sum``); dense unless ``output_is_sparse``."""
    return _reduce(sp_input, axis, keepdims, output_is_sparse, lambda x, y: x + y, "tps.sparse.reduce_sum")


def reduce_max(sp_input: Any, axis: Any = None, keepdims: Any = None, output_is_sparse: bool = False,
               name: str | None = None) -> Any:
    """Maximum of the present entries along ``axis`` (``tf.sparse.reduce_max``).

    Missing entries do not take part (a group of only negative entries gives a negative
    maximum); a group without entries gives 0 in the dense result.
    """
    return _reduce(sp_input, axis, keepdims, output_is_sparse, max, "tps.sparse.reduce_max")


def softmax(sp_input: Any, name: str | None = None) -> SparseTensor:
    """Softmax over the present entries of each innermost row (``tf.sparse.softmax``)."""
    st = as_sparse(sp_input, "tps.sparse.softmax")
    out = np.empty(st.values.shape, dtype=st.values.dtype)
    rows: dict[tuple[int, ...], list[int]] = {}
    for i, key in enumerate(map(tuple, st.indices[:, :-1].tolist())):
        rows.setdefault(key, []).append(i)
    for members in rows.values():
        v = st.values[members]
        e = np.exp(v - v.max())
        out[members] = e / e.sum()
    return SparseTensor(st.indices, out, st.dense_shape)


def sparse_dense_matmul(sp_a: Any, b: Any, adjoint_a: bool = False, adjoint_b: bool = False,
                        name: str | None = None) -> np.ndarray:
    """``sp_a @ b`` with a sparse ``sp_a`` (``tf.sparse.sparse_dense_matmul``); either may be adjointed."""
    api = "tps.sparse.sparse_dense_matmul"
    a = to_dense(as_sparse(sp_a, api, "sp_a"), validate_indices=False)
    dense = np.asarray(b)
    if adjoint_a:
        a = np.conj(a.T)
    if adjoint_b:
        dense = np.conj(dense.T)
    if a.shape[1] != dense.shape[0]:
        raise InvalidArgumentError(f"Cannot multiply A and B because inner dimension does not match: {a.shape[1]} vs. "
                                   f"{dense.shape[0]}.\n({api}: Fix: check the shapes and adjoint_a / adjoint_b.)")
    product: np.ndarray = (a @ dense).astype(np.result_type(a, dense))
    return product


def retain(sp_input: Any, to_retain: Any) -> SparseTensor:
    """The entries where ``to_retain`` (a bool vector, one per entry) is True (``tf.sparse.retain``)."""
    api = "tps.sparse.retain"
    st = as_sparse(sp_input, api)
    keep = np.asarray(to_retain)
    if keep.shape != st.values.shape or keep.dtype != bool:
        raise ValueError(f"Dimensions {st.values.shape[0]} and {keep.size} are not compatible\n"
                         f"({api}: to_retain must be a bool vector of length {st.values.shape[0]} (one per entry); "
                         f"received {keep.dtype} of shape {list(keep.shape)}.\nFix: e.g. st.values > 0.")
    return SparseTensor(st.indices[keep], st.values[keep], st.dense_shape)


def fill_empty_rows(sp_input: Any, default_value: Any, name: str | None = None) -> tuple[SparseTensor, np.ndarray]:
    """Adds ``[row, 0, ...] = default_value`` to each row without entries (``tf.sparse.fill_empty_rows``).

    Returns:
      The filled `SparseTensor` (row-major order) and a bool vector: True for the rows that were empty.
    """
    st = as_sparse(sp_input, "tps.sparse.fill_empty_rows")
    rows = int(st.dense_shape[0])
    for i, r in enumerate(st.indices[:, 0].tolist()):
        if not 0 <= r < rows:
            raise InvalidArgumentError(f"indices({i}, 0) is invalid: {r} >= {rows}\n(tps.sparse.fill_empty_rows: "
                                       "Fix: keep every row index within dense_shape[0].)")
    empty = np.ones(rows, dtype=bool)
    empty[st.indices[:, 0]] = False
    extra = np.zeros((int(empty.sum()), st.dense_shape.size), dtype=np.int64)
    extra[:, 0] = np.nonzero(empty)[0]
    indices = np.concatenate([st.indices, extra])
    if st.values.dtype == object and isinstance(default_value, str):
        default_value = default_value.encode("utf-8")
    fill = np.empty(extra.shape[0], dtype=st.values.dtype)
    fill[...] = default_value
    values = np.concatenate([st.values, fill])
    order = sort_order(indices[:, :1])
    return SparseTensor(indices[order], values[order], st.dense_shape), empty


def eye(num_rows: Any, num_columns: Any = None, dtype: Any = np.float32, name: str | None = None) -> SparseTensor:
    """A sparse identity matrix ``[num_rows, num_columns]`` (``tf.sparse.eye``)."""
    rows = int(num_rows)
    cols = rows if num_columns is None else int(num_columns)
    n = min(rows, cols)
    indices = np.stack([np.arange(n), np.arange(n)], axis=1).astype(np.int64)
    dt = np.dtype(getattr(dtype, "as_numpy_dtype", dtype))
    return SparseTensor(indices, np.ones(n, dtype=dt), np.array([rows, cols], dtype=np.int64))


def map_values(op: Any, *args: Any, **kwargs: Any) -> SparseTensor:
    """``op`` applied to the values of the sparse arguments, which must share indices (``tf.sparse.map_values``)."""
    api = "tps.sparse.map_values"
    found: list[SparseTensor] = []

    def swap(x: Any) -> Any:
        if _is_sparse(x):
            st = as_sparse(x, api)
            found.append(st)
            return st.values
        return x

    new_args = [swap(a) for a in args]
    new_kwargs = {k: swap(v) for k, v in kwargs.items()}
    if not found:
        raise ValueError(f"{api}: no argument is a SparseTensor.\nFix: pass at least one SparseTensor to map over.")
    first = found[0]
    for other in found[1:]:
        if other.indices.shape != first.indices.shape or (other.indices != first.indices).any():
            raise InvalidArgumentError(f"{api}: the SparseTensor arguments have different indices.\n"
                                       "Fix: map over sparse tensors with identical indices.")
    return SparseTensor(first.indices, np.asarray(op(*new_args, **new_kwargs)), first.dense_shape)


def _segments(data: Any, indices: Any, segment_ids: Any, num_segments: Any, how: str) -> np.ndarray:
    x = np.asarray(data)
    rows = np.asarray(indices, dtype=np.int64).reshape(-1)
    seg = np.asarray(segment_ids, dtype=np.int64).reshape(-1)
    if rows.shape != seg.shape:
        raise InvalidArgumentError(f"tps.sparse.segment_{how}: indices and segment_ids must have one length; received "
                                   f"{rows.size} and {seg.size}.\nFix: give one segment id per index.")
    k = int(num_segments) if num_segments is not None else (int(seg.max()) + 1 if seg.size else 0)
    out = np.zeros((k, *x.shape[1:]), dtype=x.dtype)
    np.add.at(out, seg, x[rows])
    if how != "sum":
        counts = np.bincount(seg, minlength=k).astype(x.dtype).reshape(-1, *([1] * (x.ndim - 1)))
        scale = counts if how == "mean" else np.sqrt(counts)
        out = np.where(counts > 0, out / np.where(scale > 0, scale, 1), 0).astype(x.dtype)
    return out


def bincount(values: Any, weights: Any = None, axis: Any = 0, minlength: Any = None, maxlength: Any = None,
             binary_output: bool = False, name: str | None = None) -> SparseTensor:
    """Counts of each int value, as a `SparseTensor` of the non-empty bins (``tf.sparse.bincount``).

    Args:
      values: int32 / int64 values, dense or a `SparseTensor` (its entries only).
      weights: None, or weights of ``values``'s form: sums of weights instead of counts.
      axis: 0 counts over everything (result ``[size]``); -1 counts each row (result ``[rows, size]``).
      minlength: the least number of bins.
      maxlength: the most number of bins; larger values are dropped.
      binary_output: 1 for each non-empty bin instead of its count.
      name: ignored.

    Returns:
      A `SparseTensor`, bins in order, with ``size = max(max(values) + 1, minlength)`` cut at ``maxlength``.

    Raises:
      InvalidArgumentError: a negative value, or values that are not int32 / int64.
      ValueError: ``axis`` other than 0 or -1.
    """
    api = "tps.sparse.bincount"
    axis = 0 if axis is None else int(axis)
    if axis not in (0, -1):
        raise ValueError(f"Unsupported value for argument axis={axis}. Only 0 and -1 are currently supported.\n"
                         f"({api}: Fix: axis=0 counts all values, axis=-1 each row.)")
    if _is_sparse(values):
        st = as_sparse(values, api, "values")
        flat = st.values
        rows = st.indices[:, 0] if axis == -1 else np.zeros(flat.shape[0], np.int64)
        nrows = int(st.dense_shape[0]) if st.dense_shape.size else 1
        w = None if weights is None else np.asarray(as_sparse(weights, api, "weights").values)
    else:
        arr = np.asarray(values)
        flat = arr.reshape(-1)
        if axis == -1 and arr.ndim >= 2:
            nrows = int(np.prod(arr.shape[:-1]))
            rows = np.repeat(np.arange(nrows), arr.shape[-1])
        else:
            nrows, rows = 1, np.zeros(flat.shape[0], np.int64)
        w = None if weights is None else np.asarray(weights).reshape(-1)
    if flat.dtype.name not in ("int32", "int64"):
        raise InvalidArgumentError(f"Value for attr 'T' of {tf_type_name(flat.dtype)} is not in the list of allowed values: "
                                   f"int32, int64\n({api}: Fix: cast the values to int32 or int64.)")
    if flat.size and flat.min() < 0:
        raise InvalidArgumentError(f"Input values must all be non-negative\n({api}: Fix: shift or drop "
                                   "negative ids first.)")
    size = max(int(flat.max()) + 1 if flat.size else 0, int(minlength or 0))
    if maxlength is not None:
        size = min(size, int(maxlength))
    out_dtype = w.dtype if w is not None else flat.dtype
    bins: dict[tuple[int, int], Any] = {}
    for i, (r, v) in enumerate(zip(rows.tolist(), flat.tolist())):
        if v < size:
            bins[(r, v)] = bins.get((r, v), 0) + (1 if w is None else w[i])
    keys = sorted(bins)
    counts = np.array([1 if binary_output else bins[k] for k in keys], dtype=out_dtype)
    if axis == -1 and (not _is_sparse(values) and np.ndim(values) >= 2 or _is_sparse(values)):
        indices = np.array(keys, dtype=np.int64).reshape(len(keys), 2)
        shape = np.array([nrows, size], dtype=np.int64)
    else:
        indices = np.array([k[1] for k in keys], dtype=np.int64).reshape(len(keys), 1)
        shape = np.array([size], dtype=np.int64)
    return SparseTensor(indices, counts, shape)


def segment_sum(data: Any, indices: Any, segment_ids: Any, num_segments: Any = None, name: str | None = None,
                sparse_gradient: bool = False) -> Any:
    """Sums of ``data[indices]`` per segment (``tf.sparse.segment_sum``).

    ``sparse_gradient`` is accepted and ignored (no gradients flow through input-pipeline ops).
    """
    return _segments(data, indices, segment_ids, num_segments, "sum")


def segment_mean(data: Any, indices: Any, segment_ids: Any, num_segments: Any = None, name: str | None = None,
                sparse_gradient: bool = False) -> Any:
    """Means of ``data[indices]`` per segment (``tf.sparse.segment_mean``).

    ``sparse_gradient`` is accepted and ignored (no gradients flow through input-pipeline ops).
    """
    return _segments(data, indices, segment_ids, num_segments, "mean")


def segment_sqrt_n(data: Any, indices: Any, segment_ids: Any, num_segments: Any = None, name: str | None = None,
                   sparse_gradient: bool = False) -> Any:
    """Sums of ``data[indices]`` per segment divided by the square root of its size (``tf.sparse.segment_sqrt_n``).

    ``sparse_gradient`` is accepted and ignored (no gradients flow through input-pipeline ops).
    """
    return _segments(data, indices, segment_ids, num_segments, "sqrt_n")
