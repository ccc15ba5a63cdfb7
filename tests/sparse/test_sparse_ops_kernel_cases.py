"""TensorFlow's sparse_ops_test.py (its inputs and asserted results), run on tps.sparse."""

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


def st_5x6(dtype=np.int32):
    ind = np.array([[0, 0], [1, 0], [1, 3], [1, 4], [3, 2], [3, 3]], np.int64)
    return sp.SparseTensor(ind, np.array([0, 10, 13, 14, 32, 33], dtype), np.array([5, 6], np.int64))


def same(out, indices, values, shape):
    assert out.indices.tolist() == indices
    assert out.values.tolist() == values
    assert out.dense_shape.tolist() == shape


# --- SparseToIndicatorTest ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", (np.int32, np.int64))
def test_to_indicator(dtype):
    expected = np.zeros((5, 50), dtype=bool)
    for t in ((0, 0), (1, 10), (1, 13), (1, 14), (3, 32), (3, 33)):
        expected[t] = True
    np.testing.assert_array_equal(sp.to_indicator(st_5x6(dtype), 50), expected)


def test_to_indicator_higher_rank():
    ind = np.array([[0, 0, 1], [0, 1, 0], [0, 1, 2], [1, 0, 3], [1, 1, 0], [1, 1, 1], [1, 1, 2], [1, 2, 2]])
    st = sp.SparseTensor(ind.astype(np.int64), np.array([1, 10, 12, 103, 150, 149, 150, 122]), np.array([2, 3, 4]))
    expected = np.zeros((2, 3, 200), dtype=bool)
    for t in [(0, 0, 1), (0, 1, 10), (0, 1, 12), (1, 0, 103), (1, 1, 149), (1, 1, 150), (1, 2, 122)]:
        expected[t] = True
    np.testing.assert_array_equal(sp.to_indicator(st, 200), expected)


# --- SparseRetainTest --------------------------------------------------------------------------------


def test_retain():
    out = sp.retain(st_5x6(), np.array([1, 0, 0, 1, 1, 0], dtype=bool))
    same(out, [[0, 0], [1, 4], [3, 2]], [0, 14, 32], [5, 6])


def test_retain_none():
    out = sp.retain(st_5x6(), np.zeros((6,), dtype=bool))
    assert out.indices.shape == (0, 2) and out.values.tolist() == [] and out.dense_shape.tolist() == [5, 6]


def test_retain_mismatched_shape():
    with pytest.raises(ValueError):
        sp.retain(st_5x6(), np.array([1, 0, 0, 1, 0], dtype=bool))


# --- SparseResetShapeTest ----------------------------------------------------------------------------

IND_2_5_6 = [[0, 0, 0], [0, 1, 0], [0, 1, 3], [1, 1, 4], [1, 3, 2], [1, 3, 3]]
VAL_2_5_6 = [0, 10, 13, 14, 32, 33]


def st_2x5x6():
    return sp.SparseTensor(np.array(IND_2_5_6, np.int64), np.array(VAL_2_5_6, np.int32), np.array([2, 5, 6]))


def test_reset_shape():
    same(sp.reset_shape(st_2x5x6(), np.array([3, 6, 7], np.int64)), IND_2_5_6, VAL_2_5_6, [3, 6, 7])


def test_reset_shape_tight_bounding_box():
    same(sp.reset_shape(st_2x5x6()), IND_2_5_6, VAL_2_5_6, [2, 4, 5])


def test_reset_shape_tight_bounding_box_empty():
    empty = sp.SparseTensor(np.empty((0, 3), np.int64), np.empty((0,), np.int32), np.array([2, 5, 6]))
    out = sp.reset_shape(empty)
    assert out.indices.shape == (0, 3) and out.values.shape == (0,) and out.dense_shape.tolist() == [0, 0, 0]


def test_reset_shape_invalid_rank_and_size():
    with pytest.raises(ValueError):
        sp.reset_shape(st_2x5x6(), np.array([3, 7], np.int64))
    with pytest.raises(ValueError, match="should have dimension sizes"):
        sp.reset_shape(st_2x5x6(), np.array([3, 7, 5], np.int64))


