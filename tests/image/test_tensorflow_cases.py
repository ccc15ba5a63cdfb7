"""TensorFlow's own tests of ``tf.image`` (tensorflow/python/ops/image_ops_test.py): their inputs
and asserted results, run on ``tps.image``."""

from __future__ import annotations

import colorsys
import math

import numpy as np
import pytest

import tpustrategy as tps

_PIXELS = [0, 5, 13, 54, 135, 226, 37, 8, 234, 90, 255, 1]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rgb_to_hsv_round_trip(dtype):
    rgb = np.array(_PIXELS, dtype).reshape([2, 2, 3]) / 255.0
    np.testing.assert_allclose(tps.image.hsv_to_rgb(tps.image.rgb_to_hsv(rgb)), rgb, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_colour_space_batches_equal_images_one_by_one_and_round_trip(dtype):
    rng = np.random.default_rng(7)
    images = rng.random((5, 2, 7, 3)).astype(dtype)
    for forward, backward in [(tps.image.rgb_to_hsv, tps.image.hsv_to_rgb),
                              (tps.image.rgb_to_yuv, tps.image.yuv_to_rgb)]:
        batch = forward(images)
        np.testing.assert_allclose(batch, np.stack([forward(i) for i in images]), rtol=1e-6)
        np.testing.assert_allclose(backward(batch), images, rtol=1e-4, atol=1e-4)


def test_rgb_to_grayscale_truncates_the_weighted_sum():
    rgb = np.array([[1, 2, 3], [4, 10, 1]], np.uint8)
    expected = np.array([int(0.2989 * r + 0.5870 * g + 0.1140 * b) for r, g, b in rgb.astype(float)], np.uint8)
    np.testing.assert_array_equal(tps.image.rgb_to_grayscale(rgb.reshape(1, 1, 2, 3)), expected.reshape(1, 1, 2, 1))
    np.testing.assert_array_equal(tps.image.rgb_to_grayscale(rgb.reshape(1, 2, 3)), expected.reshape(1, 2, 1))


def test_grayscale_to_rgb_repeats_the_channel():
    gray = np.array([[1, 2]], np.uint8)
    want = np.array([[1, 1, 1], [2, 2, 2]], np.uint8)
    np.testing.assert_array_equal(tps.image.grayscale_to_rgb(gray.reshape(1, 1, 2, 1)), want.reshape(1, 1, 2, 3))
    np.testing.assert_array_equal(tps.image.grayscale_to_rgb(gray.reshape(1, 2, 1)), want.reshape(1, 2, 3))


def test_adjust_gamma_one_is_identity_and_zero_is_white():
    x = np.random.default_rng(0).uniform(0, 255, (8, 8)).astype(np.float32)
    np.testing.assert_allclose(tps.image.adjust_gamma(x, gamma=1), x, rtol=1e-6)
    np.testing.assert_allclose(tps.image.adjust_gamma(x, gamma=0), np.ones((8, 8)), rtol=1e-6)


def test_adjust_gamma_negative_raises_tensorflows_message():
    with pytest.raises(ValueError, match="Gamma should be a non-negative real number."):
        tps.image.adjust_gamma(np.ones((8, 8), np.float32), gamma=-1)


def _check_gamma_table(x, gamma, table):
    """TensorFlow's table is ``trunc(255 * (x / 255) ** gamma)`` (the test predates 2.x, where a
    uint8 result is converted back with ``convert_image_dtype``: ``trunc(y * 255.5)``)."""
    as_float = tps.image.adjust_gamma(x.astype(np.float32) / np.float32(255), gamma=gamma)
    np.testing.assert_array_equal(np.trunc(as_float * np.float32(255) + np.float32(1e-4)), np.array(table))
    np.testing.assert_array_equal(tps.image.adjust_gamma(x, gamma=gamma),
                                  (as_float * np.float32(255.5)).astype(np.uint8))


def test_adjust_gamma_half_on_uint8():
    x = np.arange(0, 255, 4, np.uint8).reshape(8, 8)
    want = [[0, 31, 45, 55, 63, 71, 78, 84], [90, 95, 100, 105, 110, 115, 119, 123],
            [127, 131, 135, 139, 142, 146, 149, 153], [156, 159, 162, 165, 168, 171, 174, 177],
            [180, 183, 186, 188, 191, 194, 196, 199], [201, 204, 206, 209, 211, 214, 216, 218],
            [221, 223, 225, 228, 230, 232, 234, 236], [238, 241, 243, 245, 247, 249, 251, 253]]
    _check_gamma_table(x, 0.5, want)


def test_adjust_gamma_two_on_uint8():
    x = np.arange(0, 255, 4, np.uint8).reshape(8, 8)
    want = [[0, 0, 0, 0, 1, 1, 2, 3], [4, 5, 6, 7, 9, 10, 12, 14], [16, 18, 20, 22, 25, 27, 30, 33],
            [36, 39, 42, 45, 49, 52, 56, 60], [64, 68, 72, 76, 81, 85, 90, 95],
            [100, 105, 110, 116, 121, 127, 132, 138], [144, 150, 156, 163, 169, 176, 182, 189],
            [196, 203, 211, 218, 225, 233, 241, 249]]
    _check_gamma_table(x, 2, want)


@pytest.mark.parametrize("delta, want, shape", [
    (-0.25, [0, 13, 1, 54, 226, 59, 8, 234, 150, 255, 39, 1], [2, 2, 3]),
    (0.25, [13, 0, 11, 226, 54, 221, 234, 8, 92, 1, 217, 255], [2, 2, 3]),
    (0.25, [13, 0, 11, 226, 54, 221, 234, 8, 92, 1, 217, 255], [2, 1, 2, 3]),
])
def test_adjust_hue_on_uint8(delta, want, shape):
    x = np.array(_PIXELS, np.uint8).reshape(shape)
    np.testing.assert_array_equal(tps.image.adjust_hue(x, delta), np.array(want, np.uint8).reshape(shape))


@pytest.mark.parametrize("style", ["all_random", "rg_same", "rb_same", "gb_same", "rgb_same"])
@pytest.mark.parametrize("shape", [[2, 2, 3], [4, 2, 3], [2, 4, 3], [2, 5, 3], [1000, 1, 3]])
def test_adjust_hue_matches_colorsys(shape, style):
    rng = np.random.default_rng(sum(shape) + len(style))
    x = (rng.random(shape) * 255.0).astype(np.float32)
    delta = float(rng.random() * 2.0 - 1.0)
    if style in ("rg_same", "rgb_same"):
        x[..., 1] = x[..., 0]
    if style == "rb_same":
        x[..., 2] = x[..., 0]
    if style == "gb_same":
        x[..., 2] = x[..., 1]
    if style == "rgb_same":
        x[..., 2] = x[..., 0]
    want = np.empty_like(x).reshape(-1, 3)
    for i, (r, g, b) in enumerate(x.reshape(-1, 3).astype(float)):
        h, s, v = colorsys.rgb_to_hsv(r, g, b)
        want[i] = colorsys.hsv_to_rgb(math.fmod(h + delta + 10.0, 1.0), s, v)
    np.testing.assert_allclose(tps.image.adjust_hue(x, delta), want.reshape(shape), rtol=2e-5, atol=1e-3)


@pytest.mark.parametrize("factor, want, shape", [
    (0.5, [6, 9, 13, 140, 180, 226, 135, 121, 234, 172, 255, 128], [2, 2, 3]),
    (2.0, [0, 5, 13, 0, 106, 226, 30, 0, 234, 89, 255, 0], [2, 2, 3]),
    (0.5, [6, 9, 13, 140, 180, 226, 135, 121, 234, 172, 255, 128], [2, 1, 2, 3]),
])
def test_adjust_saturation_on_uint8(factor, want, shape):
    x = np.array(_PIXELS, np.uint8).reshape(shape)
    np.testing.assert_array_equal(tps.image.adjust_saturation(x, factor), np.array(want, np.uint8).reshape(shape))


_CLUSTERS = [[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [0, 10.1, 1, 11.1],
             [0, 100, 1, 101]]
_CLUSTER_SCORES = [0.9, 0.75, 0.6, 0.95, 0.5, 0.3]


@pytest.mark.parametrize("boxes, max_output, want", [
    (_CLUSTERS, 3, [3, 0, 5]),
    ([[1, 1, 0, 0], [0, 0.1, 1, 1.1], [0, .9, 1, -0.1], [0, 10, 1, 11], [1, 10.1, 0, 11.1], [1, 101, 0, 100]],
     3, [3, 0, 5]),
    (_CLUSTERS, 2, [3, 0]),
    (_CLUSTERS, 30, [3, 0, 5]),
])
def test_non_max_suppression_selects_from_three_clusters(boxes, max_output, want):
    got = tps.image.non_max_suppression(np.array(boxes, np.float32), np.array(_CLUSTER_SCORES, np.float32),
                                        max_output, iou_threshold=0.5)
    assert got.dtype == np.int32
    assert got.tolist() == want


def test_non_max_suppression_of_one_box_and_of_identical_boxes():
    assert tps.image.non_max_suppression([[0, 0, 1, 1]], [0.9], 3).tolist() == [0]
    assert tps.image.non_max_suppression([[0, 0, 1, 1]] * 10, [0.9] * 10, 3).tolist() == [0]


_NINE = np.arange(1, 10).reshape(3, 3, 1)


@pytest.mark.parametrize("offsets, want, shape", [
    ((1, 0), [0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [4, 3, 1]),
    ((0, 1), [0, 1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9], [3, 4, 1]),
    ((0, 0), [1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 0, 0], [4, 3, 1]),
    ((0, 0), [1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9, 0], [3, 4, 1]),
])
def test_pad_to_bounding_box_padding(offsets, want, shape):
    got = tps.image.pad_to_bounding_box(_NINE, offsets[0], offsets[1], shape[0], shape[1])
    np.testing.assert_array_equal(got, np.array(want).reshape(shape))


def test_pad_to_bounding_box_takes_int64_scalars_and_is_a_no_op_at_full_size():
    offsets = np.array([1, 0, 4, 3], np.int64)
    got = tps.image.pad_to_bounding_box(_NINE, offsets[0], offsets[1], offsets[2], offsets[3])
    np.testing.assert_array_equal(got, np.array([0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]).reshape(4, 3, 1))
    x = np.random.default_rng(1).uniform(size=[10, 10, 10])
    np.testing.assert_array_equal(tps.image.pad_to_bounding_box(x, 0, 0, 10, 10), x)


@pytest.mark.parametrize("params, message", [
    ((-1, 0, 4, 4), "offset_height must be >= 0"),
    ((0, -1, 4, 4), "offset_width must be >= 0"),
    ((2, 0, 4, 4), "height must be <= target - offset"),
    ((0, 2, 4, 4), "width must be <= target - offset"),
])
def test_pad_to_bounding_box_bad_params(params, message):
    with pytest.raises(ValueError, match=message):
        tps.image.pad_to_bounding_box(np.zeros([3, 3, 1]), *params)


@pytest.mark.parametrize("shape", [[3, 5], [1, 3, 5, 1, 1]])
def test_pad_to_bounding_box_non_3d_input(shape):
    with pytest.raises(ValueError, match="must have either 3 or 4 dimensions"):
        tps.image.pad_to_bounding_box(np.zeros(shape), 0, 0, 2, 2)


@pytest.mark.parametrize("shape", [[0, 2, 2], [2, 0, 2], [2, 2, 0]])
def test_pad_to_bounding_box_zero_length_input(shape):
    with pytest.raises(ValueError, match="inner 3 dims of 'image.shape' must be > 0"):
        tps.image.pad_to_bounding_box(np.zeros(shape), 0, 0, 2, 2)


def test_central_crop_shapes_of_tensorflows_shape_inference_cases():
    assert tps.image.central_crop(np.zeros([5, 50, 60, 3]), 0.5).shape == (5, 26, 30, 3)
    assert tps.image.central_crop(np.zeros([5, 50, 60, 3]), 1.0).shape == (5, 50, 60, 3)


@pytest.mark.parametrize("fraction", [0.0, 1.01])
def test_central_crop_invalid_fraction(fraction):
    with pytest.raises(ValueError, match=r"central_fraction must be within \(0, 1\]"):
        tps.image.central_crop(np.ones([13, 9, 3], np.float32), fraction)


@pytest.mark.parametrize("shape", [[], [3], [3, 9], [3, 9, 3, 9, 3]])
def test_central_crop_invalid_shapes(shape):
    with pytest.raises(ValueError):
        tps.image.central_crop(np.ones(shape, np.float32), 0.5)


@pytest.mark.parametrize("box", [(0.0, 0.0, 1.0, 1.0), (3 / 40, 2 / 50, 13 / 40, 12 / 50)])
def test_sample_distorted_bounding_box_areas_stay_in_area_range(box):
    """TensorFlow's SelectDistortedCropBoxTest: 1000 draws, crop areas within area_range."""
    size = np.array([40, 50, 1], np.int32)
    ratios = []
    for _ in range(1000):
        begin, extent, _ = tps.image.sample_distorted_bounding_box(
            size, np.array(box, np.float32).reshape(1, 1, 4), min_object_covered=0.1,
            aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0))
        assert begin.shape == (3,) and extent.shape == (3,)
        ratios.append(float(extent[0] * extent[1]) / (40 * 50))
    assert 0.05 <= min(ratios) and max(ratios) <= 1.0
    assert len(set(ratios)) > 10


_EIGHT = [1, 2, 3, 4, 5, 6, 7, 8]


@pytest.mark.parametrize("want, shape", [
    ([0, 3.5, 5.5, 0], [1, 4, 1]),  # TensorFlow 2's half-pixel values (ResizeImageWithPadV2Test)
    ([3.5, 5.5, 0, 0], [2, 2, 1]),
    ([3.5, 5.5], [1, 2, 1]),
])
def test_resize_with_pad(want, shape):
    got = tps.image.resize_with_pad(np.array(_EIGHT).reshape(2, 4, 1), shape[0], shape[1])
    np.testing.assert_allclose(got, np.array(want, np.float32).reshape(shape))


def test_resize_with_pad_and_crop_or_pad_are_no_ops_at_the_same_size():
    x = np.random.default_rng(2).uniform(size=[10, 10, 10]).astype(np.float32)
    np.testing.assert_allclose(tps.image.resize_with_pad(x, 10, 10), x)
    np.testing.assert_array_equal(tps.image.resize_with_crop_or_pad(x, 10, 10), x)


@pytest.mark.parametrize("x, x_shape, want, shape", [
    (_EIGHT, [2, 4, 1], [0, 1, 2, 3, 4, 0, 0, 5, 6, 7, 8, 0], [2, 6, 1]),
    (_EIGHT, [2, 4, 1], [0, 1, 2, 3, 4, 0, 0, 0, 5, 6, 7, 8, 0, 0], [2, 7, 1]),
    (_EIGHT, [2, 4, 1], [0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0], [4, 4, 1]),
    (_EIGHT, [2, 4, 1], [0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0], [5, 4, 1]),
    (_EIGHT, [2, 4, 1], [2, 3, 6, 7], [2, 2, 1]),
    (list(range(1, 13)), [2, 6, 1], [2, 3, 4, 8, 9, 10], [2, 3, 1]),
    (_EIGHT, [4, 2, 1], [3, 4, 5, 6], [2, 2, 1]),
    (list(range(1, 17)), [8, 2, 1], [3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [5, 2, 1]),
    (_EIGHT, [2, 4, 1], [0, 0, 2, 3, 6, 7, 0, 0], [4, 2, 1]),
    (_EIGHT, [4, 2, 1], [0, 3, 4, 0, 0, 5, 6, 0], [2, 4, 1]),
])
def test_resize_with_crop_or_pad(x, x_shape, want, shape):
    got = tps.image.resize_with_crop_or_pad(np.array(x).reshape(x_shape), shape[0], shape[1])
    np.testing.assert_array_equal(got, np.array(want).reshape(shape))


@pytest.mark.parametrize("shape", [[3, 5], [1, 3, 5, 1, 1]])
def test_resize_with_crop_or_pad_non_3d_input(shape):
    with pytest.raises(ValueError, match="must have either 3 or 4 dimensions"):
        tps.image.resize_with_crop_or_pad(np.zeros(shape), 4, 4)


@pytest.mark.parametrize("x_shape, target, want", [
    ([10, 100, 100, 10], [250, 250], None),
    ([100, 100, 10], [75, 50], [50, 50, 10]),
    ([10, 100, 100, 10], [75, 50], [10, 50, 50, 10]),
    ([100, 100, 10], [150, 200], [150, 150, 10]),
    ([192, 108, 3], [384, 216], [384, 216, 3]),
])
def test_resize_preserve_aspect_ratio_shapes(x_shape, target, want):
    x = np.zeros(x_shape, np.float32)
    if want is None:
        assert tps.image.resize(x, target).shape == (10, 250, 250, 10)
    else:
        assert tps.image.resize(x, target, preserve_aspect_ratio=True).shape == tuple(want)


def test_resize_preserve_aspect_ratio_no_op():
    x = np.random.default_rng(5).uniform(size=[10, 10, 10]).astype(np.float32)
    np.testing.assert_allclose(tps.image.resize(x, [10, 10], preserve_aspect_ratio=True), x, rtol=1e-6)


@pytest.mark.parametrize("original, src, dst, expected", [
    ([0, 255], np.uint8, np.int16, [0, 255 * 128]),
    ([0, 32767], np.int16, np.uint8, [0, 255]),
    ([0, 2**32], np.int64, np.int32, [0, 1]),
    ([0, 1], np.int32, np.int64, [0, 2**32]),
    ([-1.0, 0, 1.0, 200000], np.float32, np.float64, [-1.0, 0, 1.0, 200000]),
    ([-1.0, 0, 1.0, 200000], np.float64, np.float32, [-1.0, 0, 1.0, 200000]),
    ([0, 1, 255], np.uint8, np.float32, [0, 1.0 / 255.0, 1]),
    ([0, 1.1 / 255.0, 1], np.float32, np.uint8, [0, 1, 255]),
    ([0, 255 * 256], np.uint16, np.uint8, [0, 255]),
    ([0, 255], np.uint8, np.uint16, [0, 255 * 256]),
    ([0, 127 * 2 * 256], np.uint16, np.int8, [0, 127]),
    ([0, 127], np.int8, np.uint16, [0, 127 * 2 * 256]),
    ([0, 255 * 256], np.uint16, np.int16, [0, 255 * 128]),
    ([0, 255 * 128], np.int16, np.uint16, [0, 255 * 256]),
])
def test_convert_image_dtype(original, src, dst, expected):
    x = np.array(original, src)
    for saturate in ([False, True] if dst in (np.float32, np.float64, np.int32, np.int64) else [False]):
        y = tps.image.convert_image_dtype(x, dst, saturate=saturate)
        assert y.dtype == dst
        np.testing.assert_allclose(y, np.array(expected, dst), atol=1e-5)


def test_convert_image_dtype_to_the_same_dtype_returns_the_image():
    image = np.array([1], np.uint8)
    assert tps.image.convert_image_dtype(image, np.uint8) is image


def _cumsum_image(shape):
    return np.cumsum(np.arange(int(np.prod(shape)))).reshape(shape)


def _total_variation(x):
    axis = None if x.ndim == 3 else (1, 2, 3)
    return (np.abs(np.diff(x, axis=-3)).sum(axis=axis) + np.abs(np.diff(x, axis=-2)).sum(axis=axis))


def test_total_variation_against_its_definition():
    a = _cumsum_image((100, 80, 3))
    for x in (a, a + 1, -a, 1.1 * a):
        np.testing.assert_allclose(tps.image.total_variation(x), _total_variation(x))
    b = a[np.newaxis]
    multi = np.vstack((b, b + 1, -b, 1.1 * b))
    np.testing.assert_allclose(tps.image.total_variation(multi), _total_variation(multi))


def test_total_variation_handmade():
    a = np.dstack(([[1, 2], [4, 7]], [[11, 18], [29, 47]], [[73, 120], [193, 313]]))
    assert tps.image.total_variation(a) == 564
    assert tps.image.total_variation(a + 1) == 564
    assert tps.image.total_variation(-a) == 564
    np.testing.assert_allclose(tps.image.total_variation(1.1 * a), 1.1 * 564)
    np.testing.assert_allclose(tps.image.total_variation(1.2 * a), 1.2 * 564)
    multi = np.stack([a, 1.1 * a, 1.2 * a])
    np.testing.assert_allclose(tps.image.total_variation(multi), 564 * np.array([1.0, 1.1, 1.2]))


def _psnr_numpy(orig, target, max_value):
    mse = ((orig - target) ** 2).mean(axis=(-3, -2, -1))
    return 20 * np.log10(max_value) - 10 * np.log10(mse)


@pytest.mark.parametrize("shape", [(8, 8, 1), (10, 8, 8, 1)])
def test_psnr_against_numpy(shape):
    rng = np.random.default_rng(len(shape))
    a, b = rng.random(shape).astype(np.float32), rng.random(shape).astype(np.float32)
    np.testing.assert_allclose(tps.image.psnr(a, b, 1.0), _psnr_numpy(a, b, 1), atol=0.001)


def test_psnr_of_uint8_equals_psnr_of_the_float_images_and_is_infinite_for_equal_images():
    rng = np.random.default_rng(11)
    a = (rng.random((10, 8, 8, 1)) * 255).astype(np.uint8)
    b = (rng.random((10, 8, 8, 1)) * 255).astype(np.uint8)
    as_float = tps.image.psnr(tps.image.convert_image_dtype(a, np.float32),
                              tps.image.convert_image_dtype(b, np.float32), 1.0)
    np.testing.assert_allclose(tps.image.psnr(a, b, 255), as_float, atol=0.001)
    assert np.all(np.isinf(tps.image.psnr(a, a, 255)))


def test_ssim_of_opposite_ramps_is_negative():
    step = np.expand_dims(np.arange(0, 256, 16, dtype=np.uint8), axis=0)
    img1 = np.tile(step, (16, 1))
    img2 = np.fliplr(img1)
    assert tps.image.ssim(img1.reshape(1, 16, 16, 1), img2.reshape(1, 16, 16, 1), 255)[0] < 0


def test_ssim_of_uint8_equals_ssim_of_the_float_images_and_broadcasts_batches():
    rng = np.random.default_rng(12)
    a = (rng.random((1, 16, 16, 3)) * 255).astype(np.uint8)
    b = (rng.random((1, 16, 16, 3)) * 255).astype(np.uint8)
    as_float = tps.image.ssim(tps.image.convert_image_dtype(a, np.float32),
                              tps.image.convert_image_dtype(b, np.float32), 1.0)
    np.testing.assert_allclose(tps.image.ssim(a, b, 255), as_float, atol=0.001)
    pair = np.concatenate([a, b]).astype(np.float32) / 255
    scores = tps.image.ssim(pair[None], pair[:, None], 1.0)
    assert scores.shape == (2, 2)
    np.testing.assert_allclose(np.diag(scores), [1, 1], atol=1e-6)
    np.testing.assert_allclose(scores[0, 1], scores[1, 0], rtol=1e-6)


def test_image_gradients():
    img = np.array([[1, 3, 4, 2], [8, 7, 5, 6]]).reshape(1, 2, 4, 1)
    dy, dx = tps.image.image_gradients(img)
    np.testing.assert_array_equal(dy, np.reshape([[7, 4, 1, 4], [0, 0, 0, 0]], (1, 2, 4, 1)))
    np.testing.assert_array_equal(dx, np.reshape([[2, 1, -2, 0], [-1, -2, 1, 0]], (1, 2, 4, 1)))


@pytest.mark.parametrize("boxes, scores", [
    ([0.0, 0.0, 1.0, 1.0], [0.9]),
    ([[0.0, 0.0, 1.0]], [0.9]),
    ([[0.0, 0.0, 1.0, 1.0]], [0.9, 0.75]),
    ([[0.0, 0.0, 1.0, 1.0]], [[0.9]]),
])
def test_non_max_suppression_invalid_shapes(boxes, scores):
    with pytest.raises(ValueError):
        tps.image.non_max_suppression(boxes, scores, 3, 0.5)
