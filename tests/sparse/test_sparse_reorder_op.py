"""TensorFlow's sparse_reorder_op_test.py (its inputs and asserted results), run on tps.sparse.reorder."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.sparse as sp
from tpustrategy._src.errors import InvalidArgumentError

IND = np.array([[0, 0], [1, 0], [1, 3], [1, 4], [3, 2], [3, 3]], np.int64)
VAL = np.array([0, 10, 13, 14, 32, 33])


def st_5x6(permutation, dtype=np.float64):
    return sp.SparseTensor(IND[permutation], VAL.astype(dtype)[permutation], np.array([5, 6], np.int64))


def test_static_shape_preserved_and_already_in_order():
    out = sp.reorder(st_5x6(np.arange(6)))
    assert out.shape == (5, 6)
    assert out.indices.tolist() == IND.tolist() and out.values.tolist() == VAL.tolist()


@pytest.mark.parametrize("dtype", ("bfloat16", np.float64))
def test_out_of_order(dtype):
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes").bfloat16
    rng = np.random.default_rng(0)
    for _ in range(5):
        out = sp.reorder(st_5x6(rng.permutation(6), dtype))
        assert out.indices.tolist() == IND.tolist()
        assert out.values.astype(np.float64).tolist() == VAL.tolist() and out.values.dtype == np.dtype(dtype)


def test_shape_overflow_github_45392():
    st = sp.SparseTensor(indices=[[0, 0, 0, 0, 0, 0]], values=[0.0], dense_shape=[4096] * 6)
    assert sp.reorder(st).shape == (4096,) * 6


def test_invalid_sparse_input():
    bad = sp.SparseTensor(np.array([[0, 0, 0]]), np.array([0, 1, 2]), np.array([3, 3]))
    with pytest.raises(InvalidArgumentError, match=r"indices \[nnz, rank\], values \[nnz\]"):
        sp.reorder(bad)
