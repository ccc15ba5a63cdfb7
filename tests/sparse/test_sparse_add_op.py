"""TensorFlow's sparse_add_op_test.py and the SparseTensor operators of sparse_ops_test.py (their inputs
and asserted results), run on tps.sparse."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.sparse as sp
from tpustrategy._src.errors import InvalidArgumentError


def sparsify(x, thresh=0.5):
    x = np.array(x, copy=True)
    x[x < thresh] = 0
    nz = np.where(x)
    return sp.SparseTensor(np.vstack(nz).astype(np.int64).T, x[nz], np.array(x.shape, np.int64))


def st_3x3(negate=False):
    values = np.array([1, 2, 3, 4], np.float32) * (-1 if negate else 1)
    return sp.SparseTensor(np.array([[0, 1], [1, 0], [2, 0], [2, 1]]), values, np.array([3, 3]))


def test_add_self():
    out = sp.add(st_3x3(), st_3x3())
    assert out.shape == (3, 3) and out.indices.tolist() == [[0, 1], [1, 0], [2, 0], [2, 1]]
    assert out.values.tolist() == [2, 4, 6, 8]


def test_add_self_and_negation():
    out = sp.add(st_3x3(), st_3x3(negate=True), 0.1)
    assert out.indices.shape == (0, 2) and out.values.tolist() == [] and out.dense_shape.tolist() == [3, 3]


def test_small_values_vanish():
    v2 = sp.SparseTensor(np.array([[0, 1], [1, 0], [2, 0], [2, 1]]), np.array([1, -1.9, 3, -4.2], np.float32),
                         np.array([3, 3]))
    out = sp.add(st_3x3(), v2, threshold=0.21)
    assert out.indices.tolist() == [[0, 1], [2, 0]] and out.values.tolist() == [2, 6]
    out = sp.add(st_3x3(), v2, threshold=0.11)
    assert out.indices.tolist() == [[0, 1], [2, 0], [2, 1]]
    np.testing.assert_allclose(out.values, [2, 6, -0.2], rtol=1e-5)


@pytest.mark.parametrize("dtype", (np.float32, np.float64, np.int64, np.complex64))
def test_add_sparse_dense(dtype):
    rng = np.random.default_rng(1618)
    vals = rng.standard_normal((7, 5)).astype(dtype)
    dense = rng.standard_normal((7, 5)).astype(dtype)
    sparse = sparsify(vals) if not np.iscomplexobj(vals) else sp.from_dense(np.where(vals.real < 0.5, 0, vals))
    expected = dense + sp.to_dense(sparse)
    for out in (sp.add(sparse, dense), sp.add(dense, sparse)):
        np.testing.assert_array_equal(out, expected)
        assert out.dtype == dtype


@pytest.mark.parametrize("bad", ([[-1, 0]], [[1, 3]]))
def test_invalid_sparse_tensor(bad):
    sparse = sp.SparseTensor(np.array(bad), np.array([0], np.int32), np.array([2, 2]))
    with pytest.raises(InvalidArgumentError, match="invalid index"):
        sp.add(sparse, np.zeros((2, 2), np.int32))


# --- SparseMathOpsTest: the operators --------------------------------------------------------------


@pytest.mark.parametrize("dtype", (np.float32, np.float64, np.int32, np.int64))
@pytest.mark.parametrize("sp_shape, dense_shape", [((10, 10, 10), (10, 10, 1)), ((5, 5), (5, 5)), ((1618,), (1,)),
                                                   ((3, 3, 7), (1, 7))])
def test_cwise_div_and_mul(dtype, sp_shape, dense_shape):
    rng = np.random.default_rng(1618)
    sp_vals = (rng.random(sp_shape) + 1).astype(dtype)
    dense = (rng.random(dense_shape) + 1).astype(dtype)
    st = sparsify(sp_vals, thresh=1.5)
    densified = sp.to_dense(st)
    for out, expected in ((st / dense, densified / dense), (st * dense, densified * dense), (dense * st, densified * dense)):
        assert isinstance(out, sp.SparseTensor) and out.indices.tolist() == st.indices.tolist()
        np.testing.assert_allclose(sp.to_dense(out), expected * (densified != 0), rtol=1e-6)
    if dtype in (np.int32, np.int64):
        assert (st / dense).values.dtype == np.float64


def test_cwise_shape_validation_github_24072():
    b = sp.SparseTensor([[0, 0, 1, 0], [0, 0, 3, 0]], [10, 20], [1, 1, 4, 2])
    with pytest.raises(InvalidArgumentError, match="broadcasts dense to sparse only; got incompatible shapes"):
        np.ones([3, 4, 1], dtype=np.int32) * b  # noqa: B018 - the operator raises
    with pytest.raises(InvalidArgumentError, match="broadcasts dense to sparse only; got incompatible shapes"):
        b * np.ones([3, 4, 1], dtype=np.int32)  # noqa: B018


def test_set_shape_validates():
    st = sp.SparseTensor(np.array([[0, 0], [1, 0], [1, 3], [1, 4], [3, 2], [3, 3]]), np.arange(6), np.array([5, 6]))
    for ok in ([None, None], [5, None], [None, 6], [5, 6]):
        st.set_shape(ok)
    for bad in ([None, None, None], [3, None], [None, 7], [3, 6]):
        with pytest.raises(ValueError):
            st.set_shape(bad)
