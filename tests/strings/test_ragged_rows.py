"""tps.strings.RaggedRows: the padded form of TensorFlow's ragged results, and its RaggedTensor-like helpers."""

from __future__ import annotations

import numpy as np

import tpustrategy.strings as S


def test_fields_are_ragged_batchs():
    from tpustrategy._src.data.transformations.ragged_batch import RaggedBatch

    assert S.RaggedRows._fields == RaggedBatch._fields == ("values", "row_lengths", "shapes")


def test_helpers_match_tensorflows_ragged_tensor():
    r = S.split([b"a b c", b"", b"d"])
    assert r.to_list() == [[b"a", b"b", b"c"], [], [b"d"]]
    assert r.row_lengths.tolist() == [3, 0, 1] and r.row_lengths.dtype == np.int64
    assert r.row_splits.tolist() == [0, 3, 3, 4] and r.nrows() == 3
    assert r.flat_values.tolist() == [b"a", b"b", b"c", b"d"]
    assert r.to_tensor().tolist() == [[b"a", b"b", b"c"], [b"", b"", b""], [b"d", b"", b""]]
    assert r.to_tensor(default_value="?").tolist() == [[b"a", b"b", b"c"], [b"?", b"?", b"?"], [b"d", b"?", b"?"]]
    assert r.mask().tolist() == [[True, True, True], [False, False, False], [True, False, False]]
    assert r.dtype == object


def test_numeric_rows_pad_with_zero():
    r = S.unicode_decode([b"ab", b"c"], "UTF-8")
    assert r.values.tolist() == [[97, 98], [99, 0]] and r.values.dtype == np.int32
    assert r.to_tensor(default_value=-1).tolist() == [[97, 98], [99, -1]]


def test_a_matrix_of_strings_splits_into_rows_per_position():
    r = S.split(np.array([[b"a b", b"c"], [b"", b"d e f"]], dtype=object))
    assert r.values.shape == (2, 2, 3) and r.row_lengths.tolist() == [[2, 1], [0, 3]]
    assert r.shapes.tolist() == [[[2], [1]], [[0], [3]]] and r.nrows() == 4
