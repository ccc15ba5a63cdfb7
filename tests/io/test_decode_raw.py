"""tps.io.decode_raw against TensorFlow's decode_raw_op_test cases (their inputs and results)."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.errors import InvalidArgumentError


def test_to_uint8_gives_one_row_per_string():
    np.testing.assert_array_equal(tps.io.decode_raw([b"A", b"a"], np.uint8), [[65], [97]])
    out = tps.io.decode_raw([b"wer", b"XYZ"], "uint8")
    np.testing.assert_array_equal(out, [[ord("w"), ord("e"), ord("r")], [ord("X"), ord("Y"), ord("Z")]])
    assert out.dtype == np.uint8


def test_to_int16_reads_little_endian_pairs_and_rejects_odd_lengths():
    out = tps.io.decode_raw([b"AaBC"], np.int16)
    np.testing.assert_array_equal(out, [[ord("A") + ord("a") * 256, ord("B") + ord("C") * 256]])
    with pytest.raises(InvalidArgumentError,
                       match="Input to DecodeRaw has length 3 that is not a multiple of 2, the size of int16"):
        tps.io.decode_raw([b"123", b"456"], np.int16)


def test_endianness_follows_little_endian_flag():
    assert tps.io.decode_raw([b"\x01\x00\x00\x00"], np.int32)[0, 0] == 1
    assert tps.io.decode_raw([b"\x00\x00\x00\x01"], np.int32, little_endian=False)[0, 0] == 1


def test_float16_float32_float64_bool_and_complex_round_trip():
    for dtype in (np.float16, np.float32, np.float64, np.complex64, np.complex128, np.int64, np.uint16):
        values = (np.arange(6) * 1.25 - 3).astype(dtype).reshape(2, 3)
        strings = np.array([row.tobytes() for row in values], object)
        out = tps.io.decode_raw(strings, dtype)
        assert out.dtype == dtype
        np.testing.assert_array_equal(out, values)
        big = np.array([row.astype(values.dtype.newbyteorder(">")).tobytes() for row in values], object)
        np.testing.assert_array_equal(tps.io.decode_raw(big, dtype, little_endian=False), values)
    np.testing.assert_array_equal(tps.io.decode_raw([b"\x00\x01"], np.bool_), [[False, True]])


def test_empty_strings_give_an_empty_last_dimension():
    out = tps.io.decode_raw([b"", b""], np.int32)
    assert out.shape == (2, 0) and out.dtype == np.int32


def test_different_lengths_raise_tensorflows_message():
    with pytest.raises(InvalidArgumentError, match="element 1 has size 4 != 8"):
        tps.io.decode_raw([b"abcd", b"abcdefgh"], np.int32)


def test_scalar_and_nd_inputs_keep_their_shape():
    assert tps.io.decode_raw(b"\x01\x02", np.uint8).shape == (2,)
    assert tps.io.decode_raw(np.array([[b"ab"], [b"cd"]], object), np.uint8).shape == (2, 1, 2)


def test_fixed_length_pads_with_zeros_and_truncates():
    out = tps.io.decode_raw([b"\x01\x00", b"\x02\x00\x03\x00\x04\x00"], np.int16, fixed_length=4)
    np.testing.assert_array_equal(out, [[1, 0], [2, 3]])
    with pytest.raises(InvalidArgumentError, match=r"fixed_length \(5\) must be a multiple of the size of out_type \(2\)"):
        tps.io.decode_raw([b"ab"], np.int16, fixed_length=5)


def test_works_on_tpsd_string_scalars_inside_map():
    import tpustrategy.data as tpsd

    ds = tpsd.Dataset.from_tensor_slices(np.array([b"\x01\x00\x02\x00", b"\x03\x00\x04\x00"], object))
    out = [x for x in ds.map(lambda s: tps.io.decode_raw(s, np.int16)).as_numpy_iterator()]
    np.testing.assert_array_equal(np.stack(out), [[1, 2], [3, 4]])
