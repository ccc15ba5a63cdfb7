"""TensorFlow's reduce_join_op_test.py and unsorted_segment_join_op_test.py (their inputs and asserted
results), run on tps.strings."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.errors import InvalidArgumentError, OutOfRangeError


def _input_array(num_dims):
    """Each element is the binary of its linear index, shape [2] * num_dims."""
    strings = [f"{i:0{num_dims}b}".encode() for i in range(2**num_dims)]
    out = np.empty(len(strings), dtype=object)
    out[:] = strings
    return out.reshape([2] * num_dims)


def _joined_array(num_dims, reduce_dim):
    out = []
    for i in range(2 ** (num_dims - 1)):
        dims = f"{i:0{num_dims - 1}b}"
        out.append("".join((dims[:reduce_dim] + "%d" + dims[reduce_dim:]) % j for j in range(2)).encode())
    return np.array(out, dtype=object).reshape([2] * (num_dims - 1))


def text(x):
    return np.asarray(x, dtype=object).tolist()


RANK_TWO = [["this", "is", "a", "test"], ["please", "do", "not", "panic"]]


def test_helpers_match_tensorflows_truth():
    assert text(_joined_array(3, 0)) == [[b"000100", b"001101"], [b"010110", b"011111"]]
    assert text(_joined_array(3, 2)) == [[b"000001", b"010011"], [b"100101", b"110111"]]


def test_rank_one():
    assert S.reduce_join(["this", "is", "a", "test"], axis=0) == b"thisisatest"


def test_rank_two():
    assert text(S.reduce_join(RANK_TWO, axis=0)) == [b"thisplease", b"isdo", b"anot", b"testpanic"]
    assert text(S.reduce_join(RANK_TWO, axis=1)) == [b"thisisatest", b"pleasedonotpanic"]
    assert S.reduce_join(RANK_TWO, axis=None) == b"thisisatestpleasedonotpanic"
    out = S.reduce_join(RANK_TWO, axis=[])
    assert out.shape == (2, 4) and text(out) == [[w.encode() for w in row] for row in RANK_TWO]


@pytest.mark.parametrize("i", range(5))
def test_rank_five_and_negative_axes(i):
    for axis in (i, i - 5):
        out = S.reduce_join(_input_array(5), axis=axis)
        assert out.shape == (2,) * 4 and text(out) == text(_joined_array(5, i))


@pytest.mark.parametrize("i", range(6))
def test_singleton_dimension(i):
    arr = _input_array(5).reshape([2] * i + [1] + [2] * (5 - i))
    assert text(S.reduce_join(arr, axis=i)) == text(_input_array(5))


def test_separator():
    assert text(S.reduce_join(RANK_TWO, axis=0, separator="  ")) == [
        b"this  please", b"is  do", b"a  not", b"test  panic"]
    assert text(S.reduce_join(RANK_TWO, axis=1, separator="  ")) == [b"this  is  a  test", b"please  do  not  panic"]


def test_keep_dims():
    out = S.reduce_join(RANK_TWO, axis=0, keepdims=True)
    assert out.shape == (1, 4) and text(out) == [[b"thisplease", b"isdo", b"anot", b"testpanic"]]
    out = S.reduce_join(RANK_TWO, axis=1, keepdims=True)
    assert out.shape == (2, 1) and text(out) == [[b"thisisatest"], [b"pleasedonotpanic"]]
    out = S.reduce_join(RANK_TWO, axis=None, keepdims=True)
    assert out.shape == (1, 1) and text(out) == [[b"thisisatestpleasedonotpanic"]]
    assert S.reduce_join(RANK_TWO, axis=[], keepdims=True).shape == (2, 4)


@pytest.mark.parametrize("axis", [p for i in range(4) for p in itertools.permutations(range(3), i)])
def test_multi_index_equals_nested_single_joins(axis):
    arr = _input_array(3)
    truth = arr
    for index in axis:
        truth = S.reduce_join(truth, axis=index, keepdims=True, separator=" ")
    truth = np.asarray(truth, dtype=object)
    kept = S.reduce_join(arr, axis=list(axis), keepdims=True, separator=" ")
    assert np.asarray(kept).shape == truth.shape and text(kept) == text(truth)
    squeezed = S.reduce_join(arr, axis=list(axis), separator=" ")
    assert text(squeezed) == text(np.squeeze(truth, axis=tuple(axis)))


def test_invalid_reduction_indices():
    # TensorFlow 2.21 raises these eagerly as OutOfRangeError (graph mode: ValueError at tracing).
    with pytest.raises(OutOfRangeError, match="Invalid reduction dim"):
        S.reduce_join("", axis=0)
    with pytest.raises(OutOfRangeError, match="Invalid reduction dimension -3"):
        S.reduce_join([[""]], axis=-3)
    with pytest.raises(OutOfRangeError, match="Invalid reduction dimension 2"):
        S.reduce_join([[""]], axis=2)
    with pytest.raises(OutOfRangeError, match="Invalid reduction dimension -3"):
        S.reduce_join([[""]], axis=[0, -3])
    with pytest.raises(OutOfRangeError, match="Invalid reduction dimension 2"):
        S.reduce_join([[""]], axis=[0, 2])
    with pytest.raises(InvalidArgumentError, match="Duplicate reduction dimension 1"):
        S.reduce_join([[""]], axis=[-1, 1])


def test_zero_dims():
    inputs = np.zeros([0, 1], dtype=object)
    assert text(S.reduce_join(inputs, axis=0)) == [b""]
    assert S.reduce_join(inputs, axis=1).shape == (0,)


# --- unsorted_segment_join_op_test -------------------------------------------------------------------

GRID = [["Y", "q", "c"], ["Y", "6", "6"], ["p", "G", "a"]]


def test_basic():
    out = S.unsorted_segment_join(inputs=GRID, segment_ids=[1, 0, 1], num_segments=2, separator=":")
    assert out.shape == (2, 3) and text(out) == [[b"Y", b"6", b"6"], [b"Y:p", b"q:G", b"c:a"]]


def test_segment_ids_and_input_empty():
    out = S.unsorted_segment_join(np.array([], dtype=object), np.array([], np.int32), 3, separator=":")
    assert text(out) == [b"", b"", b""]


@pytest.mark.parametrize("dtype", (np.int32, np.int64))
def test_id_types(dtype):
    out = S.unsorted_segment_join(GRID, np.array([1, 0, 1], dtype), np.array(2, dtype), separator=":")
    assert text(out) == [[b"Y", b"6", b"6"], [b"Y:p", b"q:G", b"c:a"]]


def test_multiple_segment_join():
    first = S.unsorted_segment_join(GRID, [1, 0, 1], 2, separator=":")
    assert text(S.unsorted_segment_join(first, [1, 1], 2, separator="")) == [
        [b"", b"", b""], [b"YY:p", b"6q:G", b"6c:a"]]


@pytest.mark.parametrize("inputs, segment_ids, num_segments, expected", [
    ([[[["q"], ["s"]], [["f"], ["F"]], [["h"], ["0"]]], [[["E"], ["j"]], [["2"], ["k"]], [["N"], ["d"]]],
      [[["G"], ["M"]], [["1"], ["S"]], [["N"], ["7"]]], [[["8"], ["W"]], [["W"], ["G"]], [["j"], ["d"]]]],
     [1, 1, 0, 2], 3,
     [[[["G"], ["M"]], [["1"], ["S"]], [["N"], ["7"]]], [[["q:E"], ["s:j"]], [["f:2"], ["F:k"]], [["h:N"], ["0:d"]]],
      [[["8"], ["W"]], [["W"], ["G"]], [["j"], ["d"]]]]),
    ([[["Q", "b"], ["c", "p"]], [["i", "9"], ["n", "b"]], [["T", "h"], ["g", "z"]]],
     [[0, 1], [1, 0], [1, 0]], 2, [["Q:n:g", "b:b:z"], ["c:i:T", "p:9:h"]]),
    ([[["Q", "b"], ["b", "p"]], [["i", "9"], ["n", "b"]], [["T", "h"], ["g", "z"]]],
     [[[2, 1], [0, 0]], [[2, 0], [2, 2]], [[0, 2], [1, 0]]], 3, ["b:p:9:T:z", "b:g", "Q:i:n:b:h"]),
    ([[["z"], ["h"]], [["c"], ["z"]], [["V"], ["T"]]], [0, 1, 1], 3, [[["z"], ["h"]], [["c:V"], ["z:T"]], [[""], [""]]]),
])
def test_different_dims(inputs, segment_ids, num_segments, expected):
    out = S.unsorted_segment_join(inputs, segment_ids, num_segments, separator=":")
    assert out.shape == np.array(expected).shape
    assert text(out) == np.vectorize(lambda s: s.encode(), otypes=[object])(np.array(expected)).tolist()


@pytest.mark.parametrize("separator, expected", [("", b"thisisatest"), (":", b"this:is:a:test"),
                                                 ("UNK", b"thisUNKisUNKaUNKtest")])
def test_separators(separator, expected):
    assert text(S.unsorted_segment_join(["this", "is", "a", "test"], [0, 0, 0, 0], 1, separator=separator)) == [expected]


@pytest.mark.parametrize("segment_ids, num_segments", [([1, 0, 1], 1), ([1, 0, 1, 1], 2), ([], 2), ([-1, 0, -1], 1)])
def test_bad_segment_ids_are_invalid_argument_errors(segment_ids, num_segments):
    with pytest.raises(InvalidArgumentError):
        S.unsorted_segment_join(GRID, np.array(segment_ids, np.int32), num_segments, separator=":")


def test_empty_input_with_ids_is_an_error():
    with pytest.raises(InvalidArgumentError):
        S.unsorted_segment_join(np.array([], dtype=object), [1, 0, 1], 2, separator=":")
