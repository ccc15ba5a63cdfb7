"""Element structures: nesting, `TensorSpec`, conversion and stacking.

A dataset element is a nest of leaves. Tuples (including namedtuples) and dicts
are structure, as in ``tf.data``; everything else is a leaf: a NumPy array, a
NumPy scalar or a Python ``bytes`` string. Dict keys are visited in sorted
order, like ``tf.nest``. This module holds the small helpers every
transformation shares: flattening, rebuilding, describing leaves with a
`TensorSpec`, converting user constants the way TensorFlow converts them
(Python ``int`` -> int32, ``float`` -> float32, ``str`` -> ``bytes``) and
stacking elements into a batch (strings become object arrays of ``bytes``,
never the ``'S'`` dtype, which drops trailing zero bytes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpustrategy._src.sparse.batching import (
    batch_rows,
    batch_sparse,
    concat_sparse_batches,
    is_sparse,
    slice_rows,
    unbatch_rows,
)

OBJECT = np.dtype(object)
_BYTES_ONLY = {bytes}


def _all_bytes(items: Sequence[Any]) -> bool:
    """Whether every item is ``bytes`` (or a subclass): one C-level pass over the types first."""
    return set(map(type, items)) == _BYTES_ONLY or all(isinstance(x, bytes) for x in items)

_DTYPE_NAMES = {"string": OBJECT, "str": OBJECT, "bytes": OBJECT, "object": OBJECT}


def is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_structure(x: Any) -> bool:
    """Whether ``x`` is a tuple, namedtuple or dict (not a leaf)."""
    return isinstance(x, (tuple, dict))


def flatten(x: Any) -> list[Any]:
    """The leaves of ``x`` in ``tf.nest`` order (dict keys sorted)."""
    if isinstance(x, tuple):
        out: list[Any] = []
        for v in x:
            out.extend(flatten(v))
        return out
    if isinstance(x, dict):
        out = []
        for k in sorted(x):
            out.extend(flatten(x[k]))
        return out
    return [x]


def flatten_with_paths(x: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Leaves of ``x`` with a readable path such as ``[0]['image']``."""
    if isinstance(x, tuple):
        out: list[tuple[str, Any]] = []
        for i, v in enumerate(x):
            out.extend(flatten_with_paths(v, f"{prefix}[{i}]"))
        return out
    if isinstance(x, dict):
        out = []
        for k in sorted(x):
            out.extend(flatten_with_paths(x[k], f"{prefix}[{k!r}]"))
        return out
    return [(prefix, x)]


def unflatten_as(template: Any, leaves: Sequence[Any]) -> Any:
    """Rebuilds the nesting of ``template`` around ``leaves``."""
    it = iter(leaves)
    out = _unflatten(template, it)
    return out


def _unflatten(t: Any, it: Any) -> Any:
    if isinstance(t, tuple):
        vals = [_unflatten(v, it) for v in t]
        return type(t)(*vals) if is_namedtuple(t) else tuple(vals)
    if isinstance(t, dict):
        new = {k: _unflatten(t[k], it) for k in sorted(t)}
        return type(t)((k, new[k]) for k in t) if type(t) is not dict else {k: new[k] for k in t}
    return next(it)


