"""``tps.image.resize`` against TensorFlow 2.21's results (tools/make_image_fixtures.py)."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy.errors import InvalidArgumentError

FIXTURES = np.load(pathlib.Path(__file__).parent / "fixtures" / "resize.npz")
CASES = sorted(k for k in FIXTURES.files if not k.endswith("/input") and "/aspect/" not in k)
ASPECT = sorted(k for k in FIXTURES.files if "/aspect/" in k)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    if want.dtype.kind == "f":
        scale = max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got, want, rtol=0, atol=4e-6 * scale)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", CASES)
def test_resize_matches_tensorflow(case):
    key, method, antialias, size = case.split("/")
    h, w = map(int, size.split("x"))
    got = tps.image.resize(FIXTURES[f"{key}/input"], [h, w], method=method, antialias=bool(int(antialias)))
    _close(got, FIXTURES[case])


@pytest.mark.parametrize("case", ASPECT)
def test_resize_preserve_aspect_ratio_matches_tensorflow(case):
    key, _, method, size = case.split("/")
    h, w = map(int, size.split("x"))
    got = tps.image.resize(FIXTURES[f"{key}/input"], [h, w], method=method, preserve_aspect_ratio=True)
    _close(got, FIXTURES[case])


def test_resize_method_members_equal_tensorflow_strings():
    assert tps.image.ResizeMethod.BILINEAR == "bilinear"
    assert tps.image.ResizeMethod.NEAREST_NEIGHBOR == "nearest"
    assert [m.value for m in tps.image.ResizeMethod] == [
        "bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian", "mitchellcubic"]


def test_resize_rejects_two_dimensional_images_naming_the_ranks():
    with pytest.raises(ValueError, match="must have either 3 or 4 dimensions"):
        tps.image.resize(np.zeros([4, 4]), [2, 2])


def test_resize_rejects_a_size_of_three_elements():
    with pytest.raises(ValueError, match="1-D Tensor of 2 elements"):
        tps.image.resize(np.zeros([4, 4, 1]), [2, 2, 2])


def test_resize_rejects_an_unknown_method():
    with pytest.raises(ValueError, match="Resize method is not implemented: cubic"):
        tps.image.resize(np.zeros([4, 4, 1]), [2, 2], method="cubic")


def test_resize_rejects_a_zero_output_size():
    with pytest.raises(InvalidArgumentError, match="output dimensions must be positive"):
        tps.image.resize(np.zeros([4, 4, 1]), [0, 2])
