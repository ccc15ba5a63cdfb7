"""``tf.sparse.cross``: feature crosses of sparse and dense string / integer features, row by row.

Each row's crosses are the Cartesian product of the row's values of every input,
joined with ``separator`` (``"_X_"``): the sparse inputs first, then the dense
ones (each group in the order given, as TensorFlow orders them), the first input
varying slowest. Integers are written in decimal. A row where an input has no
value has no crosses.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.sparse.tensor import OBJECT, SparseTensor, as_sparse

_API = "tps.sparse.cross"


def _text(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return str(int(value)).encode()
    raise InvalidArgumentError(f"{_API}: feature values must be strings or integers; received "
                               f"{type(value).__name__}: {value!r}.\nFix: cast float features to ints or strings.")


def _rows(value: Any, position: int) -> list[list[bytes]]:
    if all(hasattr(value, f) for f in ("indices", "values", "dense_shape")):
        st = as_sparse(value, _API, "inputs")
        if st.dense_shape.size != 2:
            raise InvalidArgumentError(f"Sparse inputs should be a matrix but received shape "
                                       f"{st.dense_shape.tolist()} at position {position}\n"
                                       f"({_API}: Fix: give every feature the shape [batch, values].)")
        rows: list[list[bytes]] = [[] for _ in range(int(st.dense_shape[0]))]
        for r, v in zip(st.indices[:, 0].tolist(), st.values.tolist()):
            rows[r].append(_text(v))
        return rows
    arr = np.asarray(value, dtype=OBJECT if isinstance(value, (list, tuple)) else None)
    if arr.ndim != 2:
        raise InvalidArgumentError(f"Dense inputs should be a matrix but received shape {list(arr.shape)} at position "
                                   f"{position}\n({_API}: Fix: give every feature the shape [batch, values].)")
    return [[_text(v) for v in row] for row in arr.tolist()]


def cross(inputs: Any, name: str | None = None, separator: Any = None) -> SparseTensor:
    """The feature crosses of ``inputs``, per row (``tf.sparse.cross``).

    Args:
      inputs: a list of `SparseTensor` and dense ``[batch, n]`` string or integer features.
      name: ignored.
      separator: put between crossed values (None: ``"_X_"``).

    Returns:
      A string `SparseTensor` ``[batch, most crosses in a row]``.

    Raises:
      InvalidArgumentError: an input is not 2-D, or the inputs have different batch sizes.

    Example:
      >>> cross([SparseTensor([[0, 0], [1, 0]], [b"a", b"b"], [2, 1]), np.array([[b"x"], [b"y"]], dtype=object)])
      SparseTensor(indices=[[0, 0], [1, 0]], values=[b'a_X_x', b'b_X_y'], dense_shape=[2, 1])
    """
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError(f"{_API}: `inputs` must be a non-empty list of features; received {type(inputs).__name__}.\n"
                        "Fix: e.g. cross([sparse_feature, dense_feature]).")
    sep = b"_X_" if separator is None else (separator.encode("utf-8") if isinstance(separator, str) else separator)
    is_sparse = [all(hasattr(x, f) for f in ("indices", "values", "dense_shape")) for x in inputs]
    # Positions in messages count within each group, as TensorFlow's op takes the two groups apart.
    sparse = [x for x, flag in zip(inputs, is_sparse) if flag]
    dense = [x for x, flag in zip(inputs, is_sparse) if not flag]
    features = [_rows(x, pos) for pos, x in enumerate(sparse)] + [_rows(x, pos) for pos, x in enumerate(dense)]
    batch = len(features[0])
    if any(len(f) != batch for f in features):
        raise InvalidArgumentError(f"{_API}: the inputs have batch sizes {[len(f) for f in features]}; they must "
                                   "agree.\nFix: cross features of the same batch.")
    per_row = [[sep.join(combo) for combo in itertools.product(*(f[r] for f in features))] for r in range(batch)]
    longest = max((len(row) for row in per_row), default=0)
    indices = np.array([[r, j] for r, row in enumerate(per_row) for j in range(len(row))], dtype=np.int64)
    values = np.empty(len(indices), dtype=OBJECT)
    values[:] = [v for row in per_row for v in row]
    return SparseTensor(indices.reshape(-1, 2), values, np.array([batch, longest], dtype=np.int64))
