"""``tf.sparse.sampled_addmm``: a matrix product computed only where a sparsity pattern has entries.

``alpha * (mat1 @ mat2)`` read at ``indices`` plus ``beta * values``; leading
dimensions of ``mat1``, ``mat2``, ``indices`` and ``values`` are batch dimensions.
NumPy computes the whole product and picks the entries (the input pipeline's
sizes are small; a model should use ``jax.experimental.sparse``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError

_FLOATS = ("bfloat16", "float16", "float32", "float64")


def sampled_addmm(indices: Any, values: Any, dense_shape: Any, mat1: Any, mat2: Any, beta: Any = 1.0,
                  alpha: Any = 1.0, output_type: Any = np.float32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``alpha * (mat1 @ mat2) * spy(indices) + beta * values`` (``tf.sparse.sampled_addmm``).

    Args:
      indices: ``[..., nnz, 2]`` int row and column of each output entry.
      values: ``[..., nnz]`` the values scaled by ``beta`` and added.
      dense_shape: ``[2]`` the shape of one output matrix.
      mat1, mat2: ``[..., m, k]`` and ``[..., k, n]`` float matrices.
      beta, alpha: the scale factors.
      output_type: the dtype of the result values (bfloat16, float16, float32 or float64).

    Returns:
      ``(indices, values, dense_shape)``: the given indices (int32), the new values, and
      ``dense_shape`` as int32, as TensorFlow returns them.

    Raises:
      InvalidArgumentError: the inner dimensions of ``mat1`` and ``mat2`` differ.
    """
    api = "tps.sparse.sampled_addmm"
    dtype = np.dtype(getattr(output_type, "as_numpy_dtype", output_type))
    if dtype.name not in _FLOATS:
        raise TypeError(f"{api}: output_type must be one of {list(_FLOATS)}; received {dtype.name}.\n"
                        "Fix: e.g. output_type=np.float32.")
    idx = np.asarray(indices).astype(np.int32)
    a, b = np.asarray(mat1), np.asarray(mat2)
    if a.ndim < 2 or b.ndim < 2 or a.shape[-1] != b.shape[-2]:
        raise InvalidArgumentError(
            f"{api}: mat1 of shape {list(a.shape)} and mat2 of shape {list(b.shape)} cannot be multiplied.\n"
            "Fix: give mat1 [..., m, k] and mat2 [..., k, n].")
    product = np.matmul(a.astype(np.float64), b.astype(np.float64))
    rows, cols = idx[..., 0], idx[..., 1]
    batch = np.indices(rows.shape)[:-1]
    picked = product[(*batch, rows, cols)]
    out = (float(alpha) * picked + float(beta) * np.asarray(values, dtype=np.float64)).astype(dtype)
    return idx, out, np.asarray(dense_shape).astype(np.int32)
