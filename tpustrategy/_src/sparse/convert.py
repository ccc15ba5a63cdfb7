"""Between sparse and dense: ``to_dense``, ``from_dense``, ``to_indicator``.

``to_dense`` checks indices as TensorFlow's ``SparseToDense`` does when
``validate_indices`` is on: each within the shape, in row-major order, none
repeated, with TensorFlow's messages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.sparse.tensor import OBJECT, SparseTensor, as_sparse, dense_array, shape_text


def check_indices(st: SparseTensor, api: str) -> None:
    """TensorFlow's index checks: in bounds, in row-major order, not repeated."""
    idx, shape = st.indices, st.dense_shape
    fix = f"({api}: Fix: tps.sparse.reorder(sp_input) sorts the indices; remove repeated or out-of-bounds entries.)"
    bad: Any = np.nonzero(((idx < 0) | (idx >= shape)).any(axis=1))[0] if idx.size else []
    first_bad = int(bad[0]) if len(bad) else idx.shape[0]
    for i in range(1, first_bad):  # TensorFlow checks bounds before order at each index
        a, b = idx[i - 1].tolist(), idx[i].tolist()
        if b < a:
            raise InvalidArgumentError(f"indices[{i}] = {shape_text(b)} is out of order. "
                                       f"Many sparse ops require sorted indices.\n{fix}")
        if b == a:
            raise InvalidArgumentError(f"indices[{i}] = {shape_text(b)} is repeated\n{fix}")
    if first_bad < idx.shape[0]:
        raise InvalidArgumentError(f"indices[{first_bad}] = {shape_text(idx[first_bad])} is out of bounds: "
                                   f"need 0 <= index < {shape_text(shape)}\n{fix}")


def to_dense(sp_input: Any, default_value: Any = None, validate_indices: bool = True,
             name: str | None = None) -> np.ndarray:
    """The dense array of a sparse tensor (``tf.sparse.to_dense``).

    Args:
      sp_input: a `SparseTensor` (or any object with ``indices``, ``values``, ``dense_shape``).
      default_value: the value where no entry is (None: 0, or ``b""`` for strings).
      validate_indices: check that indices are in bounds, sorted and not repeated.
      name: ignored.

    Returns:
      A NumPy array of shape ``dense_shape`` and the values' dtype.

    Raises:
      InvalidArgumentError: with ``validate_indices``, an index out of bounds, out of order or repeated.
    """
    api = "tps.sparse.to_dense"
    st = as_sparse(sp_input, api)
    if validate_indices:
        check_indices(st, api)
    if not validate_indices and st.indices.shape[0]:
        inside = ((st.indices >= 0) & (st.indices < st.dense_shape)).all(axis=1)
        if not inside.all():
            check_indices(st, api)
    return dense_array(st.indices, st.values, st.dense_shape, default_value)


def from_dense(tensor: Any, name: str | None = None) -> SparseTensor:
    """A `SparseTensor` of the non-zero entries of ``tensor`` (``tf.sparse.from_dense``).

    Entries equal to zero (``b""`` for strings, False for bools) are left out;
    indices come in row-major order.

    Raises:
      InvalidArgumentError: ``tensor`` is a scalar (TensorFlow's message).
    """
    if isinstance(tensor, (bytes, str)) or (isinstance(tensor, (list, tuple)) and _has_strings(tensor)):
        arr = np.array(tensor, dtype=OBJECT)
        arr = np.vectorize(lambda v: v.encode("utf-8") if isinstance(v, str) else v, otypes=[OBJECT])(arr)
    else:
        arr = np.asarray(tensor)
    if arr.ndim == 0:
        raise InvalidArgumentError("WhereOp : Unhandled input dimensions: 0\n(tps.sparse.from_dense: Fix: pass a "
                                   "tensor of rank 1 or more, e.g. x[None].)")
    present = arr != b"" if arr.dtype == OBJECT else arr != 0
    indices = np.argwhere(present).astype(np.int64)
    return SparseTensor(indices, arr[present], np.array(arr.shape, dtype=np.int64))


def _has_strings(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(_has_strings(v) for v in value)
    return isinstance(value, (bytes, str))


def to_indicator(sp_input: Any, vocab_size: int, name: str | None = None) -> np.ndarray:
    """A dense bool indicator of the ids in the last dimension (``tf.sparse.to_indicator``).

    Args:
      sp_input: a `SparseTensor` of int ids, shape ``[..., n]``.
      vocab_size: the size of the id space (the output's last dimension).
      name: ignored.

    Returns:
      bool ``[..., vocab_size]``: True at ``[..., id]`` for each id of each row.

    Raises:
      InvalidArgumentError: an id outside ``[0, vocab_size)``.
    """
    api = "tps.sparse.to_indicator"
    st = as_sparse(sp_input, api)
    shape = (*st.dense_shape[:-1].tolist(), int(vocab_size))
    ids = st.values.astype(np.int64)
    coords = np.concatenate([st.indices[:, :-1], ids[:, None]], axis=1)
    if coords.size and ((coords < 0) | (coords >= np.array(shape))).any():
        raise InvalidArgumentError(f"Indices are not valid (out of bounds).  Shape: {shape_text(shape)}\n"
                                   f"({api}: Fix: keep every id in [0, vocab_size={int(vocab_size)}).)")
    out = np.zeros(shape, dtype=bool)
    if coords.shape[0]:
        out[tuple(coords.T)] = True
    return out
