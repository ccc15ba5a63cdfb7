"""Every recorded ``tf.image`` call of tests/image/fixtures/ops.npz, replayed on ``tps.image``.

tools/make_image_fixtures.py recorded, per case, the input, the call's keyword arguments, and
TensorFlow 2.21's result or the class of the exception it raised.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.image import philox

_DIR = pathlib.Path(__file__).parent / "fixtures"
_FILES = {name: np.load(_DIR / f"{name}.npz") for name in ("ops", "boxes")}
CASES = sorted(f"{name}:{k.rsplit('/', 1)[0]}" for name, data in _FILES.items() for k in data.files
               if k.endswith("/call"))

# Ops whose float results come from float32 arithmetic in another order than TensorFlow's.
_ROUNDED = {"per_image_standardization", "adjust_contrast", "adjust_saturation", "adjust_hue",
            "rgb_to_hsv", "hsv_to_rgb", "rgb_to_yuv", "yuv_to_rgb", "rgb_to_grayscale", "resize_with_pad",
            "stateless_random_contrast", "stateless_random_saturation", "stateless_random_hue",
            "adjust_gamma", "crop_and_resize", "psnr", "ssim", "non_max_suppression_with_scores",
            "total_variation", "ssim_multiscale", "rgb_to_yiq", "yiq_to_rgb", "sobel_edges"}
# Ops on integer images whose result is a float result converted back: may round the other way.
_ROUNDED_INT = _ROUNDED - {"non_max_suppression_with_scores", "total_variation", "ssim_multiscale", "rgb_to_yiq", "yiq_to_rgb", "sobel_edges"}


def _call(fixtures, case: str):
    spec = json.loads(str(fixtures[f"{case}/call"]))
    image = fixtures[f"{case}/in"]
    kwargs = {k: fixtures[f"{case}/arg/{k}"] if isinstance(v, dict) else v for k, v in spec["kwargs"].items()}
    if spec["fn"] == "stateless_uniform":  # tf.random.stateless_uniform: the Philox stream itself
        seed = tuple(kwargs["seed"])
        shape = list(image)
        if kwargs.get("dtype") == "int32":
            return spec, philox.stateless_uniform_int32(shape, seed, kwargs["minval"], kwargs["maxval"])
        return spec, philox.stateless_uniform(shape, seed)
    return spec, getattr(tps.image, spec["fn"])(image, **kwargs)


@pytest.mark.parametrize("case", CASES)
def test_matches_tensorflow(case):
    name, case = case.split(":")
    fixtures = _FILES[name]
    if f"{case}/error" in fixtures.files:
        expected = str(fixtures[f"{case}/error"])
        with pytest.raises(Exception) as info:
            _call(fixtures, case)
        names = {c.__name__ for c in type(info.value).__mro__}
        assert expected in names, f"TensorFlow raised {expected}; we raised {type(info.value).__name__}"
        return
    spec, got = _call(fixtures, case)
    if f"{case}/out" in fixtures.files:
        _compare(spec, got, fixtures[f"{case}/out"])
    else:
        assert isinstance(got, tuple)
        wants = [fixtures[k] for k in sorted(k for k in fixtures.files if k.startswith(f"{case}/out"))]
        assert len(got) == len(wants)
        for part, want in zip(got, wants):
            _compare(spec, np.asarray(part), want)


def _compare(spec, got, want):
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    if want.dtype.kind != "f":
        if spec["fn"] in _ROUNDED_INT and got.size:  # an integer image rounded from a float result may differ by 1
            assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max(initial=0) <= 1
            assert np.mean(got != want) < 0.05
        else:
            np.testing.assert_array_equal(got, want)
    elif spec["fn"] in _ROUNDED:
        eps = float(np.finfo(want.dtype).eps)
        np.testing.assert_allclose(got, want, rtol=8 * eps, atol=8 * eps * max(1.0, float(np.abs(want).max(initial=0))))
    else:
        np.testing.assert_array_equal(got, want)
