"""TensorFlow's sparse_slice_op_test.py and sparse_split_op_test.py (their inputs and asserted results),
run on tps.sparse."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.sparse as sp
from tpustrategy._src.errors import InvalidArgumentError

IND_4x6 = [[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4], [2, 0], [2, 3], [2, 5], [3, 0], [3, 2], [3, 3],
           [3, 5]]
VAL_4x6 = [0, 2, 4, 5, 11, 13, 14, 20, 23, 25, 30, 32, 33, 35]
IND_5x7 = [[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4], [1, 6], [2, 0], [2, 3], [2, 5], [3, 0], [3, 2],
           [3, 3], [3, 5], [4, 1], [4, 4], [4, 6]]
VAL_5x7 = [0, 2, 4, 5, 11, 13, 14, 16, 20, 23, 25, 30, 32, 33, 35, 41, 44, 46]
ST_4x6 = sp.SparseTensor(np.array(IND_4x6, np.int64), np.array(VAL_4x6, np.int64), np.array([4, 6]))
ST_5x7 = sp.SparseTensor(np.array(IND_5x7, np.int64), np.array(VAL_5x7, np.int64), np.array([5, 7]))
EMPTY_4x6 = sp.SparseTensor(np.empty((0, 2), np.int64), np.array([], np.int64), np.array([4, 6]))
ST_3x4x2 = sp.SparseTensor(
    np.array([[0, 0, 0], [0, 0, 1], [0, 2, 0], [0, 2, 1], [1, 1, 0], [1, 1, 1], [1, 3, 0], [1, 3, 1], [2, 2, 0],
              [2, 2, 1]], np.int64),
    np.array([s.encode() for s in ["a0", "a1", "b0", "b1", "c0", "c1", "d0", "d1", "e0", "e1"]], dtype=object),
    np.array([3, 4, 2]))


def same(out, indices, values, shape):
    assert out.indices.tolist() == indices and out.values.tolist() == values and out.dense_shape.tolist() == shape


# --- sparse_slice_op_test ----------------------------------------------------------------------------


def test_slice_matrix_rows():
    same(sp.slice(ST_4x6, [0, 0], [2, 6]), [[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4]],
         [0, 2, 4, 5, 11, 13, 14], [2, 6])
    same(sp.slice(ST_4x6, [2, 0], [3, 7]), [[0, 0], [0, 3], [0, 5], [1, 0], [1, 2], [1, 3], [1, 5]],
         [20, 23, 25, 30, 32, 33, 35], [2, 6])


def test_slice_matrix_uneven_cols():
    same(sp.slice(ST_5x7, [0, 0], [5, 3]), [[0, 0], [0, 2], [1, 1], [2, 0], [3, 0], [3, 2], [4, 1]],
         [0, 2, 11, 20, 30, 32, 41], [5, 3])
    same(sp.slice(ST_5x7, [0, 3], [5, 2]), [[0, 1], [1, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [4, 13, 14, 23, 33, 44],
         [5, 2])
    same(sp.slice(ST_5x7, [0, 5], [5, 2]), [[0, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [5, 16, 25, 35, 46], [5, 2])
    same(sp.slice(ST_5x7, [0, 6], [5, 2]), [[1, 0], [4, 0]], [16, 46], [5, 1])


def test_slice_matrix_uneven_rows():
    same(sp.slice(ST_5x7, [3, 0], [3, 7]), [[0, 0], [0, 2], [0, 3], [0, 5], [1, 1], [1, 4], [1, 6]],
         [30, 32, 33, 35, 41, 44, 46], [2, 7])
    same(sp.slice(ST_5x7, [4, 0], [2, 7]), [[0, 1], [0, 4], [0, 6]], [41, 44, 46], [1, 7])


def test_slice_all_rows_and_columns():
    same(sp.slice(ST_4x6, [3, 0], [2, 7]), [[0, 0], [0, 2], [0, 3], [0, 5]], [30, 32, 33, 35], [1, 6])
    same(sp.slice(ST_4x6, [0, 2], [5, 2]), [[0, 0], [1, 1], [2, 1], [3, 0], [3, 1]], [2, 13, 23, 32, 33], [4, 2])
    same(sp.slice(ST_4x6, [0, 4], [5, 1]), [[0, 0], [1, 0]], [4, 14], [4, 1])
    same(sp.slice(ST_4x6, [0, 5], [6, 3]), [[0, 0], [2, 0], [3, 0]], [5, 25, 35], [4, 1])


def test_slice_empty():
    same(sp.slice(EMPTY_4x6, [0, 0], [4, 1]), [], [], [4, 1])
    same(sp.slice(ST_4x6, [1, 1], [0, 0]), [], [], [0, 0])
    same(sp.slice(ST_4x6, [2, 1], [2, 1]), [], [], [2, 1])


# --- sparse_split_op_test ----------------------------------------------------------------------------


@pytest.mark.parametrize("axis", (0, -2))
def test_split_matrix_rows(axis):
    a, b = sp.split(sp_input=ST_4x6, num_split=2, axis=axis)
    same(a, [[0, 0], [0, 2], [0, 4], [0, 5], [1, 1], [1, 3], [1, 4]], [0, 2, 4, 5, 11, 13, 14], [2, 6])
    same(b, [[0, 0], [0, 3], [0, 5], [1, 0], [1, 2], [1, 3], [1, 5]], [20, 23, 25, 30, 32, 33, 35], [2, 6])


@pytest.mark.parametrize("axis", (1, -1))
def test_split_matrix_uneven_cols(axis):
    parts = sp.split(sp_input=ST_5x7, num_split=3, axis=axis)
    assert len(parts) == 3
    same(parts[0], [[0, 0], [0, 2], [1, 1], [2, 0], [3, 0], [3, 2], [4, 1]], [0, 2, 11, 20, 30, 32, 41], [5, 3])
    same(parts[1], [[0, 1], [1, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [4, 13, 14, 23, 33, 44], [5, 2])
    same(parts[2], [[0, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [5, 16, 25, 35, 46], [5, 2])
    parts = sp.split(sp_input=ST_5x7, num_split=4, axis=axis)
    same(parts[0], [[0, 0], [1, 1], [2, 0], [3, 0], [4, 1]], [0, 11, 20, 30, 41], [5, 2])
    same(parts[1], [[0, 0], [1, 1], [2, 1], [3, 0], [3, 1]], [2, 13, 23, 32, 33], [5, 2])
    same(parts[2], [[0, 0], [0, 1], [1, 0], [2, 1], [3, 1], [4, 0]], [4, 5, 14, 25, 35, 44], [5, 2])
    same(parts[3], [[1, 0], [4, 0]], [16, 46], [5, 1])


@pytest.mark.parametrize("axis", (0, -2))
def test_split_matrix_uneven_rows(axis):
    a, b = sp.split(sp_input=ST_5x7, num_split=2, axis=axis)
    assert a.dense_shape.tolist() == [3, 7] and a.values.tolist() == [0, 2, 4, 5, 11, 13, 14, 16, 20, 23, 25]
    same(b, [[0, 0], [0, 2], [0, 3], [0, 5], [1, 1], [1, 4], [1, 6]], [30, 32, 33, 35, 41, 44, 46], [2, 7])
    parts = sp.split(sp_input=ST_5x7, num_split=3, axis=axis)
    assert [p.dense_shape.tolist() for p in parts] == [[2, 7], [2, 7], [1, 7]]
    same(parts[2], [[0, 1], [0, 4], [0, 6]], [41, 44, 46], [1, 7])


@pytest.mark.parametrize("axis", (1, -1))
def test_split_all_columns(axis):
    parts = sp.split(sp_input=ST_4x6, num_split=6, axis=axis)
    assert [p.values.tolist() for p in parts] == [[0, 20, 30], [11], [2, 32], [13, 23, 33], [4, 14], [5, 25, 35]]
    assert all(p.dense_shape.tolist() == [4, 1] for p in parts)


@pytest.mark.parametrize("axis", (1, -2))
def test_split_then_concat(axis):
    out = sp.concat(1, sp.split(sp_input=ST_3x4x2, num_split=2, axis=axis))
    assert out.indices.tolist() == ST_3x4x2.indices.tolist()


@pytest.mark.parametrize("axis", (-3, 2))
def test_invalid_axis(axis):
    with pytest.raises(InvalidArgumentError, match=r"axis should be in range \[-2, 2\)"):
        sp.split(sp_input=ST_4x6, num_split=3, axis=axis)
    with pytest.raises(InvalidArgumentError, match="axis should be a scalar"):
        sp.split(sp_input=ST_4x6, num_split=3, axis=[1, 2])


def test_argument_errors():
    with pytest.raises(ValueError, match="sp_input is required"):
        sp.split()
    with pytest.raises(ValueError, match="num_split is required"):
        sp.split(sp_input=1)
    with pytest.raises(ValueError, match="axis is required"):
        sp.split(num_split=2, sp_input=1)


def test_split_empty():
    a, b = sp.split(sp_input=EMPTY_4x6, num_split=2, axis=0)
    same(a, [], [], [2, 6])
    same(b, [], [], [2, 6])
    a, b = sp.split(sp_input=EMPTY_4x6, num_split=2, axis=1)
    same(a, [], [], [4, 3])
    same(b, [], [], [4, 3])


@pytest.mark.parametrize("n", (250, 2500))
def test_big(n):
    indices = np.zeros([n, 2], dtype=np.int64)
    indices[:, 0] = np.arange(n)
    a, b = sp.split(sp_input=sp.SparseTensor(indices, np.zeros([n], np.float32), np.array([n, 3])), num_split=2, axis=0)
    assert a.indices.tolist() == indices[: n // 2].tolist()
    assert b.indices.tolist() == (indices[n // 2 :] - [n // 2, 0]).tolist()
    assert a.dense_shape.tolist() == b.dense_shape.tolist() == [n // 2, 3]


def test_index_out_of_bounds():
    st = sp.SparseTensor(np.array([[0, 0], [1, 10], [-1, 2]]), np.array([1.0, 2.0, 3.0]), np.array([3, 5]))
    with pytest.raises(InvalidArgumentError, match="out of bounds"):
        sp.split(sp_input=st, num_split=2, axis=1)
