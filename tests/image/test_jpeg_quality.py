"""tps.image's JPEG-quality ops against TensorFlow 2.21 (fixtures from
tools/make_jpeg_quality_fixtures.py) and TensorFlow's argument checks; the decode/encode
names tf.image shares with tf.io are tps.io's own functions."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tpustrategy as tps

FIXTURES = np.load(os.path.join(os.path.dirname(__file__), "fixtures", "jpeg_quality.npz"))
NAMES = ("rgb_u8", "noise_u8", "gray_u8", "rgb_f32")


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("quality", (5, 50, 95))
def test_adjust_jpeg_quality_equals_tensorflow(name, quality):
    image = FIXTURES[f"in/{name}"]
    got = tps.image.adjust_jpeg_quality(image, quality)
    want = FIXTURES[f"adjust/{name}/{quality}"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", ((1, 2), (7, 11)))
def test_stateless_random_jpeg_quality_equals_tensorflow(name, seed):
    got = tps.image.stateless_random_jpeg_quality(FIXTURES[f"in/{name}"], 20, 90, seed=seed)
    np.testing.assert_array_equal(got, FIXTURES[f"stateless/{name}/{seed[0]}_{seed[1]}"])


def test_random_jpeg_quality_is_seeded_and_in_range():
    image = FIXTURES["in/rgb_u8"]
    a = tps.image.random_jpeg_quality(image, 40, 41, seed=3)  # the only quality in [40, 41)
    np.testing.assert_array_equal(a, tps.image.adjust_jpeg_quality(image, 40))


@pytest.mark.parametrize("low, high, message", [
    (-1, 50, "jpeg encoding range must be between 0 and 100."),
    (10, 101, "jpeg encoding range must be between 0 and 100."),
    (50, 50, "`min_jpeg_quality` must be less than `max_jpeg_quality`."),
])
def test_quality_ranges_are_checked_as_tensorflow_does(low, high, message):
    image = FIXTURES["in/rgb_u8"]
    for fn, kwargs in ((tps.image.random_jpeg_quality, {"seed": 1}),
                       (tps.image.stateless_random_jpeg_quality, {"seed": (1, 2)})):
        with pytest.raises(ValueError) as info:
            fn(image, low, high, **kwargs)
        assert str(info.value) == message


def test_adjust_jpeg_quality_refuses_bad_quality_and_channels():
    with pytest.raises(tps.errors.InvalidArgumentError, match=r"quality must be in \[0,100\]"):
        tps.image.adjust_jpeg_quality(FIXTURES["in/rgb_u8"], 101)
    with pytest.raises(tps.errors.InvalidArgumentError, match="1 or 3 channels"):
        tps.image.adjust_jpeg_quality(np.zeros((4, 4, 2), np.uint8), 50)


def test_codecs_are_shared_with_tps_io():
    for name in ("decode_jpeg", "decode_png", "decode_gif", "decode_bmp", "decode_image",
                 "decode_and_crop_jpeg", "extract_jpeg_shape", "encode_jpeg", "encode_png"):
        assert getattr(tps.image, name) is getattr(tps.io, name), name
