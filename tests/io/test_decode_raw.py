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


@pytest.mark.parametrize("out_type", ["uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
                                      "float16", "float32", "float64", "bfloat16", "bool", "complex64"])
@pytest.mark.parametrize("little_endian", [True, False])
def test_bytes_and_object_arrays_decode_as_lists_do(out_type, little_endian):
    # One bytes value and object arrays take the one-join paths; a list takes the per-string
    # path; they must agree bit for bit (bool and complex go the general way on every input).
    rng = np.random.default_rng(7)
    strings = [rng.integers(0, 256, 16, dtype=np.uint8).tobytes() for _ in range(6)]
    want = tps.io.decode_raw(strings, out_type, little_endian=little_endian)
    grid = np.empty((2, 3), object)
    grid[:] = [strings[:3], strings[3:]]
    got = tps.io.decode_raw(grid, out_type, little_endian=little_endian)
    assert got.dtype == want.dtype and got.shape == (2, 3, want.shape[1])
    assert got.reshape(6, -1).tobytes() == want.tobytes() and got.flags.writeable
    one = tps.io.decode_raw(strings[4], out_type, little_endian=little_endian)
    assert one.shape == want.shape[1:] and one.tobytes() == want[4].tobytes()
    assert one.flags.writeable  # a copy, not a view of the bytes


def test_object_arrays_keep_the_general_paths_errors_and_conversions():
    with pytest.raises(InvalidArgumentError, match="element 1 has size 2 != 3"):
        tps.io.decode_raw(np.array([b"ab", b"abc"], object), np.uint8)
    with pytest.raises(InvalidArgumentError, match="length 3 that is not a multiple of 2"):
        tps.io.decode_raw(np.array([b"abc", b"def"], object), np.int16)
    # str items are taken as UTF-8 (tf.constant's strings); an empty string gives zero columns.
    np.testing.assert_array_equal(tps.io.decode_raw(np.array(["ab", b"cd"], object), np.uint8),
                                  [[97, 98], [99, 100]])
    assert tps.io.decode_raw(np.array([b"", b""], object), np.int32).shape == (2, 0)
    assert tps.io.decode_raw(b"", np.int32).shape == (0,)
