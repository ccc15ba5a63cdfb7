"""``tps.image`` inside ``tpsd`` pipelines, the stateful random ops, and the errors users meet."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy.errors import InvalidArgumentError


def _images(n=6, h=5, w=7):
    return np.random.default_rng(3).integers(0, 256, size=(n, h, w, 3), dtype=np.uint8)


def test_resize_inside_a_dataset_map():
    images = _images()
    ds = tpsd.Dataset.from_tensor_slices(images).map(lambda x: tps.image.resize(x, [8, 8]))
    got = list(ds)
    assert len(got) == 6
    for image, out in zip(images, got):
        out = np.asarray(out)
        assert out.shape == (8, 8, 3) and out.dtype == np.float32
        np.testing.assert_array_equal(out, tps.image.resize(image, [8, 8]))


def test_a_flowers_style_augmentation_pipeline_runs_in_parallel_map():
    def augment(image, label):
        image = tps.image.convert_image_dtype(image, np.float32)
        image = tps.image.resize_with_crop_or_pad(image, 6, 6)
        image = tps.image.random_flip_left_right(image, seed=4)
        image = tps.image.random_saturation(image, 0.8, 1.2, seed=5)
        image = tps.image.random_crop(image, [4, 4, 3], seed=6)
        return tps.image.per_image_standardization(image), label

    ds = (tpsd.Dataset.from_tensor_slices((_images(), np.arange(6)))
          .map(augment, num_parallel_calls=tpsd.AUTOTUNE).batch(3))
    batches = list(ds)
    assert [np.asarray(b[0]).shape for b in batches] == [(3, 4, 4, 3)] * 2
    assert np.asarray(batches[1][1]).tolist() == [3, 4, 5]


def test_seeded_random_flip_follows_the_seeds_stream_across_calls():
    """A seed starts one stream (the same on every run); each call takes the next draw."""
    image = np.arange(6).reshape(1, 6, 1)
    got = [int(tps.image.random_flip_left_right(image, seed=424242)[0, 0, 0]) for _ in range(40)]
    draws = np.random.default_rng(424242).uniform(0, 1, size=40)
    assert got == [5 if d < 0.5 else 0 for d in draws]
    assert set(got) == {0, 5}


def test_random_flip_of_a_batch_draws_per_image():
    batch = np.tile(np.arange(4).reshape(1, 1, 4, 1), (64, 1, 1, 1))
    out = tps.image.random_flip_left_right(batch)
    firsts = out[:, 0, 0, 0]
    assert set(firsts.tolist()) == {0, 3}
    assert all(out[i, 0, :, 0].tolist() in ([0, 1, 2, 3], [3, 2, 1, 0]) for i in range(64))


def test_random_crop_stays_inside_and_covers_all_offsets():
    value = np.arange(30).reshape(5, 6)
    seen = set()
    for _ in range(300):
        crop = tps.image.random_crop(value, [2, 3])
        r, c = divmod(int(crop[0, 0]), 6)
        assert crop.tolist() == value[r:r + 2, c:c + 3].tolist()
        seen.add((r, c))
    assert seen == {(r, c) for r in range(4) for c in range(4)}


def test_random_crop_larger_than_the_value_names_both_shapes():
    with pytest.raises(InvalidArgumentError, match=r"Need value.shape >= size, got \] \[5 6\] \[6 3\]"):
        tps.image.random_crop(np.zeros([5, 6]), [6, 3])


def test_random_brightness_delta_lies_in_the_range():
    image = np.full([2, 2, 3], 0.5, np.float32)
    deltas = [float(tps.image.random_brightness(image, 0.2)[0, 0, 0]) - 0.5 for _ in range(200)]
    assert -0.2 - 1e-6 <= min(deltas) < -0.1 and 0.1 < max(deltas) <= 0.2 + 1e-6


def test_random_ops_reject_tensorflows_bad_ranges_with_its_messages():
    image = np.zeros([2, 2, 3], np.float32)
    with pytest.raises(ValueError, match="max_delta must be non-negative."):
        tps.image.random_brightness(image, -0.1)
    with pytest.raises(ValueError, match="upper must be > lower."):
        tps.image.random_contrast(image, 0.5, 0.5)
    with pytest.raises(ValueError, match="lower must be non-negative."):
        tps.image.random_saturation(image, -0.5, 0.5)
    with pytest.raises(ValueError, match="max_delta must be <= 0.5."):
        tps.image.random_hue(image, 0.6)


def test_a_non_int_seed_is_refused_with_the_stateless_alternative():
    with pytest.raises(TypeError, match="stateless_random_flip_left_right"):
        tps.image.random_flip_left_right(np.zeros([2, 2, 1]), seed=1.5)


def test_stateless_ops_need_a_seed_pair():
    with pytest.raises(ValueError, match=r"seed must be a shape \[2\] integer tensor"):
        tps.image.stateless_random_flip_left_right(np.zeros([2, 2, 1]), seed=3)


def test_sample_distorted_bounding_box_gives_a_crop_covering_the_box():
    begin, size, box = tps.image.sample_distorted_bounding_box(
        [40, 60, 3], bounding_boxes=[[[0.2, 0.3, 0.6, 0.7]]], seed=5, min_object_covered=0.5)
    assert begin.dtype == np.int64 and begin[2] == 0 and size[2] == -1
    y, x, h, w = int(begin[0]), int(begin[1]), int(size[0]), int(size[1])
    assert 0 <= y and y + h <= 40 and 0 <= x and x + w <= 60
    covered = max(0, min(y + h, 24) - max(y, 8)) * max(0, min(x + w, 42) - max(x, 18))
    assert covered >= 0.5 * 16 * 24 or (h, w) == (40, 60)
    np.testing.assert_allclose(box[0, 0], [y / 40, x / 60, (y + h) / 40, (x + w) / 60], rtol=1e-6)


def test_sample_distorted_bounding_box_without_boxes_needs_use_image():
    with pytest.raises(InvalidArgumentError, match="use_image_if_no_bounding_boxes"):
        tps.image.sample_distorted_bounding_box(np.array([10, 10, 3], np.int32), np.zeros([1, 0, 4], np.float32))
    begin, size, _ = tps.image.sample_distorted_bounding_box(
        np.array([10, 10, 3], np.int32), np.zeros([1, 0, 4], np.float32), use_image_if_no_bounding_boxes=True,
        area_range=[1.0, 1.0], aspect_ratio_range=[1.0, 1.0])
    assert begin.tolist() == [0, 0, 0] and size.tolist() == [10, 10, -1] and begin.dtype == np.int32


def test_python_lists_convert_as_tensorflow_converts_them():
    assert tps.image.flip_left_right([[[1.5], [2.5]]]).dtype == np.float32
    assert tps.image.flip_left_right([[[1], [2]]]).dtype == np.int32


def test_convert_image_dtype_refuses_bool_with_tensorflows_type():
    with pytest.raises(AttributeError, match="dtype must be either floating point or integer"):
        tps.image.convert_image_dtype(np.zeros([2], np.uint8), np.bool_)


def test_crop_to_bounding_box_error_names_image_and_box():
    with pytest.raises(ValueError, match=r"width must be >= target \+ offset\.[\s\S]*height 4, width 5"):
        tps.image.crop_to_bounding_box(np.zeros([4, 5, 1]), 0, 2, 2, 4)
