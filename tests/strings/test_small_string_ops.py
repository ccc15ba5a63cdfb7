"""TensorFlow's string_join_op_test.py, string_bytes_split_op_test.py, string_lower_op_test.py,
string_upper_op_test.py and regex_full_match_op_test.py (their inputs and asserted results; dense inputs),
run on tps.strings."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.errors import InvalidArgumentError


def as_list(value):
    return value.to_list() if hasattr(value, "to_list") else np.asarray(value, dtype=object).tolist()


def test_string_join():
    input0, input1, input2 = ["a", "b"], "a", [["b"], ["c"]]
    assert as_list(S.join([input0, input1])) == [b"aa", b"ba"]
    assert as_list(S.join([input0, input1], separator="--")) == [b"a--a", b"b--a"]
    assert as_list(S.join([input0, input1, input0], separator="--")) == [b"a--a--a", b"b--a--b"]
    assert S.join([input1] * 4, separator="!") == b"a!a!a!a"
    assert as_list(S.join([input2] * 2, separator="")) == [[b"bb"], [b"cc"]]
    with pytest.raises(ValueError):  # inconsistent shapes
        S.join([input0, input2])


@pytest.mark.parametrize("source, expected", [
    (b"hello", [b"h", b"e", b"l", b"l", b"o"]),
    ([b"hello", b"123"], [[b"h", b"e", b"l", b"l", b"o"], [b"1", b"2", b"3"]]),
    ([[b"abc", b"de"], [b"fgh", b""]], [[[b"a", b"b", b"c"], [b"d", b"e"]], [[b"f", b"g", b"h"], []]]),
    (b"", []),
    (b"\x00", [b"\x00"]),
    ("仅今年前".encode(), [b"\xe4", b"\xbb", b"\x85", b"\xe4", b"\xbb", b"\x8a", b"\xe5", b"\xb9", b"\xb4", b"\xe5",
                          b"\x89", b"\x8d"]),
])
def test_bytes_split(source, expected):
    value = source if isinstance(source, bytes) else np.array(source, dtype=object)
    assert as_list(S.bytes_split(value)) == expected


def test_lower():
    assert as_list(S.lower(["Pigs on The Wing", "aNimals"])) == [b"pigs on the wing", b"animals"]
    assert as_list(S.lower([["pigS on THE wIng", "aniMals"], [" hello ", "\n\tWorld! \r \n"]])) == [
        [b"pigs on the wing", b"animals"], [b" hello ", b"\n\tworld! \r \n"]]
    assert as_list(S.lower([["ÓÓSSCHLOË"]], encoding="utf-8")) == [[b"\xc3\xb3\xc3\xb3sschlo\xc3\xab"]]


def test_upper():
    assert as_list(S.upper(["Pigs on The Wing", "aNimals"])) == [b"PIGS ON THE WING", b"ANIMALS"]
    assert as_list(S.upper([["pigS on THE wIng", "aniMals"], [" hello ", "\n\tWorld! \r \n"]])) == [
        [b"PIGS ON THE WING", b"ANIMALS"], [b" HELLO ", b"\n\tWORLD! \r \n"]]
    assert as_list(S.upper([["óósschloë"]], encoding="utf-8")) == [["ÓÓSSCHLOË".encode()]]


def test_ascii_case_leaves_other_bytes():
    assert S.lower("ÀB") == "Àb".encode() and S.upper("àb") == "àB".encode()


def test_regex_full_match():
    assert S.regex_full_match(["abaaba", "abcdabcde"], "a.*a").tolist() == [True, False]
    assert S.regex_full_match([["abaaba", "abcdabcde"], ["acdcba", "ebcda"]], "a.*a").tolist() == [
        [True, False], [True, False]]
    assert S.regex_full_match(["abc", "1"], "").tolist() == [False, False]
    with pytest.raises(InvalidArgumentError, match="Invalid pattern"):
        S.regex_full_match(["abc", "1"], "A[")


def test_regex_full_match_scalar_and_pattern_tensor():
    assert S.regex_full_match("foo", np.array(b"[a-z]*", dtype=object)) == np.True_
    assert bool(S.regex_full_match("foo", "[a-z]")) is False
