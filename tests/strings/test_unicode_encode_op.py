"""TensorFlow's unicode_encode_op_test.py (its inputs and asserted results), run on tps.strings.unicode_encode."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.strings.ragged import from_rows

ENCODINGS = ("UTF-8", "UTF-16-BE", "UTF-32-BE")
MIXED = [ord("H"), ord("e"), 0x7FFFFFFF, -1, ord("o"), 0, ord("\b"), 0x1F600, 0xD83D, 0xDE00, 0xFDD0, 0xFFFE,
         0xFFFF, 0x10FFFF, 0x110000]


def test_scalar_is_a_value_error():
    with pytest.raises(ValueError, match="at least one dimension"):
        S.unicode_encode(72, "UTF-8")
    with pytest.raises(ValueError, match="at least one dimension"):
        S.unicode_encode(np.int32(72), "UTF-8")


def test_required_parameters():
    with pytest.raises(TypeError):
        S.unicode_encode()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        S.unicode_encode(72)  # type: ignore[call-arg]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_strict_errors_valid(encoding):
    value = np.array([ord("H"), ord("e"), ord("o"), 0, ord("\b"), 0x1F600, 0xFDD0, 0xFFFE, 0xFFFF, 0x10FFFF], np.int32)
    assert S.unicode_encode(value, encoding, "strict") == "Heo\0\b\U0001f600\ufdd0\ufffe\uffff\U0010ffff".encode(encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("value", ([-1], [0x110000], [0xD83D, 0xDE00]))
def test_strict_errors(encoding, value):
    with pytest.raises(InvalidArgumentError, match="out of range for Unicode, or is a surrogate"):
        S.unicode_encode(np.array(value, np.int32), encoding, "strict")


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_ignore_errors(encoding):
    expected = "Heo\0\b\U0001f600\ufdd0\ufffe\uffff\U0010ffff".encode(encoding)
    assert S.unicode_encode(np.array(MIXED, np.int32), encoding, "ignore") == expected
    assert S.unicode_encode(np.array([0xD83D, 0xDE00], np.int32), encoding, "ignore") == b""


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_replace_errors(encoding):
    expected = "He\ufffd\ufffdo\0\b\U0001f600\ufffd\ufffd\ufdd0\ufffe\uffff\U0010ffff\ufffd".encode(encoding)
    assert S.unicode_encode(np.array(MIXED, np.int32), encoding, "replace") == expected
    short = np.array([ord("H"), ord("e"), 0x7FFFFFFF, -1, ord("o")], np.int32)
    assert S.unicode_encode(short, encoding, "replace", ord("o")) == "Heooo".encode(encoding)
    assert S.unicode_encode(short, encoding) == "He\ufffd\ufffdo".encode(encoding)
    assert S.unicode_encode(np.array([0xD801], np.int32), encoding, "replace", 0x41) == "A".encode(encoding)
    assert S.unicode_encode(np.array([0x1FFFF], np.int32), encoding, "replace", 0x41) == "\U0001ffff".encode(encoding)
    with pytest.raises(InvalidArgumentError, match="replacement_char out of unicode codepoint range"):
        S.unicode_encode(short, encoding, "replace", 0x110000)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_vector(encoding):
    assert S.unicode_encode(np.array([72, 101, 108, 108, 111], np.int32), encoding) == "Hello".encode(encoding)
    assert S.unicode_encode(np.array([72, 101, 0xC3, 0xC3, 0x1F604], np.int32), encoding) == (
        "He\xc3\xc3\U0001f604".encode(encoding))
    assert S.unicode_encode(np.array([72], np.int32), encoding) == b"H".decode().encode(encoding)
    assert S.unicode_encode(np.array([0x1F604], np.int32), encoding) == "\U0001f604".encode(encoding)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_matrix_and_higher_ranks(encoding):
    m = np.array([[72, 0x1F604, 108, 108, 111], [87, 0x1F604, 114, 108, 100]], np.int32)
    assert S.unicode_encode(m, encoding).tolist() == ["H\U0001f604llo".encode(encoding), "W\U0001f604rld".encode(encoding)]
    words = [["Hello", "World"], ["fixed", "words"], ["Hyper", "cube."]]
    cube = np.array([[[ord(c) for c in w] for w in row] for row in words], np.int32)
    assert S.unicode_encode(cube, encoding).tolist() == [[w.encode(encoding) for w in row] for row in words]
    assert S.unicode_encode(cube[:, :, None, :], encoding).tolist() == [
        [[w.encode(encoding)] for w in row] for row in words]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_ragged_matrix(encoding):
    rows = [[ord("H"), 0xC3, ord("l"), ord("l"), ord("o")], [ord("W"), 0x1F604, ord("r"), ord("l"), ord("d"), ord(".")]]
    ragged = from_rows(rows, (2,), np.int32)
    assert S.unicode_encode(ragged, encoding).tolist() == ["H\xc3llo".encode(encoding), "W\U0001f604rld.".encode(encoding)]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_ragged_third_dimension(encoding):
    rows = [[72, 101, 108, 108, 111], [87, 111, 114, 108, 100, 46], [68, 111, 110, 39, 116],
            [119, 195, 114, 114, 121, 44, 32, 98, 101], [0x1F604], []]
    ragged = from_rows(rows, (3, 2), np.int32)
    expected = [["Hello", "World."], ["Don't", "w\xc3rry, be"], ["\U0001f604", ""]]
    assert S.unicode_encode(ragged, encoding).tolist() == [[w.encode(encoding) for w in r] for r in expected]