# --- SparseFillEmptyRowsTest -------------------------------------------------------------------------


def test_fill_number_and_float():
    for st in (st_5x6(), st_5x6(np.float64)):
        out, empty = sp.fill_empty_rows(st, -1)
        same(out, [[0, 0], [1, 0], [1, 3], [1, 4], [2, 0], [3, 2], [3, 3], [4, 0]],
             [0, 10, 13, 14, -1, 32, 33, -1], [5, 6])
        assert empty.tolist() == [False, False, True, False, True]


def test_fill_string():
    st = sp.SparseTensor(st_5x6().indices, np.array([b"a", b"b", b"c", b"d", b"e", b"f"], dtype=object),
                         np.array([5, 6]))
    out, empty = sp.fill_empty_rows(st, "")
    assert out.values.tolist() == [b"a", b"b", b"c", b"d", b"", b"e", b"f", b""]
    assert empty.tolist() == [False, False, True, False, True]


def test_no_empty_rows():
    st = sp.SparseTensor(np.array([[0, 0], [1, 0], [1, 3], [1, 4]]), np.array([0, 10, 13, 14], np.int32),
                         np.array([2, 6]))
    out, empty = sp.fill_empty_rows(st, -1)
    same(out, [[0, 0], [1, 0], [1, 3], [1, 4]], [0, 10, 13, 14], [2, 6])
    assert empty.tolist() == [False, False]


def test_no_empty_rows_and_unordered():
    st = sp.SparseTensor(np.array([[1, 2], [1, 3], [0, 1], [0, 3]]), np.array([1, 3, 2, 4]), np.array([2, 5]))
    out, empty = sp.fill_empty_rows(st, -1)
    same(out, [[0, 1], [0, 3], [1, 2], [1, 3]], [2, 4, 1, 3], [2, 5])
    assert empty.tolist() == [False, False]


def test_unordered():
    st = sp.SparseTensor(np.array([[2, 3], [2, 2], [0, 1], [0, 3]]), np.array([1, 3, 2, 4]), np.array([3, 5]))
    out, empty = sp.fill_empty_rows(st, -1)
    same(out, [[0, 1], [0, 3], [1, 0], [2, 3], [2, 2]], [2, 4, -1, 1, 3], [3, 5])
    assert empty.tolist() == [False, True, False]


def test_empty_indices_and_empty_output():
    out, empty = sp.fill_empty_rows(sp.SparseTensor(np.ones([0, 2]), np.ones([0]), np.array([2, 5])), -1)
    same(out, [[0, 0], [1, 0]], [-1, -1], [2, 5])
    assert empty.tolist() == [True, True]
    out, empty = sp.fill_empty_rows(sp.SparseTensor(np.ones([0, 2]), np.ones([0]), np.array([0, 3])), -1)
    assert out.indices.shape == (0, 2) and out.dense_shape.tolist() == [0, 3] and empty.tolist() == []


def test_fill_invalid_indices():
    st = sp.SparseTensor(np.array([[1, 2], [1, 3], [99, 1], [99, 3]]), np.array([1, 3, 2, 4]), np.array([2, 5]))
    with pytest.raises(InvalidArgumentError, match=r"indices\(2, 0\) is invalid"):
        sp.fill_empty_rows(st, -1)


# --- SparseAddTest, SparseReduceTest -----------------------------------------------------------------


def test_add_values():
    st = sp.SparseTensor(np.array([[0]]), np.array([1], np.float32), np.array([1]))
    assert sp.add(st, st).values.tolist() == [2]


REDUCE = sp.SparseTensor(np.array([[0, 0], [0, 2], [1, 1]]), np.array([1, 1, 1], np.int32), np.array([2, 3]))


@pytest.mark.parametrize("axes", [None, 0, [1], [0, 1], [1, 0], [-1], [1, -2]])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_sum_matches_numpy_on_the_dense_array(axes, keepdims):
    dense = sp.to_dense(REDUCE)
    expected = np.sum(dense, axis=None if axes is None else tuple(np.atleast_1d(axes)), keepdims=keepdims)
    np.testing.assert_array_equal(sp.reduce_sum(REDUCE, axes, keepdims), expected)
    np.testing.assert_array_equal(sp.to_dense(sp.reduce_sum(REDUCE, axes, keepdims, output_is_sparse=True)),
                                  np.asarray(expected))


