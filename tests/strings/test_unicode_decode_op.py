"""TensorFlow's unicode_decode_op_test.py (its inputs and asserted results; dense inputs), run on tps.strings."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.errors import InvalidArgumentError


def _encode(x, encoding):
    return [_encode(v, encoding) for v in x] if isinstance(x, list) else x.encode(encoding)


def _codepoints(x):
    return [_codepoints(v) for v in x] if isinstance(x, list) else [ord(c) for c in x]


def _offsets(x, encoding):
    if isinstance(x, list):
        return [_offsets(v, encoding) for v in x]
    lens = [len(c.encode(encoding)) for c in x]
    return [int(v) for v in np.cumsum([0] + lens)[:-1]] if x else []


def _splitchars(x, encoding):
    return [_splitchars(v, encoding) for v in x] if isinstance(x, list) else [c.encode(encoding) for c in x]


def as_list(value):
    return value.to_list() if hasattr(value, "to_list") else np.asarray(value).tolist()


def strings(x):
    enc = _encode(x, "utf-8")
    if isinstance(enc, bytes):
        return enc
    out = np.empty(np.shape(np.array(x, dtype=object)), dtype=object)
    out.reshape(-1)[:] = list(np.array(enc, dtype=object).reshape(-1)) if out.size else []
    return out


TEXTS = ["仅今年前", ["G\xf6\xf6dnight", "\U0001f60a"], ["Hello", "world", "", "👍"],
         [["Hi", "there"], ["", "\U0001f60a"]], [[["😊"], ["🤠🧐"]], [["🤓"], ["👻"]]], []]


def test_scalar_decode_and_offsets():
    text = "仅今年前".encode()
    assert S.unicode_decode(text, "utf-8").tolist() == [ord(c) for c in "仅今年前"]
    chars, starts = S.unicode_decode_with_offsets(text, "utf-8")
    assert chars.tolist() == [ord(c) for c in "仅今年前"] and starts.tolist() == [0, 3, 6, 9]


def test_vector_decode_and_offsets():
    text = [("仅今年前").encode(), b"hello"]
    expected = [[ord(c) for c in "仅今年前"], [ord(c) for c in "hello"]]
    assert S.unicode_decode(text, "utf-8").to_list() == expected
    chars, starts = S.unicode_decode_with_offsets(text, "utf-8")
    assert chars.to_list() == expected and starts.to_list() == [[0, 3, 6, 9], [0, 1, 2, 3, 4]]


@pytest.mark.parametrize("texts", TEXTS)
def test_basic_decode_split_and_offsets(texts):
    inp = strings(texts)
    assert as_list(S.unicode_decode(inp, "UTF-8")) == _codepoints(texts)
    chars, offsets = S.unicode_decode_with_offsets(inp, "UTF-8")
    assert as_list(chars) == _codepoints(texts) and as_list(offsets) == _offsets(texts, "UTF-8")
    assert as_list(S.unicode_split(inp, "UTF-8")) == _splitchars(texts, "UTF-8")
    pieces, offsets = S.unicode_split_with_offsets(inp, "UTF-8")
    assert as_list(pieces) == _splitchars(texts, "UTF-8") and as_list(offsets) == _offsets(texts, "UTF-8")


def test_docstring_examples():
    texts = [s.encode("utf8") for s in ["G\xf6\xf6dnight", "\U0001f60a"]]
    chars, offsets = S.unicode_decode_with_offsets(texts, "UTF-8")
    assert chars.to_list() == [[71, 246, 246, 100, 110, 105, 103, 104, 116], [128522]]
    assert offsets.to_list() == [[0, 1, 3, 5, 6, 7, 8, 9, 10], [0]]
    assert S.unicode_split(texts, "UTF-8").to_list() == [
        [b"G", b"\xc3\xb6", b"\xc3\xb6", b"d", b"n", b"i", b"g", b"h", b"t"], [b"\xf0\x9f\x98\x8a"]]


@pytest.mark.parametrize("texts, expected", [
    (["Hello", "world", "", "👍"], [[72, 101, 108, 108, 111], [119, 111, 114, 108, 100], [-1] * 5,
                                    [0x1F44D, -1, -1, -1, -1]]),
    ([["Hi", "there"], ["", "\U0001f60a"]], [[[72, 105, -1, -1, -1], [116, 104, 101, 114, 101]],
                                            [[-1] * 5, [128522, -1, -1, -1, -1]]]),
])
def test_decode_with_padded_output(texts, expected):
    assert S.unicode_decode(strings(texts), "UTF-8").to_tensor(default_value=-1).tolist() == expected


def test_split_with_padded_output():
    out = S.unicode_split(strings(["Hello", "world", "", "👍"]), "UTF-8").to_tensor(default_value="")
    assert out.tolist() == [[b"H", b"e", b"l", b"l", b"o"], [b"w", b"o", b"r", b"l", b"d"], [b""] * 5,
                            [b"\xf0\x9f\x91\x8d", b"", b"", b"", b""]]


ERR_INPUT = [b"\xFE", b"hello", b"==\xFF==", b"world"]
HELLO, WORLD = [ord(c) for c in "hello"], [ord(c) for c in "world"]


@pytest.mark.parametrize("kwargs, expected, offsets", [
    (dict(input=ERR_INPUT, errors="replace"), [[0xFFFD], HELLO, [61, 61, 0xFFFD, 61, 61], WORLD],
     [[0], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]),
    (dict(input=ERR_INPUT, errors="replace", replacement_char=0), [[0], HELLO, [61, 61, 0, 61, 61], WORLD],
     [[0], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]),
    (dict(input=ERR_INPUT, errors="ignore"), [[], HELLO, [61, 61, 61, 61], WORLD],
     [[], [0, 1, 2, 3, 4], [0, 1, 3, 4], [0, 1, 2, 3, 4]]),
    (dict(input=[b"\x00", b"hello", b"==\x01==", b"world"], replace_control_characters=True),
     [[0xFFFD], HELLO, [61, 61, 65533, 61, 61], WORLD], [[0], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]),
    (dict(input=[b"\x00", b"hello", b"==\x01==", b"world"], replace_control_characters=True, replacement_char=0),
     [[0], HELLO, [0x3D, 0x3D, 0, 0x3D, 0x3D], WORLD], [[0], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]),
    (dict(input=[b"\xD8\x01"], replacement_char=0x41), [[0x41, 1]], [[0, 1]]),
])
def test_error_modes_with_offsets(kwargs, expected, offsets):
    assert S.unicode_decode(input_encoding="UTF-8", **kwargs).to_list() == expected
    chars, starts = S.unicode_decode_with_offsets(input_encoding="UTF-8", **kwargs)
    assert chars.to_list() == expected and starts.to_list() == offsets


@pytest.mark.parametrize("inp, expected", [
    ([b"\x00", b"hello", b"==\x01==", b"world", "\x80\x9f".encode()],  # C1 controls are not replaced
     [[0xFFFD], HELLO, [61, 61, 65533, 61, 61], WORLD, [0x80, 0x9F]]),
    ([b"\xed\xa0\xbd", b"\xed\xb8\x80", b"\xed\xa0\xbd\xed\xb8\x80"], [[0xFFFD] * 3, [0xFFFD] * 3, [0xFFFD] * 6]),
    (["\ufdd0".encode(), "\ufffe\uffff".encode(), "\U0010ffff".encode(), b"\xc0\x80", b"\xf4\x90\x80\x80"],
     [[0xFDD0], [0xFFFE, 0xFFFF], [0x10FFFF], [0xFFFD] * 2, [0xFFFD] * 4]),
])
def test_error_modes(inp, expected):
    replace = inp[0] == b"\x00"
    assert S.unicode_decode(inp, "UTF-8", replace_control_characters=replace).to_list() == expected


@pytest.mark.parametrize("encoding, texts", [
    ("UTF-8", ["こんにちは", "你好", "Hello"]), ("UTF-16-BE", ["こんにちは", "你好", "Hello"]),
    ("UTF-32-BE", ["こんにちは", "你好", "Hello"]), ("US-ASCII", ["Hello", "world"]), ("ISO-8859-1", ["ÀÈÓ", "AEO"]),
    ("SHIFT-JIS", ["Hello", "こんにちは"]),
])
def test_decode_with_different_encodings(encoding, texts):
    inp = np.array(_encode(texts, encoding), dtype=object)
    chars, offsets = S.unicode_decode_with_offsets(inp, encoding)
    assert S.unicode_decode(inp, encoding).to_list() == _codepoints(texts)
    assert chars.to_list() == _codepoints(texts) and offsets.to_list() == _offsets(texts, encoding)


@pytest.mark.parametrize("encoding", ("UTF-8", "UTF-16-BE", "UTF-32-BE"))
def test_split_with_different_encodings(encoding):
    texts = ["こんにちは", "你好", "Hello"]
    inp = np.array(_encode(texts, encoding), dtype=object)
    pieces, offsets = S.unicode_split_with_offsets(inp, encoding)
    assert S.unicode_split(inp, encoding).to_list() == _splitchars(texts, encoding)
    assert pieces.to_list() == _splitchars(texts, encoding) and offsets.to_list() == _offsets(texts, encoding)


def test_exceptions():
    with pytest.raises(InvalidArgumentError, match="Invalid formatting on input string"):
        S.unicode_decode([b"\xFEED"], "UTF-8", errors="strict")
    with pytest.raises(InvalidArgumentError, match="replacement_char out of unicode codepoint range"):
        S.unicode_decode("x", "UTF-8", replacement_char=11141111)
    with pytest.raises(ValueError, match="oranguatan"):
        S.unicode_decode("x", "UTF-8", errors="oranguatan")


@pytest.mark.parametrize("kwargs, expected", [
    (dict(input=[b"\xFE", b"hello", b"==\xFF==", b"world"], errors="replace"),
     [[b"\xef\xbf\xbd"], [b"h", b"e", b"l", b"l", b"o"], [b"=", b"=", b"\xef\xbf\xbd", b"=", b"="],
      [b"w", b"o", b"r", b"l", b"d"]]),
    (dict(input=[b"\xFE", b"hello", b"==\xFF==", b"world"], errors="replace", replacement_char=0),
     [[b"\x00"], [b"h", b"e", b"l", b"l", b"o"], [b"=", b"=", b"\x00", b"=", b"="], [b"w", b"o", b"r", b"l", b"d"]]),
    (dict(input=[b"\xFE", b"hello", b"==\xFF==", b"world"], errors="ignore"),
     [[], [b"h", b"e", b"l", b"l", b"o"], [b"=", b"=", b"=", b"="], [b"w", b"o", b"r", b"l", b"d"]]),
])
def test_split_error_modes(kwargs, expected):
    assert S.unicode_split(input_encoding="UTF-8", **kwargs).to_list() == expected
