"""TensorFlow's sparse_concat_op_test.py (its inputs and asserted results), run on tps.sparse.concat."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.sparse as sp
from tpustrategy._src.errors import InvalidArgumentError


def make(ind, val, shape, dtype=np.float32):
    values = np.array(val, dtype=dtype) if dtype is not object else np.array([v.encode() for v in val], dtype=object)
    return sp.SparseTensor(np.array(ind, np.int64).reshape(-1, len(shape)), values, np.array(shape, np.int64))


A_3x3 = make([[0, 2], [1, 0], [2, 0], [2, 2]], [1, 2, 3, 4], [3, 3])
B_3x5 = make([[1, 1], [2, 0], [2, 3], [2, 4]], [1, 2, 1, 0], [3, 5])
C_3x2 = make([[1, 0], [2, 0]], [1, 2], [3, 2])
D_2x3 = make([[0, 1], [1, 0], [1, 2]], [1, 1, 2], [2, 3])
E_2x3x4 = make([[0, 0, 1], [0, 1, 0], [0, 1, 2], [1, 0, 3], [1, 1, 1], [1, 1, 3], [1, 2, 2]],
               [1, 10, 12, 103, 111, 113, 122], [2, 3, 4])


def none(shape):
    return make(np.empty((0, len(shape))), [], shape)


def same(out, indices, values, shape):
    assert out.indices.tolist() == indices and out.values.tolist() == values and out.dense_shape.tolist() == shape


@pytest.mark.parametrize("axis", (-2000, 1, 2000))
def test_concat_one_input_ignores_the_axis(axis):
    same(sp.concat(axis, [A_3x3]), [[0, 2], [1, 0], [2, 0], [2, 2]], [1, 2, 3, 4], [3, 3])


@pytest.mark.parametrize("axis", (-1, 1))
def test_concat_two(axis):
    same(sp.concat(axis, [A_3x3, B_3x5]),
         [[0, 2], [1, 0], [1, 4], [2, 0], [2, 2], [2, 3], [2, 6], [2, 7]], [1, 2, 1, 3, 4, 2, 1, 0], [3, 8])


@pytest.mark.parametrize("axis", (-2, 0))
def test_concat_dim0(axis):
    same(sp.concat(axis, [A_3x3, D_2x3]), [[0, 2], [1, 0], [2, 0], [2, 2], [3, 1], [4, 0], [4, 2]],
         [1, 2, 3, 4, 1, 1, 2], [5, 3])


@pytest.mark.parametrize("axis", (-1, 1))
def test_concat_three(axis):
    same(sp.concat(axis, [A_3x3, B_3x5, C_3x2]),
         [[0, 2], [1, 0], [1, 4], [1, 8], [2, 0], [2, 2], [2, 3], [2, 6], [2, 7], [2, 8]],
         [1, 2, 1, 1, 3, 4, 2, 1, 0, 2], [3, 10])


def test_concat_no_non_zeros():
    out = sp.concat(1, [none((2, 3, 4)), none((2, 7, 4)), none((2, 5, 4))])
    assert out.indices.shape == (0, 3) and out.values.shape == (0,) and out.dense_shape.tolist() == [2, 15, 4]


def test_concat_some_no_non_zeros():
    out = sp.concat(1, [none((2, 7, 4)), E_2x3x4, none((2, 5, 4))])
    assert out.indices.tolist() == (E_2x3x4.indices + [0, 7, 0]).tolist()
    assert out.values.tolist() == E_2x3x4.values.tolist() and out.dense_shape.tolist() == [2, 15, 4]


@pytest.mark.parametrize("axis", (-1, 1))
def test_concat_non_numeric(axis):
    a = make([[0, 2], [1, 0], [2, 0], [2, 2]], ["a", "b", "c", "d"], [3, 3], object)
    b = make([[1, 1], [2, 0], [2, 3], [2, 4]], ["e", "f", "g", "h"], [3, 5], object)
    same(sp.concat(axis, [a, b]), [[0, 2], [1, 0], [1, 4], [2, 0], [2, 2], [2, 3], [2, 6], [2, 7]],
         [b"a", b"b", b"e", b"c", b"d", b"f", b"g", b"h"], [3, 8])


@pytest.mark.parametrize("axis", (-1, 1))
@pytest.mark.parametrize("expand", (False, True))
def test_mismatched_rank_is_a_value_error(axis, expand):
    with pytest.raises(ValueError, match="has rank 3 but input 0 has rank 2"):
        sp.concat(axis, [A_3x3, E_2x3x4], expand_nonconcat_dims=expand)


@pytest.mark.parametrize("axis", (-1, 1))
def test_mismatched_shapes(axis):
    with pytest.raises(InvalidArgumentError, match="Input shapes must match"):
        sp.concat(axis, [A_3x3, B_3x5, C_3x2, D_2x3])


@pytest.mark.parametrize("axis0", (-2, 0))
@pytest.mark.parametrize("axis1", (-1, 1))
def test_mismatched_shapes_expand_nonconcat_dims(axis0, axis1):
    inputs = [A_3x3, B_3x5, C_3x2, D_2x3]
    same(sp.concat(axis0, inputs, expand_nonconcat_dims=True),
         [[0, 2], [1, 0], [2, 0], [2, 2], [4, 1], [5, 0], [5, 3], [5, 4], [7, 0], [8, 0], [9, 1], [10, 0], [10, 2]],
         [1, 2, 3, 4, 1, 2, 1, 0, 1, 2, 1, 1, 2], [11, 5])
    same(sp.concat(axis1, inputs, expand_nonconcat_dims=True),
         [[0, 2], [0, 11], [1, 0], [1, 4], [1, 8], [1, 10], [1, 12], [2, 0], [2, 2], [2, 3], [2, 6], [2, 7], [2, 8]],
         [1, 1, 2, 1, 1, 1, 2, 3, 4, 2, 1, 0, 2], [3, 13])


def test_concat_shape_github_21964():
    x = sp.SparseTensor(indices=[[0, 0], [1, 1]], values=[1, 2], dense_shape=[2, 2])
    assert sp.concat(-1, [x, x]).shape == (2, 4)
