"""`SparseTensor`: TensorFlow's COO sparse value, as a named tuple of NumPy arrays.

The fields are ``tpsd.SparseBatch``'s, in the same order: ``indices`` ``[nnz,
rank]`` int64 coordinates (row-major order unless a program built them
otherwise), ``values`` ``[nnz]``, ``dense_shape`` ``[rank]`` int64. Being a
named tuple, it passes through dataset elements and JAX pytrees as its three
arrays. Python lists given to the constructor become NumPy arrays (indices and
shape int64, as ``tf.SparseTensor`` converts them); arrays are kept as given.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError

OBJECT = np.dtype(object)


class _Fields(NamedTuple):
    indices: Any
    values: Any
    dense_shape: Any


def _values_array(values: Any) -> np.ndarray:
    if isinstance(values, (list, tuple)) and any(isinstance(v, (bytes, str)) for v in values):
        out = np.empty(len(values), dtype=OBJECT)
        out[:] = [v.encode("utf-8") if isinstance(v, str) else v for v in values]
        return out
    arr = np.asarray(values)
    if isinstance(values, (list, tuple)):
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)  # tf.constant's default float type
        elif arr.dtype == np.int64 and arr.size and np.abs(arr).max() < 2**31:
            arr = arr.astype(np.int32)
    return arr


class SparseTensor(_Fields):
    """A sparse tensor in COO form (TensorFlow's ``tf.sparse.SparseTensor``).

    Args:
      indices: ``[nnz, rank]`` int64 coordinates of the entries.
      values: ``[nnz]`` the entries' values.
      dense_shape: ``[rank]`` int64, the dense shape.

    Example:
      >>> st = SparseTensor(indices=[[0, 0], [1, 2]], values=[1, 2], dense_shape=[3, 4])
      >>> tps.sparse.to_dense(st)   # array([[1, 0, 0, 0], [0, 0, 2, 0], [0, 0, 0, 0]], dtype=int32)
    """

    __slots__ = ()
    # NumPy's operators defer to ours (``dense * st``) instead of treating the tuple as a sequence.
    __array_ufunc__ = None

    def __new__(cls, indices: Any, values: Any, dense_shape: Any) -> SparseTensor:
        if isinstance(indices, (list, tuple)):
            indices = np.asarray(indices, dtype=np.int64)
            if indices.ndim == 1 and indices.size == 0:
                indices = indices.reshape(0, len(dense_shape) if isinstance(dense_shape, (list, tuple)) else 0)
        if isinstance(values, (list, tuple)):
            values = _values_array(values)
        if isinstance(dense_shape, (list, tuple)):
            dense_shape = np.asarray(dense_shape, dtype=np.int64)
        return super().__new__(cls, indices, values, dense_shape)

    @property
    def dtype(self) -> np.dtype:
        """The dtype of ``values``."""
        return np.asarray(self.values).dtype

    @property
    def shape(self) -> tuple[int, ...]:
        """The dense shape as a tuple of ints (TensorFlow's ``st.shape``)."""
        return tuple(int(d) for d in np.asarray(self.dense_shape).tolist())

    def get_shape(self) -> tuple[int, ...]:
        """The dense shape (TensorFlow's ``st.get_shape()``)."""
        return self.shape

    def with_values(self, new_values: Any) -> SparseTensor:
        """The same indices and shape with ``new_values`` (TensorFlow's ``st.with_values``)."""
        return SparseTensor(self.indices, new_values, self.dense_shape)

    @classmethod
    def from_value(cls, sparse_tensor_value: Any) -> SparseTensor:
        """A `SparseTensor` of any object with ``indices``, ``values`` and ``dense_shape``."""
        return as_sparse(sparse_tensor_value, "tps.sparse.SparseTensor.from_value")

    def set_shape(self, shape: Any) -> None:
        """Checks ``shape`` (None entries: any size) against the dense shape (TensorFlow's ``st.set_shape``).

        Raises:
          ValueError: a rank or a known dimension differs.
        """
        if shape is None:
            return
        dims = list(shape)
        if len(dims) != len(self.shape) or any(d is not None and int(d) != s for d, s in zip(dims, self.shape)):
            raise ValueError(f"Shapes {list(self.shape)} and {[d if d is None else int(d) for d in dims]} are "
                             "incompatible\n(SparseTensor.set_shape: Fix: pass the dense shape, with None for any "
                             "dimension you do not constrain.)")

    def _cwise(self, other: Any, op: Any, name: str) -> SparseTensor:
        st = as_sparse(self, f"SparseTensor.{name}")
        dense = np.asarray(other)
        shape = tuple(int(d) for d in st.dense_shape.tolist())
        try:
            full = np.broadcast_to(dense, shape)
        except ValueError:
            raise InvalidArgumentError(
                f"SparseDenseBinaryOpShared broadcasts dense to sparse only; got incompatible shapes: "
                f"{shape_text(dense.shape)} vs. {shape_text(shape)}\n(SparseTensor.{name}: Fix: give the dense "
                "operand a shape that broadcasts to the sparse tensor's dense_shape.)") from None
        picked = full[tuple(st.indices.T)] if st.indices.shape[0] else np.zeros((0,), dense.dtype)
        return SparseTensor(st.indices, op(st.values, picked), st.dense_shape)

    def __mul__(self, other: Any) -> SparseTensor:
        """Element-wise product with a dense tensor broadcast to the sparse one (``sp * dense``)."""
        return self._cwise(other, np.multiply, "__mul__")

    def __rmul__(self, other: Any) -> SparseTensor:
        return self._cwise(other, np.multiply, "__rmul__")

    def __truediv__(self, other: Any) -> SparseTensor:
        """Element-wise quotient by a dense tensor (``sp / dense``); integers divide to float64, as in TensorFlow."""
        return self._cwise(other, np.true_divide, "__truediv__")

    def to_dense(self, default_value: Any = None) -> np.ndarray:
        """The dense array (as ``tpsd.SparseBatch.to_dense``; TensorFlow spells it ``tf.sparse.to_dense(st)``)."""
        st = as_sparse(self, "SparseTensor.to_dense")
        return dense_array(st.indices, st.values, st.dense_shape, default_value)


def as_sparse(value: Any, api: str, arg: str = "sp_input") -> SparseTensor:
    """``value`` (anything with ``indices``, ``values``, ``dense_shape``) as a checked `SparseTensor`."""
    if not all(hasattr(value, f) for f in ("indices", "values", "dense_shape")):
        raise TypeError(
            f"{api}: `{arg}` must be a SparseTensor (an object with indices, values and dense_shape); received "
            f"{type(value).__name__}.\nFix: build one with tps.sparse.SparseTensor(indices, values, dense_shape) "
            "or tps.sparse.from_dense(x).")
    indices = np.asarray(value.indices, dtype=np.int64)
    values = value.values if isinstance(value.values, np.ndarray) else _values_array(value.values)
    values = np.asarray(values)
    shape = np.asarray(value.dense_shape, dtype=np.int64).reshape(-1)
    if indices.size == 0 and (indices.ndim != 2 or indices.shape[1] != shape.size):
        indices = indices.reshape(values.shape[0] if values.ndim == 1 and shape.size == 0 else 0, shape.size)
    if indices.ndim != 2 or indices.shape[1] != shape.size or values.shape != (indices.shape[0],):
        raise InvalidArgumentError(
            f"{api}: `{arg}` has indices of shape {list(indices.shape)}, values of shape {list(values.shape)} and "
            f"dense_shape {shape.tolist()}; a SparseTensor needs indices [nnz, rank], values [nnz] and "
            "dense_shape [rank].\nFix: give one index row per value, with one column per dimension.")
    return SparseTensor(indices, values, shape)


def dense_array(indices: np.ndarray, values: np.ndarray, shape: np.ndarray, default_value: Any) -> np.ndarray:
    """The dense array: ``default_value`` (None: 0 or ``b""``) everywhere, then the entries."""
    dtype = values.dtype
    fill = zero_of(dtype) if default_value is None else default_value
    if dtype == OBJECT and isinstance(fill, str):
        fill = fill.encode("utf-8")
    out = np.empty(tuple(shape.tolist()), dtype=dtype)
    if dtype == OBJECT:
        out.reshape(-1)[:] = [fill] * out.size
    else:
        out[...] = fill
    if indices.shape[0] and out.ndim == 0:
        out[()] = values[-1]
    elif indices.shape[0]:
        out[tuple(indices.T)] = values
    return out


def zero_of(dtype: np.dtype) -> Any:
    """The implicit value of a missing entry: ``b""`` for strings, else 0."""
    return b"" if dtype == OBJECT else np.zeros((), dtype=dtype)[()]


def shape_text(shape: Any) -> str:
    """A shape as TensorFlow prints it in messages: ``[3,4]``."""
    return "[" + ",".join(str(int(d)) for d in np.asarray(shape).reshape(-1).tolist()) + "]"


def sort_order(indices: np.ndarray) -> np.ndarray:
    """The stable row-major (lexicographic) order of index rows."""
    if indices.shape[0] == 0 or indices.shape[1] == 0:
        return np.arange(indices.shape[0])
    return np.lexsort(indices.T[::-1])


_TF_TYPE_NAMES = {"float32": "float", "float64": "double", "float16": "half", "object": "string"}


def tf_type_name(dtype: np.dtype) -> str:
    """TensorFlow's name of a dtype in its messages (``float`` for float32, ``double`` for float64, ...)."""
    return _TF_TYPE_NAMES.get(np.dtype(dtype).name, np.dtype(dtype).name)
