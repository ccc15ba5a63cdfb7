"""TensorFlow's regex_replace_op_test.py, string_length_op_test.py and string_to_number_op_test.py
(their inputs and asserted results), run on tps.strings."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.errors import InvalidArgumentError

# --- regex_replace_op_test ---------------------------------------------------------------------------


def test_forwarding_with_a_unicode_class():
    inp = S.substr(np.array([b"AbCdEfG", b"HiJkLmN"], dtype=object), pos=0, len=5)
    assert S.regex_replace(inp, "\\p{Ll}", ".").tolist() == [b"A.C.E", b"H.J.L"]


def test_remove_prefix():
    values = ["a:foo", "a:bar", "a:foo", "b:baz", "b:qux", "ca:b"]
    assert S.regex_replace(values, "^(a:|b:)", "", replace_global=False).tolist() == [
        b"foo", b"bar", b"foo", b"baz", b"qux", b"ca:b"]


def test_regex_replace_whole_match():
    assert S.regex_replace(["aba\naba", "abcdabcde"], "a.*a", "(\\0)").tolist() == [b"(aba)\n(aba)", b"(abcda)bcde"]


def test_empty_match():
    assert S.regex_replace(["abc", "1"], "", "x").tolist() == [b"xaxbxcx", b"x1x"]


def test_invalid_pattern():
    with pytest.raises(InvalidArgumentError, match="Invalid pattern"):
        S.regex_replace(["abc", "1"], "A[", "x")


def test_global():
    assert S.regex_replace(["ababababab", "abcabcabc", ""], "ab", "abc", True).tolist() == [
        b"abcabcabcabcabc", b"abccabccabcc", b""]


def test_scalar_input_gives_bytes():
    assert S.regex_replace("foo", "[a-z]", ".") == b"..."


def test_re2_syntax_not_pythons():
    # RE2 has no look-ahead: TensorFlow refuses the pattern, so do we.
    with pytest.raises(InvalidArgumentError, match="Invalid pattern"):
        S.regex_full_match(["ab"], "a(?=b)")
    # \z is RE2's end of text.
    assert S.regex_full_match(["ab"], "ab\\z").tolist() == [True]


# --- string_length_op_test ---------------------------------------------------------------------------


def test_string_length():
    strings = [[["1", "12"], ["123", "1234"], ["12345", "123456"]]]
    out = S.length(strings)
    assert out.tolist() == [[[1, 2], [3, 4], [5, 6]]] and out.dtype == np.int32


def test_unit():
    utf8 = [s.encode("utf-8") for s in ["H\xc3llo", "\U0001f604"]]
    assert S.length(utf8, unit="BYTE").tolist() == [6, 4]
    assert S.length(utf8, unit="UTF8_CHAR").tolist() == [5, 1]
    with pytest.raises(ValueError, match='not in the list of allowed values: "BYTE", "UTF8_CHAR"'):
        S.length(utf8, unit="XYZ")


# --- string_to_number_op_test ------------------------------------------------------------------------

_ERROR = "StringToNumberOp could not correctly convert string: "


def _check(out_type, good, bad):
    for text, number in good:
        (result,) = S.to_number([text], out_type=out_type)
        assert result.dtype == np.dtype(out_type)
        if math.isnan(number):
            assert math.isnan(result)
        else:
            np.testing.assert_allclose(result, number, rtol=1e-6)
    for text, message in bad:
        with pytest.raises(InvalidArgumentError, match=message):
            S.to_number([text], out_type=out_type)


def test_to_float():
    _check(np.float32, [("0", 0), ("3", 3), ("-1", -1), ("1.12", 1.12), ("0xF", 15), ("   -10.5", -10.5),
                        ("3.40282e+38", 3.40282e38), ("3.40283e+38", float("inf")), ("-3.40283e+38", float("-inf")),
                        ("NAN", float("nan")), ("INF", float("inf"))],
           [("10foobar", _ERROR + "10foobar")])


def test_to_double():
    _check(np.float64, [("0", 0), ("3", 3), ("-1", -1), ("1.12", 1.12), ("0xF", 15), ("   -10.5", -10.5),
                        ("3.40282e+38", 3.40282e38), ("3.40283e+38", 3.40283e38), ("-3.40283e+38", -3.40283e38),
                        ("NAN", float("nan")), ("INF", float("inf"))],
           [("10foobar", _ERROR + "10foobar")])


def test_to_int32():
    _check(np.int32, [("0", 0), ("3", 3), ("-1", -1), ("    -10", -10), ("-2147483648", -2147483648),
                      ("2147483647", 2147483647)],
           [("-2147483649", _ERROR + "-2147483649"), ("2147483648", _ERROR + "2147483648"),
            ("2.9", _ERROR + "2.9"), ("10foobar", _ERROR + "10foobar")])


def test_to_int64():
    _check(np.int64, [("0", 0), ("3", 3), ("-1", -1), ("    -10", -10), ("-2147483648", -2147483648),
                      ("2147483647", 2147483647), ("-2147483649", -2147483649), ("2147483648", 2147483648)],
           [("2.9", _ERROR + "2.9"), ("10foobar", _ERROR + "10foobar")])
