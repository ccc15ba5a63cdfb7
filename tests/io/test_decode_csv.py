"""tps.io.decode_csv: TensorFlow's decode_csv_op_test cases (their inputs and asserted results),
then every case of tests/io/fixtures/csv_cases.json against TensorFlow 2.21's recorded outputs."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.errors import InvalidArgumentError

CASES = json.loads((pathlib.Path(__file__).parent / "fixtures" / "csv_cases.json").read_text())["cases"]


def _check(out, expected):
    assert len(out) == len(expected)
    for column, want in zip(out, expected, strict=True):
        column = np.asarray(column)
        if column.dtype.kind == "f":
            np.testing.assert_allclose(column, want)
        else:
            np.testing.assert_array_equal(column, np.asarray(want, dtype=column.dtype))


# --- decode_csv_op_test.py: inputs and TensorFlow's asserted results ---------------------------

def test_simple_quoted_number_is_a_number():
    _check(tps.io.decode_csv(["1", "2", '"3"'], [[1]]), [[1, 2, 3]])


def test_scalar_defaults():
    _check(tps.io.decode_csv(["1,4", "2,5", "3,6"], [1, 2]), [[1, 2, 3], [4, 5, 6]])


def test_2d_default_is_rejected():
    with pytest.raises(InvalidArgumentError, match="Each record default should be at most rank 1"):
        tps.io.decode_csv(["1", "2", "3"], [[[0]]])


def test_no_quote_delimiter_keeps_quotes():
    _check(tps.io.decode_csv(["1", "2", '"3"'], [[""]], use_quote_delim=False),
           [[b"1", b"2", b'"3"']])


def test_scalar_record_gives_scalars_and_empty_quoted_takes_default():
    out = tps.io.decode_csv('1,""', [[3], [4]])
    assert [o.shape for o in out] == [(), ()] and [int(o) for o in out] == [1, 4]


def test_2d_records_keep_their_shape():
    out = tps.io.decode_csv([["1", "2"], ['""', "4"]], [[5]])
    _check(out, [[[1, 2], [5, 4]]])
    out = tps.io.decode_csv([["1", "2"], ['""', '"']], [[""]], use_quote_delim=False)
    _check(out, [[[b"1", b"2"], [b'""', b'"']]])


def test_double_and_int64_come_from_empty_array_defaults():
    out = tps.io.decode_csv(["1.0", "-1.79e+308", '"1.79e+308"'], [np.array([], np.double)])
    assert out[0].dtype == np.float64
    _check(out, [[1.0, -1.79e308, 1.79e308]])
    out = tps.io.decode_csv(["1", "2", '"2147483648"'], [np.array([], np.int64)])
    assert out[0].dtype == np.int64
    _check(out, [[1, 2, 2147483648]])


def test_complex_strings():
    out = tps.io.decode_csv(['"1.0"', '"ab , c"', '"a\nbc"', '"ab""c"', " abc "], [["1"]])
    assert list(out[0]) == [b"1.0", b"ab , c", b"a\nbc", b'ab"c', b" abc "]


def test_multi_records_na_and_defaults():
    out = tps.io.decode_csv(["1.0,4,aa", "0.2,5,bb", "3,6,cc"], [[1.0], [1], ["aa"]])
    _check(out, [[1.0, 0.2, 3], [4, 5, 6], [b"aa", b"bb", b"cc"]])
    assert [o.dtype for o in out] == [np.float32, np.int32, object]
    out = tps.io.decode_csv(["2.0,NA,aa", "NA,5,bb", "3,6,NA"], [[0.0], [0], [""]], na_value="NA")
    _check(out, [[2.0, 0.0, 3], [0, 5, 6], [b"aa", b"bb", b""]])
    out = tps.io.decode_csv([",1,", "0.2,3,bcd", "3.0,,"], [[1.0], [0], ["a"]])
    _check(out, [[1.0, 0.2, 3.0], [1, 3, 0], [b"a", b"bcd", b"a"]])
    out = tps.io.decode_csv([",1,", "0.2,3,bcd", '3.0,,"'], [[1.0], [0], ["a"]], use_quote_delim=False)
    _check(out, [[1.0, 0.2, 3.0], [1, 3, 0], [b"a", b"bcd", b'"']])


def test_tab_delimiter():
    out = tps.io.decode_csv(["1\t1", "0.2\t3", "3.0\t"], [[1.0], [0]], field_delim="\t")
    _check(out, [[1.0, 0.2, 3.0], [1, 3, 0]])


@pytest.mark.parametrize("records, defaults, message", [
    ([",1", "0.2,3", "3.0,"], [[1.0], np.array([], np.int32)], "Field 1 is required but missing in record 2!"),
    ([",1", "0.2,234a", "3.0,2"], [[1.0], np.array([], np.int32)], "Field 1 in record 1 is not a valid int32: 234a"),
    (["1", "9999999999999999999999999", "3"], [[1]], "Field 0 in record 1 is not a valid int32: "),
    ([",1", "0.2,2", "3.0adf,3"], [[1.0], np.array([], np.int32)], "Field 0 in record 2 is not a valid float: "),
    (['"1,a,"', "0.22", 'a"bc'], [["a"]], "Unquoted fields cannot have quotes/CRLFs inside"),
    ([",1", "0.2,2", "3.0adf,3"], [[1.0]], "Expect 1 fields but have 2 in record 0"),
    (['"'], [["default"]], "Quoted field has to end with quote followed.*"),
])
def test_bad_records_raise_tensorflows_messages(records, defaults, message):
    with pytest.raises(InvalidArgumentError, match=message):
        tps.io.decode_csv(records, defaults)


def test_select_cols():
    _check(tps.io.decode_csv([",,", "4,5,6"], [[1], [2]], select_cols=[0, 1]), [[1, 4], [2, 5]])
    _check(tps.io.decode_csv([",,", "4,5,6"], [[0], [1], [2]], select_cols=[0, 1, 2]),
           [[0, 4], [1, 5], [2, 6]])
    with pytest.raises(InvalidArgumentError, match="Expect 3 fields but have 2 in record 0"):
        tps.io.decode_csv([",,", "4,5,6"], [[0], [1], [2]], select_cols=[0, 1, 3])
    with pytest.raises(InvalidArgumentError, match="Expect 2 fields but have 1 in record 0"):
        tps.io.decode_csv(["1,2,3"], [[0], [1]], select_cols=[0, 3])


@pytest.mark.parametrize("cols, n, message", [
    ([0], 3, "Length of select_cols and record_defaults do not match."),
    ([1, 0], 2, "select_cols is not strictly increasing."),
    ([-1, 0], 2, "select_cols contains negative values."),
    ([-1], 1, "select_cols contains negative values."),
])
def test_bad_select_cols_raise_value_error(cols, n, message):
    with pytest.raises(ValueError, match=message) as info:
        tps.io.decode_csv(["1,2,3"], [[0]] * n, select_cols=cols)
    assert str(info.value).split("\n")[0] == message


def test_numpy_array_of_defaults_gives_one_float64_column_each():
    out = tps.io.decode_csv("1,2,3,4,5", np.zeros(5))
    assert [o.dtype for o in out] == [np.float64] * 5
    assert [float(o) for o in out] == [1, 2, 3, 4, 5]


# --- beyond TensorFlow's test file ---------------------------------------------------------------

def test_error_messages_add_a_fix_after_tensorflows_line():
    with pytest.raises(InvalidArgumentError) as info:
        tps.io.decode_csv(["1,2"], [[0]])
    first, rest = str(info.value).split("\n", 1)
    assert first == "Expect 1 fields but have 2 in record 0"
    assert "tps.io.decode_csv" in rest and "b'1,2'" in rest


def test_bytes_records_and_non_utf8_fields_pass_through():
    out = tps.io.decode_csv(np.array([b"\xff,1"], object), [[""], [0]])
    assert out[0][0] == b"\xff" and out[1][0] == 1


def test_a_dtype_instead_of_a_default_says_how_to_mark_a_required_column():
    with pytest.raises(ValueError, match=r"np.array\(\[\], np.int32\)"):
        tps.io.decode_csv(["1"], [np.int32])


def test_empty_select_cols_raise_index_error_like_tensorflow():
    with pytest.raises(IndexError, match="list index out of range"):
        tps.io.decode_csv(["1"], [[0]], select_cols=[])


def test_float32_is_rounded_from_the_text_not_from_its_double():
    # 1 + 2**-24 + 2**-60 is just above the midpoint between 1 and the next float32; its
    # double is exactly the midpoint, which would round (ties-to-even) down to 1.
    text = "1.00000005960464477539062500000000086736173798840354720596224069595336914"
    out = tps.io.decode_csv([text], [[0.0]])[0]
    assert out[0] == np.nextafter(np.float32(1), np.float32(2))


def test_float32_columns_round_halfway_doubles_from_their_text_row_by_row():
    above_half = "1.00000005960464477539062500000000086736173798840354720596224069595336914"
    below_max_threshold = "3.4028235677973366e38"  # its double is FLT_MAX + half an ulp
    out = tps.io.decode_csv([above_half, '""', "0.1", below_max_threshold, "1e39", "0x1p-149", "nan"],
                            [[2.5]])[0]
    f32 = np.float32
    want = [np.nextafter(f32(1), f32(2)), f32(2.5), f32(0.1), np.finfo(f32).max, f32(np.inf),
            np.nextafter(f32(0), f32(1)), f32(np.nan)]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array(want, np.float32))


def test_in_a_dataset_map():
    import tpustrategy.data as tpsd

    ds = tpsd.Dataset.from_tensor_slices(np.array([b"1,a", b"2,"], object))
    rows = list(ds.map(lambda r: tuple(tps.io.decode_csv(r, [[0], ["z"]]))).as_numpy_iterator())
    assert [(int(a), b) for a, b in rows] == [(1, b"a"), (2, b"z")]


# --- every recorded TensorFlow 2.21 case --------------------------------------------------------

def _default(spec):
    if isinstance(spec, dict):
        if "np" in spec:
            return np.array(spec["value"], dtype=spec["np"])
        if "npscalar" in spec:
            return np.dtype(spec["npscalar"]).type(spec["value"])
        return [np.dtype(spec["list_of_npscalar"]).type(spec["value"])]
    return spec


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_matches_tensorflow(case):
    kwargs = dict(case["kwargs"])
    defaults = kwargs["record_defaults"]
    kwargs["record_defaults"] = (_default(defaults) if isinstance(defaults, dict)
                                 else [_default(d) for d in defaults])
    if "error" in case:
        errors = {"InvalidArgumentError": InvalidArgumentError, "ValueError": ValueError,
                  "IndexError": IndexError}
        with pytest.raises(errors[case["error"]["type"]]) as info:
            tps.io.decode_csv(**kwargs)
        assert type(info.value).__name__ == case["error"]["type"]
        assert str(info.value).split("\n")[0] == case["error"]["message"]
        return
    out = tps.io.decode_csv(**kwargs)
    assert len(out) == len(case["outputs"])
    for column, ref in zip(out, case["outputs"], strict=True):
        if ref["dtype"] == "string":
            column = np.asarray(column, dtype=object)
            assert list(column.shape) == ref["shape"]
            assert [bytes(v) for v in column.reshape(-1)] == [bytes.fromhex(v) for v in ref["values"]]
            continue
        assert isinstance(column, np.ndarray)
        assert column.dtype.name == ref["dtype"] and list(column.shape) == ref["shape"]
        want = np.array(ref["values"], dtype=column.dtype)
        np.testing.assert_array_equal(column.reshape(-1), want)  # bit-exact floats, NaN == NaN
