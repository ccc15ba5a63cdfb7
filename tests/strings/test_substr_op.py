"""TensorFlow's substr_op_test.py (its inputs and asserted results), run on tps.strings.substr."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.errors import InvalidArgumentError

DTYPES = (np.int32, np.int64)
UNITS = ("BYTE", "UTF8_CHAR")


def u8(rows):
    if isinstance(rows, str):
        return rows.encode("utf-8")
    if isinstance(rows, bytes):
        return rows
    out = np.empty(np.shape(rows), dtype=object)
    flat = [r.encode("utf-8") if isinstance(r, str) else r for r in np.asarray(rows, dtype=object).reshape(-1)]
    out.reshape(-1)[:] = flat
    return out


def same(got, expected):
    assert np.asarray(got, dtype=object).tolist() == np.asarray(u8(expected), dtype=object).tolist()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pos", (1, -4))
@pytest.mark.parametrize("unit", UNITS)
def test_scalar_string(dtype, pos, unit):
    text = {"BYTE": b"Hello", "UTF8_CHAR": "He\xc3\xc3\U0001f604"}[unit]
    expected = {"BYTE": b"ell", "UTF8_CHAR": "e\xc3\xc3"}[unit]
    same(S.substr(u8(text), np.array(pos, dtype), np.array(3, dtype), unit=unit), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("unit", UNITS)
def test_scalar_string_edge_cases(dtype, unit):
    same(S.substr(b"", np.array(0, dtype), np.array(3, dtype), unit=unit), b"")
    full = {"BYTE": b"Hello", "UTF8_CHAR": "H\xc3ll\U0001f604"}[unit]
    same(S.substr(u8(full), np.array(0, dtype), np.array(5, dtype), unit=unit), full)
    same(S.substr(u8(full), np.array(-5, dtype), np.array(5, dtype), unit=unit), full)
    tail = {"BYTE": b"ello", "UTF8_CHAR": "\xc3ll\U0001f604"}[unit]
    same(S.substr(u8(full), np.array(-4, dtype), np.array(5, dtype), unit=unit), tail)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pos", (1, -4))
@pytest.mark.parametrize("unit", UNITS)
def test_vector_strings(dtype, pos, unit):
    text = {"BYTE": [b"Hello", b"World"], "UTF8_CHAR": ["H\xc3llo", "W\U0001f604rld"]}[unit]
    expected = {"BYTE": [b"ell", b"orl"], "UTF8_CHAR": ["\xc3ll", "\U0001f604rl"]}[unit]
    same(S.substr(u8(text), np.array(pos, dtype), np.array(3, dtype), unit=unit), expected)


MATRIX = {
    "BYTE": [[b"ten", b"eleven", b"twelve"], [b"thirteen", b"fourteen", b"fifteen"],
             [b"sixteen", b"seventeen", b"eighteen"]],
    "UTF8_CHAR": [["\U0001d229\U0001d227n", "\xc6\u053c\u025bv\u025bn", "tw\u0c1dlv\u025b"],
                  ["He\xc3\xc3o", "W\U0001f604rld", "d\xfcd\xea"]],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("unit", UNITS)
def test_matrix_strings(dtype, unit):
    expected = {
        "BYTE": [[b"en", b"leve", b"welv"], [b"hirt", b"ourt", b"ifte"], [b"ixte", b"even", b"ight"]],
        "UTF8_CHAR": [["\U0001d227n", "\u053c\u025bv\u025b", "w\u0c1dlv"], ["e\xc3\xc3o", "\U0001f604rld", "\xfcd\xea"]],
    }[unit]
    same(S.substr(u8(MATRIX[unit]), np.array(1, dtype), np.array(4, dtype), unit=unit), expected)
    expected = {
        "BYTE": [[b"te", b"ve", b"lv"], [b"ee", b"ee", b"ee"], [b"ee", b"ee", b"ee"]],
        "UTF8_CHAR": [["\U0001d229\U0001d227", "v\u025b", "lv"], ["\xc3\xc3", "rl", "\xfcd"]],
    }[unit]
    same(S.substr(u8(MATRIX[unit]), np.array(-3, dtype), np.array(2, dtype), unit=unit), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("unit", UNITS)
def test_element_wise_pos_len(dtype, unit):
    text = {
        "BYTE": MATRIX["BYTE"],
        "UTF8_CHAR": MATRIX["UTF8_CHAR"] + [["sixt\xea\xean", "se\U00010299enteen", "ei\U0001e920h\x86een"]],
    }[unit]
    pos = np.array([[1, -4, 3], [1, 2, -4], [-5, 2, 3]], dtype)
    length = np.array([[2, 2, 4], [4, 3, 2], [5, 5, 5]], dtype)
    expected = {
        "BYTE": [[b"en", b"ev", b"lve"], [b"hirt", b"urt", b"te"], [b"xteen", b"vente", b"hteen"]],
        "UTF8_CHAR": [["\U0001d227n", "\u025bv", "lv\u025b"], ["e\xc3\xc3o", "rld", "d\xfc"],
                      ["xt\xea\xean", "\U00010299ente", "h\x86een"]],
    }[unit]
    same(S.substr(u8(text), pos, length, unit=unit), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("unit", UNITS)
def test_broadcast(dtype, unit):
    text = {
        "BYTE": MATRIX["BYTE"] + [[b"nineteen", b"twenty", b"twentyone"]],
        "UTF8_CHAR": [MATRIX["UTF8_CHAR"][0], ["th\xcdrt\xea\xean", "f\U0001f604urt\xea\xean", "f\xcd\ua09ctee\ua0e4"],
                      ["s\xcdxt\xea\xean", "se\U00010299enteen", "ei\U0001e920h\x86een"],
                      ["nineteen", "twenty", "twentyone"]],
    }[unit]
    expected = {
        "BYTE": [[b"e", b"ev", b"lve"], [b"h", b"te", b"tee"], [b"i", b"te", b"hte"], [b"i", b"en", b"nty"]],
        "UTF8_CHAR": [["\U0001d227", "\u025bv", "lv\u025b"], ["h", "t\xea", "tee"], ["\xcd", "te", "h\x86e"],
                      ["i", "en", "nty"]],
    }[unit]
    same(S.substr(u8(text), np.array([1, -4, 3], dtype), np.array([1, 2, 3], dtype), unit=unit), expected)

    text = {"BYTE": [b"thirteen", b"fourteen", b"fifteen"],
            "UTF8_CHAR": ["th\xcdrt\xea\xean", "f\U0001f604urt\xea\xean", "f\xcd\ua09ctee\ua0e4"]}[unit]
    pos = np.array([[1, -2, 3], [-3, 2, 1], [5, 5, -5]], dtype)
    length = np.array([[3, 2, 1], [1, 2, 3], [2, 2, 2]], dtype)
    expected = {
        "BYTE": [[b"hir", b"en", b"t"], [b"e", b"ur", b"ift"], [b"ee", b"ee", b"ft"]],
        "UTF8_CHAR": [["h\xcdr", "\xean", "t"], ["\xea", "ur", "\xcd\ua09ct"], ["\xea\xea", "\xea\xea", "\ua09ct"]],
    }[unit]
    same(S.substr(u8(text), pos, length, unit=unit), expected)

    text = {"BYTE": b"thirteen", "UTF8_CHAR": "th\xcdrt\xea\xean"}[unit]
    expected = {"BYTE": [b"hir", b"te", b"n"], "UTF8_CHAR": ["h\xcdr", "t\xea", "n"]}[unit]
    same(S.substr(u8(text), np.array([1, -4, 7], dtype), np.array([3, 2, 1], dtype), unit=unit), expected)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("unit", UNITS)
def test_bad_broadcast_is_a_value_error(dtype, unit):
    with pytest.raises(ValueError, match="do not broadcast together"):
        S.substr(u8(MATRIX["BYTE"]), np.array([1, 2, -3, 4], dtype), np.array([1, 2, 3, 4], dtype), unit=unit)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pos", (6, -6))
@pytest.mark.parametrize("unit", UNITS)
def test_out_of_range_scalar(dtype, pos, unit):
    text = {"BYTE": b"Hello", "UTF8_CHAR": "H\xc3ll\U0001f604"}[unit]
    with pytest.raises(InvalidArgumentError, match=f"pos {pos} out of range"):
        S.substr(u8(text), np.array(pos, dtype), np.array(3, dtype), unit=unit)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pos", (4, -4))
@pytest.mark.parametrize("unit", UNITS)
def test_out_of_range_vector_scalar(dtype, pos, unit):
    text = {"BYTE": [b"good", b"good", b"bad", b"good"], "UTF8_CHAR": ["g\xc3\xc3d", "b\xc3d", "g\xc3\xc3d"]}[unit]
    with pytest.raises(InvalidArgumentError, match=f"pos {pos} out of range"):
        S.substr(u8(text), np.array(pos, dtype), np.array(1, dtype), unit=unit)


GOOD_BAD = {
    "BYTE": [[b"good", b"good", b"good"], [b"good", b"good", b"bad"], [b"good", b"good", b"good"]],
    "UTF8_CHAR": [["g\xc3\xc3d", "g\xc3\xc3d", "g\xc3\xc3d"], ["g\xc3\xc3d", "g\xc3\xc3d", "b\xc3d"],
                  ["g\xc3\xc3d", "g\xc3\xc3d", "g\xc3\xc3d"]],
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("unit", UNITS)
def test_out_of_range_matrix_matrix(dtype, unit):
    length = np.array([[3, 2, 1], [1, 2, 3], [2, 2, 2]], dtype)
    for pos in ([[1, 2, 3], [1, 2, 4], [1, 2, 3]], [[1, 2, -3], [1, 2, -4], [1, 2, -3]]):
        with pytest.raises(InvalidArgumentError, match="out of range"):
            S.substr(u8(GOOD_BAD[unit]), np.array(pos, dtype), length, unit=unit)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("unit", UNITS)
def test_out_of_range_broadcast(dtype, unit):
    for pos in ([1, 2, 4], [-1, -2, -4]):
        with pytest.raises(InvalidArgumentError, match="out of range"):
            S.substr(u8(GOOD_BAD[unit][:2]), np.array(pos, dtype), np.array([1, 2, 3], dtype), unit=unit)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mismatched_pos_and_len_shapes_are_value_errors(dtype):
    with pytest.raises(ValueError, match="pos and len must have the same shape"):
        S.substr(u8(MATRIX["BYTE"]), np.array([[1, 2, 3]], dtype), np.array([2, 3, 4], dtype))
    with pytest.raises(ValueError, match="pos and len must have the same shape"):
        S.substr(u8(MATRIX["BYTE"]), np.array([[1, 2, 3]] * 3, dtype), np.array([[2, 3, 4]], dtype))


def test_float_positions_are_type_errors():
    with pytest.raises(TypeError, match="`pos` must be an integer tensor"):
        S.substr(b"test", 3.0, 1)
    with pytest.raises(TypeError, match="`len` must be an integer tensor"):
        S.substr(b"test", 3, 1.0)


def test_an_unknown_unit_is_a_value_error():
    with pytest.raises(ValueError, match="UTF8"):
        S.substr(b"test", 3, 1, unit="UTF8")


def test_invalid_pos_github_issue_46900():
    with pytest.raises(ValueError):
        S.substr(b"abc", len=1, pos=[1, -1])
    with pytest.raises(ValueError):
        S.substr(b"abc", len=1, pos=[1, 2])