def test_reduce_invalid_axes():
    for op in (sp.reduce_sum, sp.reduce_max):
        with pytest.raises(InvalidArgumentError, match="Invalid reduction dimension -3"):
            op(REDUCE, -3)
        with pytest.raises(InvalidArgumentError, match="Invalid reduction dimension 2"):
            op(REDUCE, 2)


# --- SparseSoftmaxTest -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", (np.float16, np.float32, np.float64))
def test_softmax_equals_the_dense_softmax(dtype):
    rng = np.random.default_rng(1618)
    x = rng.random((4, 7)).astype(dtype)
    out = sp.softmax(sparsify(x[None], thresh=0.0)).values.reshape(4, 7)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=1, keepdims=True), rtol=1e-3 if dtype == np.float16 else 1e-6)


@pytest.mark.parametrize("shape", ([2, 2, 2], [2, 1, 2, 2]))
def test_softmax_higher_ranks(shape):
    values = np.asarray([0.0, np.e, 1.0, 0.0, np.e, 0.0, np.e, np.e]).reshape(shape)
    st = sparsify(values, thresh=1e-2)
    out = sp.softmax(st)
    assert out.values.tolist() == [1.0, 1.0, 1.0, 0.5, 0.5]
    assert out.indices.tolist() == st.indices.tolist() and out.dense_shape.tolist() == shape


# --- SparseMinimumMaximumTest ------------------------------------------------------------------------


def test_minimum_maximum_basic():
    zero, one = sp.SparseTensor([[0]], [0], [7]), sp.SparseTensor([[0]], [1], [7])
    same(sp.maximum(zero, one), [[0]], [1], [7])
    same(sp.minimum(zero, one), [[0]], [0], [7])
    zero_2 = sp.SparseTensor([[1]], [0], [7])
    same(sp.maximum(zero, zero_2), [[0], [1]], [0, 0], [7])
    same(sp.minimum(zero, zero_2), [[0], [1]], [0, 0], [7])


@pytest.mark.parametrize("shape", [(13,), (6, 8), (1, 7, 1)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16, np.float32, np.float64])
def test_minimum_maximum_random(shape, dtype):
    rng = np.random.default_rng(1618)
    a = sparsify(rng.standard_normal(shape).astype(dtype), thresh=-0.5)
    b = sparsify(rng.standard_normal(shape).astype(dtype), thresh=-0.5)
    da, db = sp.to_dense(a), sp.to_dense(b)
    np.testing.assert_array_equal(sp.to_dense(sp.maximum(a, b)), np.maximum(da, db))
    np.testing.assert_array_equal(sp.to_dense(sp.minimum(a, b)), np.minimum(da, db))


def test_minimum_maximum_mismatched_shapes():
    with pytest.raises(InvalidArgumentError, match="Operands do not have the same ranks"):
        sp.maximum(sp.SparseTensor([[0, 0]], [0], [1, 1]), sp.SparseTensor([[0]], [1], [2]))
    with pytest.raises(InvalidArgumentError, match="Operands' shapes do not match"):
        sp.maximum(sp.SparseTensor([[0]], [0], [1]), sp.SparseTensor([[0]], [1], [2]))


# --- SparseTransposeTest -----------------------------------------------------------------------------


@pytest.mark.parametrize("rank", range(1, 6))
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_transpose_matches_the_dense_transpose(rank, dtype):
    rng = np.random.default_rng(1618 + rank)
    shape = rng.integers(1, 10, size=rank)
    dense = rng.standard_normal(shape).astype(dtype)
    perm = rng.permutation(rank)
    out = sp.transpose(sparsify(dense), perm=perm)
    expected = np.transpose(np.where(dense < 0.5, 0, dense).astype(dtype), perm)
    assert tuple(out.dense_shape.tolist()) == expected.shape
    np.testing.assert_array_equal(sp.to_dense(out), expected)