def same_structure(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` nest the same way (leaves are not compared)."""
    if isinstance(a, tuple):
        return (
            isinstance(b, tuple)
            and is_namedtuple(a) == is_namedtuple(b)
            and len(a) == len(b)
            and all(same_structure(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, dict):
        return isinstance(b, dict) and sorted(a) == sorted(b) and all(same_structure(a[k], b[k]) for k in a)
    return not is_structure(b)


def map_structure(fn: Callable[..., Any], first: Any, *rest: Any) -> Any:
    """Applies ``fn`` leaf-wise; all arguments must nest like ``first``."""
    leaves = [flatten(first)] + [flatten(r) for r in rest]
    return unflatten_as(first, [fn(*xs) for xs in zip(*leaves)])


def as_dtype(dtype: Any) -> np.dtype:
    """A NumPy dtype from a dtype, a type or a name (``"string"`` -> object)."""
    if isinstance(dtype, str) and dtype.lower() in _DTYPE_NAMES:
        return OBJECT
    if dtype is bytes or dtype is str:
        return OBJECT
    out = np.dtype(dtype)
    # np.bytes_ / np.str_ / "S" / "U": strings are Python bytes here (object arrays).
    return OBJECT if out.kind in "SU" else out


@dataclasses.dataclass(frozen=True, init=False)
class TensorSpec:
    """The type of one leaf of a dataset element (``tf.TensorSpec``).

    Attributes:
      shape: a tuple of dimensions; ``None`` marks a dimension of unknown size.
      dtype: a NumPy dtype; ``np.dtype(object)`` for strings (Python ``bytes``).
      name: an optional name.
    """

    shape: tuple[int | None, ...]
    dtype: np.dtype
    name: str | None

    def __init__(self, shape: Sequence[int | None] | None, dtype: Any = np.float32, name: str | None = None):
        if shape is None:
            raise TypeError(
                "TensorSpec: shape=None (unknown rank) is not supported.\n"
                "Fix: give the rank, with None for unknown dimensions, e.g. shape=(None,)."
            )
        dims = tuple(None if d is None or (isinstance(d, int) and d < 0) else int(d) for d in shape)
        object.__setattr__(self, "shape", dims)
        object.__setattr__(self, "dtype", as_dtype(dtype))
        object.__setattr__(self, "name", name)

    def __repr__(self) -> str:
        dt = "string" if self.dtype == OBJECT else self.dtype.name
        return f"TensorSpec(shape={self.shape}, dtype={dt}, name={self.name!r})"

    def is_compatible_with(self, value: Any) -> bool:
        """Whether ``value`` (a leaf or a spec) fits this spec's dtype and shape."""
        other = value if isinstance(value, TensorSpec) else spec_of(value)
        if other.dtype != self.dtype or len(other.shape) != len(self.shape):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self.shape, other.shape))

    def most_specific_common(self, other: TensorSpec) -> TensorSpec | None:
        """The spec both fit, or None when dtype or rank differ."""
        if other.dtype != self.dtype or len(other.shape) != len(self.shape):
            return None
        return TensorSpec(tuple(a if a == b else None for a, b in zip(self.shape, other.shape)), self.dtype)

    def _batch(self, size: int | None) -> TensorSpec:
        return TensorSpec((size, *self.shape), self.dtype)

    def _unbatch(self) -> TensorSpec:
        return TensorSpec(self.shape[1:], self.dtype)


def spec_of(leaf: Any) -> TensorSpec:
    """The `TensorSpec` of one concrete leaf."""
    if isinstance(leaf, bytes):
        return TensorSpec((), OBJECT)
    if isinstance(leaf, (np.ndarray, np.generic)):
        return TensorSpec(leaf.shape, leaf.dtype)
    arr = to_numpy(leaf)
    return TensorSpec(arr.shape, arr.dtype)


def spec_of_element(element: Any) -> Any:
    """The nest of `TensorSpec` describing one concrete element."""
    return map_structure(spec_of, element)


def _fit_python_number(arr: np.ndarray) -> np.ndarray:
    # TensorFlow converts Python ints to int32 (int64 when they do not fit)
    # and Python floats to float32.
    if arr.dtype == np.int64:
        if arr.size == 0 or (arr.min() >= -(2**31) and arr.max() < 2**31):
            return arr.astype(np.int32)
        return arr
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    return arr


def _strings_to_object(arr: np.ndarray) -> np.ndarray:
    out = np.empty(arr.shape, dtype=OBJECT)
    flat = out.reshape(-1)
    for i, v in enumerate(arr.reshape(-1).tolist()):
        flat[i] = v.encode("utf-8") if isinstance(v, str) else bytes(v)
    return out


def to_numpy(value: Any) -> Any:
    """Converts a user constant leaf the way ``tf.convert_to_tensor`` would.

    Returns ``bytes`` for a string scalar and a NumPy array (or NumPy scalar)
    otherwise. NumPy inputs keep their dtype, except string dtypes, which
    become object arrays of ``bytes``.
    """
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, np.generic):
        if isinstance(value, (np.str_, np.bytes_)):
            return value.encode("utf-8") if isinstance(value, np.str_) else bytes(value)
        return value
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "US":
            return _strings_to_object(value)
        if value.dtype == OBJECT:
            return _strings_to_object(value)
        return np.array(value, copy=True)
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int32(value) if -(2**31) <= value < 2**31 else np.int64(value)
    if isinstance(value, float):
        return np.float32(value)
    if isinstance(value, (list, tuple)) or hasattr(value, "__array__"):
        from_python = isinstance(value, (list, tuple))
        try:
            arr = np.asarray(value)
        except ValueError as e:
            strings = _bytes_subclass_array(value) if from_python else None
            if strings is not None:
                return strings
            raise ValueError(
                f"Could not convert a ragged Python list to a tensor: {e}.\n"
                "Fix: give every row the same length, or pad the rows first."
            ) from None
        if arr.dtype.kind in "USO":
            if from_python:
                # NumPy's 'S' dtype drops trailing zero bytes: keep the objects.
                arr = np.asarray(value, dtype=OBJECT)
            return _strings_to_object(arr)
        return _fit_python_number(arr) if from_python else arr
    raise TypeError(
        f"Cannot convert a value of type {type(value).__name__} to a dataset element: {value!r}.\n"
        "Fix: use NumPy arrays, Python numbers, bytes/str, or tuples/dicts of these."
    )


def _bytes_subclass_array(value: Any) -> np.ndarray | None:
    """An object array of a nested list of ``bytes`` subclasses (NumPy parses those as numbers)."""
    try:
        arr = np.asarray(value, dtype=OBJECT)
    except ValueError:
        return None
    if arr.size and _all_bytes(arr.reshape(-1).tolist()):
        return _strings_to_object(arr)
    return None


def element_to_numpy(value: Any) -> Any:
    """Converts every leaf of a user constant structure with `to_numpy`."""
    if isinstance(value, tuple):
        vals = [element_to_numpy(v) for v in value]
        return type(value)(*vals) if is_namedtuple(value) else tuple(vals)
    if isinstance(value, dict):
        return type(value)((k, element_to_numpy(v)) for k, v in value.items())
    return to_numpy(value)


def make_readonly(value: Any) -> Any:
    """Marks every array leaf read-only so yielded views cannot corrupt the source."""
    for leaf in flatten(value):
        if isinstance(leaf, np.ndarray):
            leaf.flags.writeable = False
    return value


def _shape_of(leaf: Any) -> tuple[int, ...]:
    if isinstance(leaf, bytes):
        return ()
    return np.shape(leaf)


def stack_leaves(leaves: Sequence[Any], api: str, path: str = "") -> np.ndarray:
    """Stacks one component of ``len(leaves)`` elements into a batch array.

    Raises:
      ValueError: when the components have different shapes (naming the
        first element and the first mismatching one).
    """
    first = leaves[0]
    if isinstance(first, bytes):
        out = np.empty(len(leaves), dtype=OBJECT)
        out[:] = leaves
        if not _all_bytes(leaves):
            _raise_mixed(leaves, api, path)
        return out
    if isinstance(first, np.ndarray) and first.ndim > 0:
        shape = first.shape
        for i, x in enumerate(leaves):
            if (x.shape if type(x) is np.ndarray else np.shape(x)) != shape:
                _raise_shape_mismatch(api, path, shape, i, np.shape(x))
        if first.dtype == OBJECT:
            out = np.empty((len(leaves), *shape), dtype=OBJECT)
            for i, x in enumerate(leaves):
                out[i] = x
            return out
        # np.stack's result, without its per-array Python steps (one concatenate, then the shape).
        return np.concatenate(leaves).reshape((len(leaves), *shape))
    try:
        out = np.array(leaves)
    except ValueError:
        out = None
    if out is None or out.ndim != 1 + len(_shape_of(first)) or out.dtype.kind in "US":
        shape = _shape_of(first)
        for i, x in enumerate(leaves):
            if _shape_of(x) != shape:
                _raise_shape_mismatch(api, path, shape, i, _shape_of(x))
        _raise_mixed(leaves, api, path)
    if out.dtype == OBJECT and not _all_bytes(out.reshape(-1).tolist()):
        _raise_mixed(leaves, api, path)
    return out


def _raise_shape_mismatch(api: str, path: str, first: tuple, i: int, other: tuple) -> None:
    where = f" in component {path}" if path else ""
    raise ValueError(
        f"{api}: cannot batch tensors with different shapes{where}. "
        f"First element had shape {list(first)} and element {i} had shape {list(other)}.\n"
        "Fix: use padded_batch(...) to pad elements to a common shape, make the "
        "elements the same shape with map(...), or batch with batch_size=1."
    )


def _raise_mixed(leaves: Sequence[Any], api: str, path: str) -> None:
    where = f" in component {path}" if path else ""
    kinds = sorted({type(x).__name__ for x in leaves})
    raise TypeError(
        f"{api}: cannot batch elements of different types{where}: received {kinds}.\n"
        "Fix: make every element of the dataset have the same type and structure."
    )


def stack(elements: Sequence[Any], api: str) -> Any:
    """Stacks a list of elements (all nesting the same way) into one batch.

    A `SparseTensor` component is batched as TensorFlow batches one: each element's index
    rows get its position in the batch prepended, and the dense shape is ``[batch, max of
    each dimension]``.
    """
    first = elements[0]
    if is_sparse(first):
        return batch_sparse(elements, api)
    if not is_structure(first):
        return stack_leaves(elements, api)
    flat = _flat_columns(elements, first)
    if flat is not None:
        paths, columns_of = flat
        stacked = [stack_leaves(c, api, p) for c, p in zip(columns_of, paths)]
        return tuple(stacked) if type(first) is tuple else dict(zip(first, stacked))
    paths = flatten_with_paths(first)
    columns = [flatten(e) for e in elements]
    n = len(paths)
    for i, c in enumerate(columns):
        if len(c) != n or not same_structure(first, elements[i]):
            raise ValueError(
                f"{api}: element {i} has a different structure from element 0: "
                f"{_describe(elements[i])} vs {_describe(first)}.\n"
                "Fix: make every element of the dataset nest the same way."
            )
    if has_sparse(first):
        return _stack_nodes(elements, api, "")
    stacked = [stack_leaves([c[j] for c in columns], api, paths[j][0]) for j in range(n)]
    return unflatten_as(first, stacked)


def _flat_columns(elements: Sequence[Any], first: Any) -> tuple[list[str], list[Any]] | None:
    """The components of elements that are all plain tuples of one length (or all plain dicts
    with ``first``'s keys, in its order) of arrays or ``bytes`` -- the common batch -- as
    ``(paths, columns)``; None for anything else, which the general path checks and stacks."""
    if type(first) is tuple:
        n = len(first)
        for e in elements:
            if type(e) is not tuple or len(e) != n:
                return None
        columns: list[Any] = list(zip(*elements))
        paths = [f"[{j}]" for j in range(n)]
    else:
        if type(first) is not dict:
            return None
        keys = first.keys()
        for e in elements:
            if type(e) is not dict or e.keys() != keys:
                return None
        columns = [[e[k] for e in elements] for k in first]
        paths = [f"[{k!r}]" for k in first]
    for column in columns:
        kind = type(column[0])
        if kind is not np.ndarray and kind is not bytes:
            return None
        for x in column:
            if type(x) is not kind:
                return None
    return paths, columns


def has_sparse(x: Any) -> bool:
    if is_sparse(x):
        return True
    if isinstance(x, tuple):
        return any(has_sparse(v) for v in x)
    if isinstance(x, dict):
        return any(has_sparse(v) for v in x.values())
    return False


def _stack_nodes(elements: Sequence[Any], api: str, path: str) -> Any:
    first = elements[0]
    if is_sparse(first):
        return batch_sparse(elements, api, path)
    if isinstance(first, tuple):
        vals = [_stack_nodes([e[i] for e in elements], api, f"{path}[{i}]") for i in range(len(first))]
        return type(first)(*vals) if is_namedtuple(first) else tuple(vals)
    if isinstance(first, dict):
        new = {k: _stack_nodes([e[k] for e in elements], api, f"{path}[{k!r}]") for k in sorted(first)}
        return type(first)((k, new[k]) for k in first) if type(first) is not dict else {k: new[k] for k in first}
    return stack_leaves(elements, api, path)


def _map_nodes(fn: Callable[..., Any], sparse_fn: Callable[..., Any], first: Any, *rest: Any) -> Any:
    """``fn`` on every leaf and ``sparse_fn`` on every sparse value (kept whole) of ``first`` and ``rest``."""
    if is_sparse(first):
        return sparse_fn(first, *rest)
    if isinstance(first, tuple):
        vals = [_map_nodes(fn, sparse_fn, *(x[i] for x in (first, *rest))) for i in range(len(first))]
        return type(first)(*vals) if is_namedtuple(first) else tuple(vals)
    if isinstance(first, dict):
        new = {k: _map_nodes(fn, sparse_fn, *(x[k] for x in (first, *rest))) for k in sorted(first)}
        return type(first)((k, new[k]) for k in first) if type(first) is not dict else {k: new[k] for k in first}
    return fn(first, *rest)


def _sparse_spec(spec: Any, rank: int | None) -> Any:
    values = spec.values
    return type(spec)(TensorSpec((None, rank), np.int64), TensorSpec((None,), values.dtype),
                      TensorSpec((rank,), np.int64))


def batch_spec(spec: Any, size: int | None) -> Any:
    """The spec of a batch of elements of ``spec`` (a sparse component gains one dimension)."""
    def sparse(st: Any) -> Any:
        rank = st.dense_shape.shape[0] if isinstance(st.dense_shape, TensorSpec) else None
        return _sparse_spec(st, None if rank is None else rank + 1)
    return _map_nodes(lambda s: s._batch(size), sparse, spec)


def unbatch_spec(spec: Any) -> Any:
    """The spec of one element of a batch of ``spec`` (a sparse component loses one dimension)."""
    def sparse(st: Any) -> Any:
        rank = st.dense_shape.shape[0] if isinstance(st.dense_shape, TensorSpec) else None
        return _sparse_spec(st, None if rank is None else rank - 1)
    return _map_nodes(lambda s: s._unbatch(), sparse, spec)


def _describe(x: Any) -> str:
    return repr(map_structure(lambda leaf: type(leaf).__name__, x))


def _sparse_or_leaves(x: Any) -> list[Any]:
    """The leaves of ``x``, a sparse value counting as one."""
    if is_sparse(x):
        return [x]
    if isinstance(x, tuple):
        return [leaf for v in x for leaf in _sparse_or_leaves(v)]
    if isinstance(x, dict):
        return [leaf for k in sorted(x) for leaf in _sparse_or_leaves(x[k])]
    return [x]


def batch_size_of(batched: Any, api: str) -> int:
    """The common leading dimension of every leaf of a batched element (a sparse value's ``dense_shape[0]``)."""
    sizes = {batch_rows(leaf) if is_sparse(leaf) else len(leaf) if isinstance(leaf, (np.ndarray, list)) else -1
             for leaf in _sparse_or_leaves(batched)}
    if len(sizes) != 1 or -1 in sizes:
        raise ValueError(
            f"{api}: input element components must all have the same leading dimension; "
            f"received leading dimensions {sorted(sizes)} (-1 means a scalar).\n"
            "Fix: unbatch only elements whose components are batched together, e.g. the "
            "output of batch(...)."
        )
    return sizes.pop()


def slice_leading(batched: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of every leaf of a batched element."""
    if not is_structure(batched):
        return batched[start:stop]
    return _map_nodes(lambda leaf: leaf[start:stop], lambda st: slice_rows(st, start, stop), batched)


def unstack(batched: Any, start: int, stop: int) -> list[Any]:
    """Elements ``start:stop`` of a batch, as a list of unbatched elements."""
    if is_sparse(batched):
        return unbatch_rows(batched, start, stop)
    if not is_structure(batched):
        part = batched[start:stop]
        if part.dtype == OBJECT and part.ndim == 1:
            return part.tolist()
        return list(part)
    if has_sparse(batched):
        leaves = _sparse_or_leaves(batched)
        cols = [unbatch_rows(leaf, start, stop) if is_sparse(leaf) else unstack(leaf, start, stop) for leaf in leaves]
        return [_unflatten_sparse(batched, iter(row)) for row in zip(*cols)]
    leaves = flatten(batched)
    cols = []
    for leaf in leaves:
        part = leaf[start:stop]
        cols.append(part.tolist() if part.dtype == OBJECT and part.ndim == 1 else list(part))
    return [unflatten_as(batched, row) for row in zip(*cols)]


def _unflatten_sparse(t: Any, it: Any) -> Any:
    if is_sparse(t):
        return next(it)
    if isinstance(t, tuple):
        vals = [_unflatten_sparse(v, it) for v in t]
        return type(t)(*vals) if is_namedtuple(t) else tuple(vals)
    if isinstance(t, dict):
        new = {k: _unflatten_sparse(t[k], it) for k in sorted(t)}
        return type(t)((k, new[k]) for k in t) if type(t) is not dict else {k: new[k] for k in t}
    return next(it)


def concat_batches(parts: Sequence[Any]) -> Any:
    """Concatenates batched elements along the leading dimension."""
    if len(parts) == 1:
        return parts[0]
    return _map_nodes(lambda *xs: np.concatenate(xs), lambda *sts: concat_sparse_batches(sts), *parts)


def element_equal(a: Any, b: Any) -> bool:
    """Exact equality of two elements (structure, dtypes, shapes and values)."""
    if not same_structure(a, b):
        return False
    for x, y in zip(flatten(a), flatten(b)):
        if isinstance(x, bytes) or isinstance(y, bytes):
            if not (isinstance(x, bytes) and isinstance(y, bytes)) or x != y:
                return False
            continue
        xa, ya = np.asarray(x), np.asarray(y)
        if xa.dtype != ya.dtype or xa.shape != ya.shape:
            return False
        if xa.dtype == OBJECT:
            if xa.reshape(-1).tolist() != ya.reshape(-1).tolist():
                return False
        elif not np.array_equal(xa, ya, equal_nan=xa.dtype.kind in "fc"):
            return False
    return True


def common_spec(a: Any, b: Any) -> Any | None:
    """The most specific spec nest both ``a`` and ``b`` fit, or None."""
    if not same_structure(a, b):
        return None
    leaves = [x.most_specific_common(y) for x, y in zip(flatten(a), flatten(b))]
    if any(x is None for x in leaves):
        return None
    return unflatten_as(a, leaves)
