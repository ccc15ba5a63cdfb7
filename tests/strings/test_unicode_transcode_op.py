"""TensorFlow's unicode_transcode_op_test.py (its inputs and asserted results), run on
tps.strings.unicode_transcode."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.errors import InvalidArgumentError


def tr(strings, **kwargs):
    value = strings if isinstance(strings, bytes) else np.array(strings, dtype=object)
    out = S.unicode_transcode(value, **kwargs)
    return out if isinstance(out, bytes) else out.tolist()


SPACE = dict(errors="replace", replacement_char=ord(" "), replace_control_characters=False)


@pytest.mark.parametrize("encoding", ("UTF-8", "ISO-8859-1", "US-ASCII"))
def test_transcode_simple(encoding):
    strings = [[b"a", b"abc"], [b"ABC", b"DEF"]]
    assert tr(strings, input_encoding=encoding, output_encoding="UTF-8", **SPACE) == strings


def test_utf16_and_utf32_to_utf8():
    strings = [b"\x00a\x00b\x20\xAC", b"\xD8\x01\xDC\x37"]
    assert tr(strings, input_encoding="UTF-16", output_encoding="UTF-8", **SPACE) == [
        s.decode("UTF-16-BE").encode() for s in strings]
    strings = [b"\x00\x00\x00a\x00\x00\x00b\x00\x00\x20\xAC", b"\x00\x01\x04\x37"]
    assert tr(strings, input_encoding="UTF-32", output_encoding="UTF-8", **SPACE) == [
        s.decode("UTF-32-BE").encode() for s in strings]


def test_bad_utf8():
    kw = dict(input_encoding="UTF-8", output_encoding="UTF-8", errors="replace", replacement_char=ord(" "))
    assert tr(b"\x00\xff", replace_control_characters=True, **kw) == b"  "
    assert tr(b"\x00\xff", replace_control_characters=False, **kw) == b"\x00 "
    assert tr(b"abc\xffabcdefg", **kw) == b"abc abcdefg"
    assert tr(b"\x00\xff", input_encoding="UTF-8", output_encoding="UTF-8") == b"\x00\xef\xbf\xbd"
    assert tr(b"\x00\xff", input_encoding="UTF-8", output_encoding="UTF-8", replacement_char=ord(" ")) == b"\x00 "
    assert tr(b"a\xf0", input_encoding="UTF-8", output_encoding="UTF-8") == b"a\xef\xbf\xbd"


@pytest.mark.parametrize("bad", (b"\x00\xff", b"\xffabcd"))
def test_strict_errors(bad):
    with pytest.raises(InvalidArgumentError, match="Invalid formatting on input string"):
        tr(bad, input_encoding="UTF-8", output_encoding="UTF-8", errors="strict")


def test_elision():
    assert tr(b"\x00\xff", input_encoding="UTF-8", output_encoding="UTF-8", errors="ignore") == b"\x00"
    assert tr(b"\x00\xff", input_encoding="UTF-8", output_encoding="UTF-8", errors="ignore",
              replace_control_characters=True) == b""


def test_a_real_replacement_character_is_not_an_error():
    assert tr([b"a\xef\xbf\xbd"], input_encoding="UTF-8", output_encoding="UTF-8", errors="strict") == [b"a\xef\xbf\xbd"]
    assert tr([b"a\xef\xbf\xbd"], input_encoding="UTF-8", output_encoding="UTF-8", errors="replace",
              replacement_char=ord("?")) == [b"a\xef\xbf\xbd"]


@pytest.mark.parametrize("out", ("UTF-16-BE", "UTF-32-BE"))
def test_utf8_to_utf16_and_utf32(out):
    strings = [b"ab\xe2\x82\xac", b"\xf0\x90\x90\xb7"]
    assert tr(strings, input_encoding="UTF-8", output_encoding=out, **SPACE) == [
        s.decode().encode(out) for s in strings]


def test_ascii_with_shift_chars():
    strings = [b"\x0e\x0e", b"\x0f\x0f"]
    assert tr(strings, input_encoding="US-ASCII", output_encoding="UTF-8", **SPACE) == strings


def test_utf8_bom_is_kept():
    bom = b"\xef\xbb\xbfabcdefg"
    assert tr(bom, input_encoding="UTF-8", output_encoding="UTF-8") == bom
    assert tr(bom, input_encoding="UTF-8", output_encoding="UTF-16-BE") == bom.decode().encode("UTF-16-BE")


def test_utf16_le_be_with_bom():
    assert tr(b"\xfe\xff\x00\x61", input_encoding="UTF-16-BE", output_encoding="UTF-8") == b"\xef\xbb\xbfa"
    assert tr(b"\xfe\xff\x00\x61", input_encoding="UTF-16-LE", output_encoding="UTF-8") == b"\xef\xbf\xbe\xe6\x84\x80"
    assert tr(b"\xff\xfe\x61\x00", input_encoding="UTF-16-LE", output_encoding="UTF-8") == b"\xef\xbb\xbfa"


@pytest.mark.parametrize("string, encoding, expected", [
    (b"\xfe\xff\x00*", "UTF-16", b"*"), (b"\xff\xfe*\x00", "UTF-16", b"*"),
    (b"\xef\xbb\xbf*", "UTF-8", b"\xef\xbb\xbf*"), (b"\xfe\xff\x00*", "UTF-16-BE", b"\xef\xbb\xbf*"),
    (b"\xff\xfe*\x00", "UTF-16-LE", b"\xef\xbb\xbf*"), (b"\x00*", "UTF-16", b"*"),
    (b"<\xef\xbb\xbf>", "UTF-8", b"<\xef\xbb\xbf>"), (b"\x00<\xfe\xff\x00>", "UTF-16", b"<\xef\xbb\xbf>"),
    (b"\x00<\xfe\xff\x00>", "UTF-16-BE", b"<\xef\xbb\xbf>"), (b"<\x00\xff\xfe>\x00", "UTF-16-LE", b"<\xef\xbb\xbf>"),
    (b"\xfe\xff\x00<\xfe\xff\x00>", "UTF-16", b"<\xef\xbb\xbf>"), (b"\xff\xfe<\x00\xff\xfe>\x00", "UTF-16", b"<\xef\xbb\xbf>"),
])
def test_bom_handling(string, encoding, expected):
    assert tr(string, input_encoding=encoding, output_encoding="UTF-8") == expected


def test_invalid_encodings_and_error_policy():
    strings = [[b"a", b"abc"], [b"ABC", b"DEF"]]
    with pytest.raises(InvalidArgumentError, match="Could not create converter for input encoding: invalid"):
        tr(strings, input_encoding="invalid", output_encoding="UTF-8", **SPACE)
    with pytest.raises(ValueError, match="invalid"):
        tr(strings, input_encoding="UTF-8", output_encoding="invalid", **SPACE)
    with pytest.raises(ValueError, match='"strict", "replace", "ignore"'):
        tr(strings, input_encoding="UTF-8", output_encoding="UTF-8", errors="invalid", replacement_char=ord(" "))


def test_forwarding():
    inp = S.substr(np.array([b"AbCdEfG", b"HiJkLmN"], dtype=object), pos=0, len=5)
    assert S.unicode_transcode(inp, input_encoding="UTF-8", output_encoding="UTF-8").tolist() == [b"AbCdE", b"HiJkL"]


@pytest.mark.parametrize("strings, encoding", [
    ([b"\x5c\x5c", b"\x8f\x70", b"\x83\x4f"], "shift_jis"), ([b"\xca\xf5"], "gb18030"), ([b"\xb3\x4e"], "big5"),
    ([b"\xc7\xd1\xb9\xce"], "euc_kr")])
def test_cjk_encodings(strings, encoding):
    assert tr(strings, input_encoding=encoding, output_encoding="UTF-8", **SPACE) == [
        s.decode(encoding).encode() for s in strings]
