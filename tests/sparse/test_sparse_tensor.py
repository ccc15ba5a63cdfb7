"""tps.sparse.SparseTensor and hand-computed cases after TensorFlow's sparse_ops_test.py / sparse_concat_op_test.py."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.sparse as sp
from tpustrategy._src.data.transformations.sparse_batch import SparseBatch
from tpustrategy._src.errors import InvalidArgumentError


def test_fields_are_sparse_batchs_in_the_same_order():
    assert sp.SparseTensor._fields == SparseBatch._fields == ("indices", "values", "dense_shape")


def test_lists_become_tensorflows_dtypes():
    st = sp.SparseTensor(indices=[[0, 0], [1, 2]], values=[1, 2], dense_shape=[3, 4])
    assert st.indices.dtype == np.int64 and st.dense_shape.dtype == np.int64 and st.values.dtype == np.int32
    assert sp.SparseTensor([[0]], [1.5], [2]).values.dtype == np.float32
    assert st.shape == (3, 4) and st.dtype == np.int32
    assert st.with_values(np.array([5, 6])).values.tolist() == [5, 6]


def test_ops_accept_a_sparse_batch_and_return_sparse_tensors():
    batch = SparseBatch(np.array([[0, 1], [1, 0]]), np.array([b"x", b"y"], dtype=object), np.array([2, 2]))
    assert sp.to_dense(batch).tolist() == [[b"", b"x"], [b"y", b""]]
    assert sp.to_dense(batch, default_value="-").tolist() == [[b"-", b"x"], [b"y", b"-"]]
    assert isinstance(sp.reorder(batch), sp.SparseTensor)


def test_from_dense_round_trips_through_to_dense():
    x = np.array([[0, 3, 0], [4, 0, 0], [0, 0, 5]], np.int32)
    st = sp.from_dense(x)
    assert st.indices.tolist() == [[0, 1], [1, 0], [2, 2]] and st.values.tolist() == [3, 4, 5]
    np.testing.assert_array_equal(sp.to_dense(st), x)


def test_concat_along_columns_of_2x3_and_2x2():
    # sparse_concat_op_test: [2, 3] and [2, 2] -> [2, 5], entries shifted by the first's width.
    a = sp.SparseTensor([[0, 2], [1, 0]], [1, 2], [2, 3])
    b = sp.SparseTensor([[0, 0], [1, 1]], [3, 4], [2, 2])
    out = sp.concat(1, [a, b])
    assert out.dense_shape.tolist() == [2, 5]
    assert sp.to_dense(out).tolist() == [[0, 0, 1, 3, 0], [2, 0, 0, 0, 4]]


def test_reshape_with_minus_one_keeps_every_entry():
    st = sp.SparseTensor([[0, 0, 0], [1, 2, 3]], [7, 8], [2, 3, 4])
    out = sp.reshape(st, [-1, 12])
    assert out.dense_shape.tolist() == [2, 12] and out.indices.tolist() == [[0, 0], [1, 11]]


def test_slice_shifts_and_cuts():
    st = sp.SparseTensor([[0, 0], [1, 3], [2, 2]], [1, 2, 3], [3, 4])
    out = sp.slice(st, [1, 2], [5, 5])
    assert out.dense_shape.tolist() == [2, 2] and out.indices.tolist() == [[0, 1], [1, 0]]
    assert out.values.tolist() == [2, 3]


def test_a_non_sparse_argument_names_the_fix():
    with pytest.raises(TypeError, match=r"(?s)`sp_input` must be a SparseTensor.*from_dense"):
        sp.to_dense(np.zeros((2, 2)))


def test_mismatched_fields_say_what_a_sparse_tensor_needs():
    with pytest.raises(InvalidArgumentError, match=r"indices \[nnz, rank\], values \[nnz\]"):
        sp.to_dense(sp.SparseTensor(np.zeros((2, 2), np.int64), np.array([1]), np.array([3, 3])))


def test_unordered_indices_raise_tensorflows_message_with_the_fix():
    st = sp.SparseTensor([[1, 0], [0, 0]], [1, 2], [2, 2])
    with pytest.raises(InvalidArgumentError, match=r"(?s)indices\[1\] = \[0,0\] is out of order.*reorder"):
        sp.to_dense(st)
    assert sp.to_dense(sp.reorder(st)).tolist() == [[2, 0], [1, 0]]


def test_placeholders_say_why():
    from tpustrategy._src.not_provided import NotProvidedError

    with pytest.raises(NotProvidedError, match="IndexedSlices"):
        sp.mask(None, None)
