"""Batching `SparseTensor` dataset elements (TensorFlow's ``Dataset.batch`` of ``tf.SparseTensor``).

TensorFlow's rule: element ``i``'s index rows get ``i`` prepended, values are concatenated in
order, and the batch's dense shape is ``[batch, max of each dimension over the elements]``;
``unbatch`` gives each row back with the batch's inner dense shape. Expected values below are
worked out by hand from that rule.
"""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.sparse.batching import concat_sparse_batches, slice_rows, split_rows

ST = tps.sparse.SparseTensor


def _elements():
    return [
        ST(np.array([[0, 1], [1, 2]], np.int64), np.array([1.0, 2.0], np.float32), np.array([2, 3], np.int64)),
        ST(np.array([[2, 0]], np.int64), np.array([3.0], np.float32), np.array([3, 1], np.int64)),
        ST(np.zeros((0, 2), np.int64), np.zeros((0,), np.float32), np.array([1, 1], np.int64)),
    ]


def _dataset():
    elements = _elements()
    return tpsd.Dataset.range(3).map(lambda i: elements[int(i)])


def _as_lists(st):
    return np.asarray(st.indices).tolist(), np.asarray(st.values).tolist(), np.asarray(st.dense_shape).tolist()


def test_batch_prepends_the_batch_index_and_takes_the_max_of_each_dimension():
    (batch,) = list(_dataset().batch(3))
    assert isinstance(batch, ST)
    assert _as_lists(batch) == ([[0, 0, 1], [0, 1, 2], [1, 2, 0]], [1.0, 2.0, 3.0], [3, 3, 3])
    assert batch.values.dtype == np.float32 and batch.indices.dtype == np.int64
    assert tps.sparse.to_dense(batch)[0].tolist() == [[0, 1, 0], [0, 0, 2], [0, 0, 0]]


def test_batch_with_a_short_last_batch_and_drop_remainder():
    batches = list(_dataset().batch(2))
    assert [_as_lists(b) for b in batches] == [
        ([[0, 0, 1], [0, 1, 2], [1, 2, 0]], [1.0, 2.0, 3.0], [2, 3, 3]),
        ([], [], [1, 1, 1]),
    ]
    assert np.asarray(batches[1].indices).shape == (0, 3)
    dropped = _dataset().batch(2, drop_remainder=True)
    assert [_as_lists(b) for b in dropped] == [_as_lists(batches[0])]
    spec = dropped.element_spec
    assert isinstance(spec, ST)
    assert (spec.indices.shape, spec.values.shape, spec.dense_shape.shape) == ((None, 3), (None,), (3,))
    assert spec.values.dtype == np.float32


def test_batch_of_a_structure_holding_a_sparse_component():
    elements = _elements()
    ds = tpsd.Dataset.range(3).map(lambda i: {"label": np.int32(i), "sparse": elements[int(i)]})
    (batch,) = list(ds.batch(3))
    assert batch["label"].tolist() == [0, 1, 2]
    assert _as_lists(batch["sparse"]) == ([[0, 0, 1], [0, 1, 2], [1, 2, 0]], [1.0, 2.0, 3.0], [3, 3, 3])


def test_unbatch_gives_each_row_with_the_batch_inner_shape():
    rows = list(_dataset().batch(3).unbatch())
    assert [_as_lists(r) for r in rows] == [
        ([[0, 1], [1, 2]], [1.0, 2.0], [3, 3]),
        ([[2, 0]], [3.0], [3, 3]),
        ([], [], [3, 3]),
    ]


def test_batch_of_different_ranks_raises_invalid_argument():
    pieces = [ST([[0]], [1.0], [2]), ST([[0, 0]], [1.0], [2, 2])]
    ds = tpsd.Dataset.range(2).map(lambda i: pieces[int(i)])
    with pytest.raises(tps.errors.InvalidArgumentError, match="different ranks"):
        list(ds.batch(2))


def test_split_rows_rebases_each_piece():
    (batch,) = list(_dataset().batch(3))
    first, second = split_rows(batch, [2, 1])
    assert _as_lists(first) == ([[0, 0, 1], [0, 1, 2], [1, 2, 0]], [1.0, 2.0, 3.0], [2, 3, 3])
    assert _as_lists(second) == ([], [], [1, 3, 3])
    middle = slice_rows(batch, 1, 2)
    assert _as_lists(middle) == ([[0, 2, 0]], [3.0], [1, 3, 3])


def test_concat_sparse_batches_shifts_rows_and_takes_the_max_inner_shape():
    a = ST(np.array([[0, 1], [1, 0]], np.int64), np.array([5, 6], np.int32), np.array([2, 3], np.int64))
    b = ST(np.array([[0, 3]], np.int64), np.array([7], np.int32), np.array([1, 4], np.int64))
    joined = concat_sparse_batches([a, b])
    assert _as_lists(joined) == ([[0, 1], [1, 0], [2, 3]], [5, 6, 7], [3, 4])


def test_padded_batch_of_sparse_components_raises_tensorflows_type_error():
    with pytest.raises(TypeError, match="Batching of padded sparse tensors is not currently supported"):
        _dataset().padded_batch(2)
