"""`Dataset.sparse_batch`: batches of elements of different shapes, as `SparseBatch` (COO) values.

JAX has no ``tf.SparseTensor``. A batch is a `SparseBatch` with TensorFlow's
layout: ``indices`` ``[nnz, 1 + rank]`` (the batch row first, row-major order),
``values`` ``[nnz]`` and ``dense_shape`` ``[1 + rank]`` (the batch size, then
``row_shape`` with unknown dimensions set to the batch maximum). Every
position of every element is an entry (zeros included), as in TensorFlow.
``jax.experimental.sparse.BCOO((b.values, b.indices), shape=tuple(b.dense_shape))``
makes a JAX sparse array of it; ``to_dense()`` gives the padded NumPy array.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from tpustrategy._src.data.core.args import as_int, positive_int
from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state, pull
from tpustrategy._src.data.core.structure import OBJECT, TensorSpec, is_structure
from tpustrategy._src.data.transformations.batch import batched_cardinality
from tpustrategy._src.errors import DataLossError, InvalidArgumentError

_API = "Dataset.sparse_batch"


class SparseBatch(NamedTuple):
    """A sparse batch in COO form (TensorFlow's ``tf.SparseTensor`` from ``sparse_batch``).

    Attributes:
      indices: ``[nnz, ndims]`` int64 coordinates, the batch row first.
      values: ``[nnz]`` the values at those coordinates.
      dense_shape: ``[ndims]`` int64, the shape of the dense batch.
    """

    indices: Any
    values: Any
    dense_shape: Any

    def to_dense(self, default_value: Any = None) -> np.ndarray:
        """The dense ``dense_shape`` array (``default_value``, else 0 or ``b""``, where no entry is)."""
        values = np.asarray(self.values)
        shape = tuple(int(d) for d in np.asarray(self.dense_shape))
        out = np.empty(shape, dtype=values.dtype)
        fill = default_value if default_value is not None else (b"" if values.dtype == OBJECT else 0)
        if values.dtype == OBJECT:
            out.reshape(-1)[:] = [fill] * out.size
        else:
            out[...] = fill
        idx = np.asarray(self.indices)
        if len(idx):
            out[tuple(idx.T)] = values
        return out


def _row_shape(row_shape: Any) -> tuple[int | None, ...]:
    if isinstance(row_shape, TensorSpec):
        return row_shape.shape
    if isinstance(row_shape, np.ndarray):
        row_shape = row_shape.tolist()
    if isinstance(row_shape, (int, np.integer)) and not isinstance(row_shape, bool):
        row_shape = [row_shape]
    if not isinstance(row_shape, (list, tuple)):
        raise TypeError(
            f"{_API}: row_shape must be a list of dimensions; received {type(row_shape).__name__}: {row_shape!r}.\n"
            "Fix: e.g. sparse_batch(4, row_shape=[12]) or [5, None]."
        )
    dims: list[int | None] = []
    for d in row_shape:
        if d is None:
            dims.append(None)
            continue
        n = as_int(d, _API, "row_shape", "[12]")
        if n < -1:
            raise ValueError(f"{_API}: Dimension {n} must be >= 0 (or -1 / None for unknown).\nFix: e.g. row_shape=[12].")
        dims.append(None if n == -1 else n)
    return tuple(dims)


class SparseBatchDataset(Dataset):
    """Batches of elements as `SparseBatch` values.

    Attributes:
      batch_size: elements per batch (the last batch may be short).
      row_shape: the dense shape of one element (None: the batch maximum).
    """

    _params = ("batch_size", "row_shape")

    def __init__(self, input_dataset: Dataset, batch_size: Any, row_shape: Any):
        super().__init__((input_dataset,))
        self.batch_size = positive_int(batch_size, _API, "batch_size", "sparse_batch(4, [12])")
        self.row_shape = _row_shape(row_shape)

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        spec = input_spec(self.inputs[0])
        if spec is None:
            return None
        if is_structure(spec):
            raise TypeError(
                f"{_API}: elements must be a single component; received {spec!r}.\n"
                "Fix: sparse_batch one component at a time (map to it first)."
            )
        rank = len(self.row_shape)
        return SparseBatch(
            TensorSpec((None, rank + 1), np.int64),
            TensorSpec((None,), spec.dtype),
            TensorSpec((rank + 1,), np.int64),
        )

    def _compute_cardinality(self) -> int:
        return batched_cardinality(self.inputs[0].cardinality(), self.batch_size, False)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _SparseBatchIterator(self, self.inputs[0]._make_iterator(ctx))


def _element_array(x: Any) -> np.ndarray:
    if isinstance(x, bytes):
        out = np.empty((), dtype=OBJECT)
        out[()] = bytes(x)
        return out
    if is_structure(x):
        raise TypeError(f"{_API}: elements must be a single component; received {type(x).__name__}.")
    return np.asarray(x)


def sparse_batch_of(elements: list[Any], row_shape: tuple[int | None, ...]) -> SparseBatch:
    """The `SparseBatch` of ``elements`` (TensorFlow's errors for rank and size mismatches)."""
    arrays = [_element_array(x) for x in elements]
    rank = len(row_shape)
    for a in arrays:
        if a.ndim != rank:
            raise InvalidArgumentError(
                f"{_API}: Input element had shape {list(a.shape)} that is incompatible with the row shape "
                f"{[d if d is not None else -1 for d in row_shape]}.\nFix: give row_shape one entry per element dimension."
            )
        for d, (have, want) in enumerate(zip(a.shape, row_shape)):
            if want is not None and have > want:
                raise DataLossError(
                    f"{_API}: Input element had shape {list(a.shape)} that is larger than the row shape "
                    f"{[w if w is not None else -1 for w in row_shape]} (dimension {d}).\n"
                    "Fix: use a larger row_shape, or None for dimensions sized by the batch."
                )
    dims = [want if want is not None else max((a.shape[d] for a in arrays), default=0) for d, want in enumerate(row_shape)]
    index_parts, value_parts = [], []
    for i, a in enumerate(arrays):
        if a.size == 0:
            continue
        coords = np.indices(a.shape).reshape(rank, -1).T if rank else np.zeros((1, 0), np.int64)
        index_parts.append(np.concatenate([np.full((len(coords), 1), i, np.int64), coords.astype(np.int64)], axis=1))
        value_parts.append(a.reshape(-1))
    dtype = arrays[0].dtype
    indices = np.concatenate(index_parts) if index_parts else np.zeros((0, rank + 1), np.int64)
    values = np.concatenate(value_parts) if value_parts else np.zeros((0,), dtype)
    return SparseBatch(indices, values.astype(dtype, copy=False), np.array([len(arrays), *dims], np.int64))


class _SparseBatchIterator(NodeIterator):
    def __init__(self, node: SparseBatchDataset, it: NodeIterator):
        self._node, self._it = node, it
        self._done = False

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        elems = pull(self._it, self._node.batch_size)
        if len(elems) < self._node.batch_size:
            self._done = True
        if not elems:
            raise StopIteration
        return sparse_batch_of(elems, self._node.row_shape)

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "done"), "sparse_batch")
        self._it.set_state(state["input"])
        self._done = bool(state["done"])

    def close(self) -> None:
        self._it.close()
