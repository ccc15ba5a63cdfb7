# ruff: noqa: UP031 - the expected strings are printf formats, as TensorFlow's as_string defines them
"""TensorFlow's string_split_op_test.py (StringSplitV2 cases: dense inputs) and as_string_op_test.py
(their inputs and asserted results), run on tps.strings."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.strings as S
from tpustrategy._src.errors import InvalidArgumentError


def as_list(value):
    return value.to_list() if hasattr(value, "to_list") else np.asarray(value).tolist()


@pytest.mark.parametrize("inp, kwargs, expected", [
    ([b"pigs on the wing", b"animals"], {}, [[b"pigs", b"on", b"the", b"wing"], [b"animals"]]),
    ([b"1<>2<>3", b"<><>4<>5<><>6<>"], {"sep": b"<>"}, [[b"1", b"2", b"3"], [b"", b"", b"4", b"5", b"", b"6", b""]]),
    ([b"1,2,3", b"4,5,,6,"], {"sep": b","}, [[b"1", b"2", b"3"], [b"4", b"5", b"", b"6", b""]]),
    ([b"1 2 3", b"  4  5    6  "], {}, [[b"1", b"2", b"3"], [b"4", b"5", b"6"]]),
    ([b""], {}, [[]]),
    ([], {}, []),
    ([b"1,2,3", b"4,5,,6,"], {"sep": b",", "maxsplit": 1}, [[b"1", b"2,3"], [b"4", b"5,,6,"]]),
    ([b"1 2 3", b"  4  5    6  "], {"maxsplit": 1}, [[b"1", b"2 3"], [b"4", b"5    6  "]]),
    (b"1,2,3", {"sep": b","}, [b"1", b"2", b"3"]),
    ([[b"1,2,3", b"4"], [b"5,6", b"7,8,9"]], {"sep": b","}, [[[b"1", b"2", b"3"], [b"4"]], [[b"5", b"6"], [b"7", b"8", b"9"]]]),
])
def test_split_v2(inp, kwargs, expected):
    value = inp if isinstance(inp, bytes) else np.array(inp, dtype=object).reshape(np.shape(inp))
    assert as_list(S.split(value, **kwargs)) == expected
    assert as_list(S.split(input=value, **kwargs)) == expected
    # TensorFlow's test also checks Python's str.split gives the same answer.
    if isinstance(inp, bytes):
        assert inp.split(kwargs.get("sep"), kwargs.get("maxsplit", -1)) == expected


def test_split_with_delimiter_and_no_skip_empty():
    assert S.split([b"hello|world", b"hello world"], sep="|").to_list() == [[b"hello", b"world"], [b"hello world"]]
    assert S.split([b"#a", b"b#", b"#c#"], "#").to_list() == [[b"", b"a"], [b"b", b""], [b"", b"c", b""]]
    assert S.split([b"+hello+++this+is+a+test"], sep="+").to_list() == [
        [b"", b"hello", b"", b"", b"this", b"is", b"a", b"test"]]
    assert S.split([b"hello world"], sep="l").to_list() == [[b"he", b"", b"o wor", b"d"]]


# --- as_string_op_test -------------------------------------------------------------------------------

FLOATS = [0, 1, -1, 0.5, 0.25, 0.125, float("INF"), float("NAN"), float("-INF")]


@pytest.mark.parametrize("dtype", (np.float16, np.float32, np.float64))
def test_float(dtype):
    x = np.array(FLOATS, dtype)

    def s(out):
        return [v.decode("ascii") for v in out.tolist()]

    assert s(S.as_string(x, shortest=True)) == ["%g" % v for v in FLOATS]
    assert s(S.as_string(x, scientific=True)) == ["%e" % v for v in FLOATS]
    assert s(S.as_string(x)) == ["%f" % v for v in FLOATS]
    assert s(S.as_string(x, width=3)) == ["%3f" % v for v in FLOATS]
    assert s(S.as_string(x, width=3, fill="0")) == ["%03f" % v for v in FLOATS]
    assert s(S.as_string(x, width=3, fill="0", shortest=True)) == ["%03g" % v for v in FLOATS]
    assert s(S.as_string(x, precision=10, width=3)) == ["%03.10f" % v for v in FLOATS]
    assert s(S.as_string(x, precision=10, width=3, fill="0", shortest=True)) == ["%03.10g" % v for v in FLOATS]
    with pytest.raises(InvalidArgumentError, match="Cannot select both"):
        S.as_string(x, scientific=True, shortest=True)
    with pytest.raises(InvalidArgumentError, match="Fill string must be one or fewer"):
        S.as_string(x, fill="ab")


def test_bfloat16_formats_like_float32():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array(FLOATS, ml_dtypes.bfloat16)
    assert [v.decode() for v in S.as_string(x, shortest=True).tolist()] == ["%g" % v for v in FLOATS]


@pytest.mark.parametrize("dtype, inputs", [
    (np.int8, [0, -1, 1, -128, 127, -101, 101, -0]), (np.int32, [0, -1, 1, -128, 127, -101, 101, -0]),
    (np.int64, [0, -1, 1, -128, 127, -101, 101, -0]), (np.uint8, [0, 1, 127, 255, 101]),
    (np.uint32, [0, 1, 127, 255, 101]), (np.uint64, [0, 1, 127, 255, 101])])
def test_int(dtype, inputs):
    x = np.array(inputs, dtype)
    assert [v.decode() for v in S.as_string(x).tolist()] == ["%d" % v for v in inputs]
    assert [v.decode() for v in S.as_string(x, width=3).tolist()] == ["%3d" % v for v in inputs]
    assert [v.decode() for v in S.as_string(x, width=3, fill="0").tolist()] == ["%03d" % v for v in inputs]
    with pytest.raises(InvalidArgumentError, match="scientific and shortest"):
        S.as_string(x, scientific=True)
    with pytest.raises(InvalidArgumentError, match="scientific and shortest"):
        S.as_string(x, shortest=True)
    with pytest.raises(InvalidArgumentError, match="precision not supported"):
        S.as_string(x, precision=0)


@pytest.mark.parametrize("dtype", (np.int16, np.uint16, np.int32, np.int64))
def test_large_and_half_int(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max], dtype)
    assert [v.decode() for v in S.as_string(x).tolist()] == ["%d" % info.min, "%d" % info.max]


def test_bool():
    assert S.as_string(np.array([False, True])).tolist() == [b"false", b"true"]


@pytest.mark.parametrize("dtype", (np.complex64, np.complex128))
def test_complex(dtype):
    values = [complex(x) for x in FLOATS]
    x = np.array([v + (v + 1) * 1j for v in values], dtype)

    def clean(out):
        return [v.decode("ascii").replace("-nan", "nan") for v in out.tolist()]

    pairs = [(v.real, v.imag) for v in x.astype(np.complex128).tolist()]
    assert clean(S.as_string(x, shortest=True)) == ["(%g,%g)" % p for p in pairs]
    assert clean(S.as_string(x, scientific=True)) == ["(%e,%e)" % p for p in pairs]
    assert clean(S.as_string(x)) == ["(%f,%f)" % p for p in pairs]
    assert clean(S.as_string(x, width=3)) == ["(%03f,%03f)" % p for p in pairs]
    assert clean(S.as_string(x, width=3, fill="0", shortest=True)) == ["(%03g,%03g)" % p for p in pairs]
    assert clean(S.as_string(x, precision=10, width=3)) == ["(%03.10f,%03.10f)" % p for p in pairs]
    with pytest.raises(InvalidArgumentError, match="Cannot select both"):
        S.as_string(x, scientific=True, shortest=True)


def test_negative_nan_keeps_its_sign_as_c_printf_does():
    assert S.as_string(np.array([-np.nan], np.float32), width=6).tolist() == [b"  -nan"]
