"""Argument errors of the image ops (TensorFlow's messages) and the missing-extra ImportError."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.errors import InvalidArgumentError

JPEG = (pathlib.Path(__file__).parent / "fixtures" / "inputs" / "rgb420.jpg").read_bytes()


def test_bad_ratio_dct_method_channels_and_rank_use_tensorflows_messages():
    pytest.importorskip("simplejpeg")
    with pytest.raises(InvalidArgumentError, match="ratio must be 1, 2, 4, or 8, got 3"):
        tps.io.decode_jpeg(JPEG, ratio=3)
    with pytest.raises(InvalidArgumentError, match="dct_method must be one of"):
        tps.io.decode_jpeg(JPEG, dct_method="FLOAT")
    with pytest.raises(InvalidArgumentError, match="`channels` must be 0, 1, 3 or 4 but got 2"):
        tps.io.decode_jpeg(JPEG, channels=2)
    with pytest.raises(InvalidArgumentError, match=r"`contents` must be scalar but got shape\[2\]"):
        tps.io.decode_jpeg(np.array([JPEG, JPEG], object))
    with pytest.raises(InvalidArgumentError, match="Input is empty."):
        tps.io.decode_image(b"")


def test_a_0d_object_array_is_a_scalar_string():
    pytest.importorskip("simplejpeg")
    arr = np.empty((), object)
    arr[()] = JPEG
    np.testing.assert_array_equal(tps.io.decode_jpeg(arr), tps.io.decode_jpeg(JPEG))


def test_missing_extra_names_the_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "simplejpeg", None)
    with pytest.raises(ImportError, match=r"pip install 'tpustrategy\[images\]'"):
        tps.io.decode_jpeg(JPEG)
    monkeypatch.setitem(sys.modules, "PIL", None)
    with pytest.raises(ImportError, match=r"pip install 'tpustrategy\[images\]'"):
        tps.io.encode_png(np.zeros((2, 2, 3), np.uint8))
