"""TensorFlow's string_ngrams_op_test.py (its inputs and asserted results), run on tps.strings.ngrams."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.strings.ragged import from_rows


def ragged(rows):
    return from_rows(rows, (len(rows),), object)


FOUR_TWO = [[b"aa", b"bb", b"cc", b"dd"], [b"ee", b"ff"]]
ONE_THREE_TWO = [[b"a"], [b"b", b"c", b"d"], [b"e", b"f"]]


def test_unpadded_ngrams():
    assert S.ngrams(ragged(FOUR_TWO), ngram_width=3, separator=b"|").to_list() == [[b"aa|bb|cc", b"bb|cc|dd"], []]


@pytest.mark.parametrize("widths, expected", [
    ((2, 3), [[b"aa|bb", b"bb|cc", b"cc|dd", b"aa|bb|cc", b"bb|cc|dd"], [b"ee|ff"]]),
    ((3, 2), [[b"aa|bb|cc", b"bb|cc|dd", b"aa|bb", b"bb|cc", b"cc|dd"], [b"ee|ff"]]),
    ([2, 3], [[b"aa|bb", b"bb|cc", b"cc|dd", b"aa|bb|cc", b"bb|cc|dd"], [b"ee|ff"]]),
    ([3, 2], [[b"aa|bb|cc", b"bb|cc|dd", b"aa|bb", b"bb|cc", b"cc|dd"], [b"ee|ff"]]),
])
def test_multi_ngrams_in_the_order_given(widths, expected):
    assert S.ngrams(ragged(FOUR_TWO), ngram_width=widths, separator=b"|").to_list() == expected


FULLY_PADDED = [[b"LP|LP|a", b"LP|a|RP", b"a|RP|RP"], [b"LP|LP|b", b"LP|b|c", b"b|c|d", b"c|d|RP", b"d|RP|RP"],
                [b"LP|LP|e", b"LP|e|f", b"e|f|RP", b"f|RP|RP"]]


def test_fully_padded_ngrams_and_the_padding_cap():
    out = S.ngrams(ragged(ONE_THREE_TWO), ngram_width=3, separator=b"|", pad_values=(b"LP", b"RP"))
    assert out.to_list() == FULLY_PADDED
    out = S.ngrams(ragged(ONE_THREE_TWO), ngram_width=3, separator=b"|", pad_values=(b"LP", b"RP"), padding_width=10)
    assert out.to_list() == FULLY_PADDED


def test_singly_padded_ngrams():
    kw = dict(ngram_width=5, separator=b"|", pad_values=(b"LP", b"RP"), padding_width=1)
    assert S.ngrams(ragged(ONE_THREE_TWO), **kw).to_list() == [[], [b"LP|b|c|d|RP"], []]
    assert S.ngrams(ragged(ONE_THREE_TWO), preserve_short_sequences=True, **kw).to_list() == [
        [b"LP|a|RP"], [b"LP|b|c|d|RP"], [b"LP|e|f|RP"]]
    kw["ngram_width"] = (1, 5)
    assert S.ngrams(ragged(ONE_THREE_TWO), **kw).to_list() == [[b"a"], [b"b", b"c", b"d", b"LP|b|c|d|RP"], [b"e", b"f"]]


def test_single_padding_string():
    out = S.ngrams(ragged(ONE_THREE_TWO), ngram_width=5, separator=b"|", pad_values=b"[PAD]", padding_width=1)
    assert out.to_list() == [[], [b"[PAD]|b|c|d|[PAD]"], []]


def test_explicit_multiply_padded_ngrams():
    out = S.ngrams(ragged([[b"a"]]), ngram_width=5, separator=b"|", pad_values=(b"LP", b"RP"), padding_width=2)
    assert out.to_list() == [[b"LP|LP|a|RP|RP"]]


DENSE_EXPECTED = [[b"LP|LP|a", b"LP|a|z", b"a|z|RP", b"z|RP|RP"], [b"LP|LP|b", b"LP|b|", b"b||RP", b"|RP|RP"],
                  [b"LP|LP|e", b"LP|e|f", b"e|f|RP", b"f|RP|RP"]]


def test_dense_input_rank_3():
    data = np.array([[[b"a", b"z"], [b"b", b""]], [[b"b", b""], [b"e", b"f"]]], dtype=object)
    out = S.ngrams(data, ngram_width=3, separator=b"|", pad_values=(b"LP", b"RP"))
    assert isinstance(out, np.ndarray)
    assert out.tolist() == [[DENSE_EXPECTED[0], DENSE_EXPECTED[1]], [DENSE_EXPECTED[1], DENSE_EXPECTED[2]]]


def test_dense_and_list_input():
    data = [[b"a", b"z"], [b"b", b""], [b"e", b"f"]]
    out = S.ngrams(np.array(data, dtype=object), ngram_width=3, separator=b"|", pad_values=(b"LP", b"RP"))
    assert isinstance(out, np.ndarray) and out.tolist() == DENSE_EXPECTED
    assert S.ngrams(data, ngram_width=3, separator=b"|", pad_values=(b"LP", b"RP")).tolist() == DENSE_EXPECTED


def test_vector_input():
    out = S.ngrams([b"a", b"z"], ngram_width=3, separator=b"|", pad_values=(b"LP", b"RP"))
    assert out.tolist() == [b"LP|LP|a", b"LP|a|z", b"a|z|RP", b"z|RP|RP"]


def test_dense_input_with_multiple_ngrams():
    data = ragged([[b"a", b"b", b"c", b"d"], [b"e", b"f", b"g", b"h"]])
    assert S.ngrams(data, ngram_width=(1, 2, 3), separator=b"|").to_list() == [
        [b"a", b"b", b"c", b"d", b"a|b", b"b|c", b"c|d", b"a|b|c", b"b|c|d"],
        [b"e", b"f", b"g", b"h", b"e|f", b"f|g", b"g|h", b"e|f|g", b"f|g|h"]]


def test_input_with_no_values():
    out = S.ngrams(ragged([[], [], []]), (1, 2))
    assert out.row_lengths.tolist() == [0, 0, 0] and out.flat_values.tolist() == []


@pytest.mark.parametrize("data, kwargs, exception, error", [
    ([b"a", b"z"], dict(ngram_width=2, pad_values=5), TypeError, "pad_values must be a string, tuple of strings, or None."),
    ([b"a", b"z"], dict(ngram_width=2, pad_values=[5, 3]), TypeError,
     "pad_values must be a string, tuple of strings, or None."),
    ([b"a", b"z"], dict(ngram_width=2, padding_width=0, pad_values="X"), ValueError, "padding_width must be greater than 0."),
    ([b"a", b"z"], dict(ngram_width=2, padding_width=1), ValueError, "pad_values must be provided if padding_width is set."),
    (b"hello", dict(ngram_width=2, padding_width=1, pad_values="X"), ValueError, "Data must have rank>0"),
    ([b"hello", b"world"], dict(ngram_width=[1, 2, -1], padding_width=1, pad_values="X"), ValueError,
     "All ngram_widths must be greater than 0. Got .*"),
])
def test_errors(data, kwargs, exception, error):
    with pytest.raises(exception, match=error):
        S.ngrams(data, **kwargs)
