"""Base64 and decompression, after TensorFlow's base64_ops_test / decode_compressed_op_test."""

from __future__ import annotations

import gzip
import zlib

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.errors import InvalidArgumentError


def test_base64_is_web_safe_and_unpadded_by_default():
    data = b"\xfb\xff\xbf hello"
    enc = tps.io.encode_base64(data)
    assert b"+" not in enc and b"/" not in enc and not enc.endswith(b"=")
    assert tps.io.decode_base64(enc) == data
    assert tps.io.encode_base64(b"a", pad=True) == b"YQ=="
    assert tps.io.decode_base64(b"YQ==") == b"a" and tps.io.decode_base64(b"YQ") == b"a"


def test_base64_maps_over_arrays_and_rejects_bad_characters():
    arr = np.array([[b"", b"ab"], [b"xyz", b"\x00"]], object)
    back = tps.io.decode_base64(tps.io.encode_base64(arr))
    assert back.shape == (2, 2) and list(back.ravel()) == list(arr.ravel())
    with pytest.raises(InvalidArgumentError, match="Invalid character found in base64."):
        tps.io.decode_base64(b"a+b/")


def test_decode_compressed_zlib_gzip_and_none():
    raw = [b"AaAA", b"bBbb" * 10]
    np.testing.assert_array_equal(tps.io.decode_compressed(np.array([zlib.compress(r) for r in raw], object), "ZLIB"), raw)
    np.testing.assert_array_equal(tps.io.decode_compressed(np.array([gzip.compress(r) for r in raw], object), "GZIP"), raw)
    assert tps.io.decode_compressed(b"abc") == b"abc"
    with pytest.raises(InvalidArgumentError):
        tps.io.decode_compressed(b"not zlib", "ZLIB")
