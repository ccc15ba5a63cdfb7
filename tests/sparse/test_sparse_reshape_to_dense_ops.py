"""TensorFlow's sparse_reshape_op_test.py and sparse_to_dense_op_py_test.py (their inputs and asserted
results; the latter's checks through tf.sparse.to_dense), run on tps.sparse."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.sparse as sp
from tpustrategy._src.errors import InvalidArgumentError

IND_5x6 = [[0, 0], [1, 0], [1, 3], [1, 4], [3, 2], [3, 3]]
VAL_5x6 = [0.0, 10.0, 13.0, 14.0, 32.0, 33.0]
IND_2x3x4 = [[0, 0, 1], [0, 1, 0], [0, 1, 2], [1, 0, 3], [1, 1, 1], [1, 1, 3], [1, 2, 2]]


def st_5x6():
    return sp.SparseTensor(np.array(IND_5x6, np.int64), np.array(VAL_5x6), np.array([5, 6], np.int64))


def st_2x3x4():
    return sp.SparseTensor(np.array(IND_2x3x4), np.array([1, 10, 12, 103, 111, 113, 122]), np.array([2, 3, 4]))


def test_shapes_with_inferred_dims():
    assert sp.reshape(st_5x6(), shape=(1, 5, 2, 3)).shape == (1, 5, 2, 3)
    assert sp.reshape(st_2x3x4(), shape=(2, -1)).shape == (2, 12)


def test_more_than_one_inferred_dim():
    with pytest.raises(InvalidArgumentError, match="only one output dimension may be -1"):
        sp.reshape(st_2x3x4(), shape=(-1, 2, -1))
    with pytest.raises(InvalidArgumentError, match="only one output dimension may be -1"):
        sp.reshape(st_5x6(), [4, -1, -1])


@pytest.mark.parametrize("shape", ([5, 6], [-1, 6]))
def test_same_shape(shape):
    out = sp.reshape(st_5x6(), shape)
    assert out.indices.tolist() == IND_5x6 and out.values.tolist() == VAL_5x6 and out.dense_shape.tolist() == [5, 6]


@pytest.mark.parametrize("shape", ([3, 10], [3, -1]))
def test_new_shape_same_rank(shape):
    out = sp.reshape(st_5x6(), shape)
    assert out.indices.tolist() == [[0, 0], [0, 6], [0, 9], [1, 0], [2, 0], [2, 1]]
    assert out.values.tolist() == VAL_5x6 and out.dense_shape.tolist() == [3, 10]


@pytest.mark.parametrize("shape", ([2, 3, 5], [2, -1, 5]))
def test_up_rank(shape):
    out = sp.reshape(st_5x6(), shape)
    assert out.indices.tolist() == [[0, 0, 0], [0, 1, 1], [0, 1, 4], [0, 2, 0], [1, 1, 0], [1, 1, 1]]
    assert out.dense_shape.tolist() == [2, 3, 5]


@pytest.mark.parametrize("shape", ([6, 4], [6, -1]))
def test_down_rank(shape):
    out = sp.reshape(st_2x3x4(), shape)
    assert out.indices.tolist() == [[0, 1], [1, 0], [1, 2], [3, 3], [4, 1], [4, 3], [5, 2]]
    assert out.dense_shape.tolist() == [6, 4]


def test_mismatched_sizes():
    with pytest.raises(InvalidArgumentError, match="Input to reshape is a tensor with 30 dense values"):
        sp.reshape(st_5x6(), [4, 7])
    with pytest.raises(InvalidArgumentError, match="requested shape requires a multiple"):
        sp.reshape(st_5x6(), [4, -1])
    with pytest.raises(InvalidArgumentError, match="requested shape requires a multiple"):
        sp.reshape(st_2x3x4(), shape=(-1, 7))


def test_dense_reshape_semantics():
    rng = np.random.default_rng(0)
    factors = np.array([2] * 4 + [3] * 4 + [5] * 2)
    orig_map = rng.integers(4, size=factors.shape)
    orig_shape = [int(np.prod(factors[orig_map == d])) for d in range(4)]
    new_map = rng.integers(3, size=factors.shape)
    new_shape = [int(np.prod(factors[new_map == d])) for d in range(3)]
    dense = rng.uniform(size=orig_shape)
    st = sp.SparseTensor(np.transpose(np.nonzero(dense < 0.5)), dense[dense < 0.5], np.array(orig_shape))
    new_dense = np.reshape(dense, new_shape)
    out = sp.reshape(st, new_shape)
    assert out.indices.tolist() == np.transpose(np.nonzero(new_dense < 0.5)).tolist()
    assert out.values.tolist() == new_dense[new_dense < 0.5].tolist() and out.dense_shape.tolist() == new_shape


@pytest.mark.parametrize("original, target, expected", [
    ([0], [-1, 1], [0, 1]), ([0], [-1, 1, 2], [0, 1, 2]), ([1, 0], [-1, 1], [0, 1])])
def test_implied_reshape_of_empty_tensors(original, target, expected):
    st = sp.SparseTensor(np.zeros([0, len(original)], np.int64), np.array([], np.float64), np.array(original))
    assert sp.reshape(st, target).dense_shape.tolist() == expected
    assert list(np.zeros(original).reshape(target).shape) == expected


# --- sparse_to_dense_op_py_test, through tf.sparse.to_dense ------------------------------------------


def to_dense(indices, shape, values, default, **kwargs):
    values = np.broadcast_to(np.asarray(values), (len(indices),))
    st = sp.SparseTensor(np.array(indices, np.int64).reshape(len(indices), len(shape)), values.copy(), np.array(shape))
    return sp.to_dense(st, default, **kwargs)


def test_to_dense_cases():
    assert to_dense([[1], [3]], [5], 1, 0).tolist() == [0, 1, 0, 1, 0]
    assert to_dense([[1], [3]], [5], np.float32(1.0), 0.0).tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert to_dense(np.zeros((0, 1)), [5], np.array([], np.float32), 0.0).tolist() == [0.0] * 5
    assert to_dense([[1], [3]], [5], np.array(b"a", dtype=object), b"b").tolist() == [b"b", b"a", b"b", b"a", b"b"]
    assert to_dense([[1], [3]], [5], [1, 2], -1).tolist() == [-1, 1, -1, 2, -1]
    assert to_dense([[1, 3], [2, 0]], [3, 4], 1, -1).tolist() == [[-1, -1, -1, -1], [-1, -1, -1, 1], [1, -1, -1, -1]]
    expected = -np.ones((3, 4, 2), np.int64)
    expected[1, 3, 0] = expected[2, 0, 1] = 1
    np.testing.assert_array_equal(to_dense([[1, 3, 0], [2, 0, 1]], [3, 4, 2], 1, -1), expected)


def test_out_of_bounds_with_and_without_validation():
    with pytest.raises(InvalidArgumentError, match=r"indices\[1\] = \[10\] is out of bounds: need 0 <= index < \[5\]"):
        to_dense([[1], [10]], [5], [1.0, 1.0], 0.0)
    with pytest.raises(InvalidArgumentError, match="out of bounds"):
        to_dense([[1], [10]], [5], [-1.0, 1.0], 0.0, validate_indices=False)


def test_repeating_and_unsorted_indices_with_and_without_validation():
    with pytest.raises(InvalidArgumentError, match=r"indices\[1\] = \[1\] is repeated"):
        to_dense([[1], [1]], [5], [-1.0, 1.0], 0.0)
    to_dense([[1], [1]], [5], [-1.0, 1.0], 0.0, validate_indices=False)
    with pytest.raises(InvalidArgumentError, match=r"indices\[1\] = \[1\] is out of order"):
        to_dense([[2], [1]], [5], [-1.0, 1.0], 0.0)
    assert to_dense([[2], [1]], [5], [-1.0, 1.0], 0.0, validate_indices=False).tolist() == [0, 1.0, -1.0, 0, 0]
