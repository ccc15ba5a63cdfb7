"""`Dataset.ragged_batch`: batches of elements of different shapes, as `RaggedBatch` values.

JAX has no ragged tensor. A component whose shape TensorFlow would make ragged
(its static shape has an unknown dimension, or is not known without data)
becomes a `RaggedBatch`: the elements zero-padded (``b""`` for strings) to the
batch's largest shape, plus each element's length and full shape. That is what
a JAX step consumes (a static-shaped array and a mask,
``jnp.arange(T) < row_lengths[:, None]``), and every field has the batch as its
leading dimension, so a `RaggedBatch` splits across replicas like any batch.
Components with a fully known static shape (and scalars) are stacked densely,
as TensorFlow keeps them dense. ``to_list()`` gives the unpadded rows back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from tpustrategy._src.data.core.args import positive_int
from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state, pull
from tpustrategy._src.data.core.structure import (
    OBJECT,
    TensorSpec,
    as_dtype,
    flatten,
    flatten_with_paths,
    is_structure,
    stack_leaves,
    unflatten_as,
)
from tpustrategy._src.data.transformations.batch import batched_cardinality, check_bool

_API = "Dataset.ragged_batch"


class RaggedBatch(NamedTuple):
    """A batch of arrays of different shapes (TensorFlow's ``tf.RaggedTensor`` from ``ragged_batch``).

    Attributes:
      values: ``[B, *max_shape]`` the elements padded at the end of every dimension
        with zeros (``b""`` for strings) to the largest size in the batch.
      row_lengths: ``[B]`` each element's size along its first dimension
        (TensorFlow's ``rt.row_lengths()``), in ``row_splits_dtype``.
      shapes: ``[B, rank]`` each element's full shape, in ``row_splits_dtype``.

    Example:
      >>> b = next(iter(Dataset.range(4).map(lambda x: np.arange(x)).ragged_batch(4)))
      >>> b.values.shape, b.row_lengths.tolist()   # ((4, 3), [0, 1, 2, 3])
      >>> [r.tolist() for r in b.to_list()]         # [[], [0], [0, 1], [0, 1, 2]]
    """

    values: Any
    row_lengths: Any
    shapes: Any

    def to_list(self) -> list[np.ndarray]:
        """The unpadded elements, one array per row."""
        values, shapes = np.asarray(self.values), np.asarray(self.shapes)
        return [values[(i, *(slice(0, int(d)) for d in shape))] for i, shape in enumerate(shapes)]

    def mask(self) -> np.ndarray:
        """``[B, *max_shape]`` booleans: True where ``values`` holds an element's value."""
        values, shapes = np.asarray(self.values), np.asarray(self.shapes)
        out = np.zeros(values.shape, dtype=bool)
        for i, shape in enumerate(shapes):
            out[(i, *(slice(0, int(d)) for d in shape))] = True
        return out


def pad_rows(arrays: list[np.ndarray], dtype: np.dtype, api: str, path: str) -> tuple[np.ndarray, np.ndarray]:
    """``arrays`` (one rank) padded into one ``[len, *max_shape]`` array, and their shapes."""
    rank = arrays[0].ndim
    for i, a in enumerate(arrays):
        if a.ndim != rank:
            raise ValueError(
                f"{api}: elements have different ranks in component {path or '0'}: element 0 has shape "
                f"{list(arrays[0].shape)} and element {i} has shape {list(a.shape)}.\n"
                "Fix: give every element of a component the same rank."
            )
    shapes = np.array([a.shape for a in arrays], dtype=np.int64).reshape(len(arrays), rank)
    maxes = tuple(int(m) for m in shapes.max(axis=0)) if len(arrays) else (0,) * rank
    out = np.empty((len(arrays), *maxes), dtype=dtype)
    if dtype == OBJECT:
        out.reshape(-1)[:] = [b""] * out.size
    else:
        out[...] = 0
    for i, a in enumerate(arrays):
        out[(i, *(slice(0, s) for s in a.shape))] = a
    return out, shapes


def _as_array(leaf: Any) -> np.ndarray:
    if isinstance(leaf, np.ndarray):
        return leaf
    if isinstance(leaf, bytes):
        out = np.empty((), dtype=OBJECT)
        out[()] = bytes(leaf)
        return out
    return np.asarray(leaf)


class RaggedBatchDataset(Dataset):
    """Batches whose components of unknown shape are `RaggedBatch` values.

    Attributes:
      batch_size: elements per batch.
      drop_remainder: whether a short last batch is dropped.
      row_splits_dtype: the integer dtype of ``row_lengths`` and ``shapes`` (int64 or int32).
    """

    _params = ("batch_size", "drop_remainder", "row_splits_dtype")

    def __init__(self, input_dataset: Dataset, batch_size: Any, drop_remainder: Any = False, row_splits_dtype: Any = np.int64):
        super().__init__((input_dataset,))
        self.batch_size = positive_int(batch_size, _API, "batch_size", "ragged_batch(32)")
        self.drop_remainder = check_bool(drop_remainder, _API, "drop_remainder")
        dtype = as_dtype(row_splits_dtype)
        if dtype not in (np.dtype(np.int64), np.dtype(np.int32)):
            raise ValueError(
                f"{_API}: row_splits_dtype must be int32 or int64; received {dtype.name}.\n"
                "Fix: pass row_splits_dtype=np.int64 (the default) or np.int32."
            )
        self.row_splits_dtype = dtype

    def _ragged_leaves(self) -> list[bool] | None:
        """Per leaf of the static spec: whether it becomes a `RaggedBatch` (None: spec unknown)."""
        spec = self.inputs[0]._static_spec()
        if spec is None:
            return None
        return [len(s.shape) > 0 and any(d is None for d in s.shape) for s in flatten(spec)]

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        spec = self.inputs[0]._static_spec()
        if spec is None:
            return None
        size = self.batch_size if self.drop_remainder else None
        rs = self.row_splits_dtype
        leaves = []
        for s in flatten(spec):
            if len(s.shape) > 0 and any(d is None for d in s.shape):
                leaves.append(
                    RaggedBatch(
                        TensorSpec((size, *(None for _ in s.shape)), s.dtype),
                        TensorSpec((size,), rs),
                        TensorSpec((size, len(s.shape)), rs),
                    )
                )
            else:
                leaves.append(s._batch(size))
        return unflatten_as(spec, leaves) if is_structure(spec) else leaves[0]

    def _compute_cardinality(self) -> int:
        return batched_cardinality(self.inputs[0].cardinality(), self.batch_size, self.drop_remainder)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _RaggedBatchIterator(self, self.inputs[0]._make_iterator(ctx))


class _RaggedBatchIterator(NodeIterator):
    def __init__(self, node: RaggedBatchDataset, it: NodeIterator):
        self._node, self._it = node, it
        self._done = False
        self._ragged = node._ragged_leaves()

    def __next__(self) -> Any:
        node = self._node
        if self._done:
            raise StopIteration
        elems = pull(self._it, node.batch_size)
        if not elems or (node.drop_remainder and len(elems) < node.batch_size):
            self._done = True
            raise StopIteration
        if len(elems) < node.batch_size:
            self._done = True
        first = elems[0]
        paths = flatten_with_paths(first)
        cols = [flatten(e) for e in elems]
        if self._ragged is None:  # no static spec: every non-scalar component is ragged
            self._ragged = [_as_array(leaf).ndim > 0 for leaf in cols[0]]
        leaves = []
        for j, (path, _) in enumerate(paths):
            column = [c[j] for c in cols]
            if not self._ragged[j]:
                leaves.append(stack_leaves(column, _API, path))
                continue
            arrays = [_as_array(v) for v in column]
            values, shapes = pad_rows(arrays, arrays[0].dtype, _API, path)
            rs = node.row_splits_dtype
            leaves.append(RaggedBatch(values, shapes[:, 0].astype(rs), shapes.astype(rs)))
        return unflatten_as(first, leaves) if is_structure(first) else leaves[0]

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "done"), "ragged_batch")
        self._it.set_state(state["input"])
        self._done = bool(state["done"])

    def close(self) -> None:
        self._it.close()
