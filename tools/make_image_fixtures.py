"""Records TensorFlow 2.21's ``tf.image`` results into ``tests/image/fixtures/*.npz``.

Run with the TensorFlow environment (TensorFlow is never a dependency of the library or tests):

    /work/tfvenv/bin/python tools/make_image_fixtures.py

Each fixture file holds the inputs it used (``<case>/input``...) next to TensorFlow's outputs, so
the tests feed exactly those inputs to ``tps.image``. Inputs are deterministic (a seeded NumPy
generator); rerunning rewrites the same files.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "image" / "fixtures"

RESIZE_METHODS = ["bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian",
                  "mitchellcubic"]
RESIZE_SIZES = [(3, 4), (11, 9), (2, 13), (1, 1), (5, 7), (16, 3)]


def _images(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "u8": rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8),
        "f32": rng.normal(size=(2, 6, 4, 2)).astype(np.float32),
        "big": rng.integers(0, 256, size=(23, 17, 1), dtype=np.uint8),
    }


def resize_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    for key, image in _images(rng).items():
        out[f"{key}/input"] = image
        for method in RESIZE_METHODS:
            for antialias in (False, True):
                for h, w in RESIZE_SIZES:
                    result = tf.image.resize(image, [h, w], method=method, antialias=antialias)
                    out[f"{key}/{method}/{int(antialias)}/{h}x{w}"] = result.numpy()
        for h, w in [(10, 10), (3, 20)]:
            for method in ("bilinear", "nearest"):
                result = tf.image.resize(image, [h, w], method=method, preserve_aspect_ratio=True)
                out[f"{key}/aspect/{method}/{h}x{w}"] = result.numpy()
    return out


class Calls:
    """Records ``tf.image.<fn>(input, **kwargs)`` as ``<case>/in``, ``/out`` (or ``/error``) and
    ``/call`` (the JSON of the call) for the generic test in tests/image/test_against_tensorflow.py."""

    def __init__(self) -> None:
        self.out: dict[str, np.ndarray] = {}

    def __call__(self, case: str, fn: str, image: np.ndarray, **kwargs: object) -> None:
        assert f"{case}/call" not in self.out, case
        self.out[f"{case}/in"] = np.asarray(image)
        plain = {}
        for key, value in kwargs.items():  # arrays are stored beside the call, keeping their dtype
            if isinstance(value, np.ndarray):
                self.out[f"{case}/arg/{key}"] = value
                plain[key] = {"__array__": key}
            else:
                plain[key] = value
        self.out[f"{case}/call"] = np.array(json.dumps({"fn": fn, "kwargs": plain}))
        target = tf.image if hasattr(tf.image, fn) else tf.random
        try:
            result = getattr(target, fn)(tf.constant(image), **kwargs)
            if isinstance(result, (tuple, list)):
                for i, part in enumerate(result):
                    self.out[f"{case}/out{i}"] = np.asarray(part)
            else:
                self.out[f"{case}/out"] = result.numpy()
        except Exception as error:  # the test checks that we raise the same class
            self.out[f"{case}/error"] = np.array(type(error).__name__)


def ops_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    c = Calls()
    u8 = rng.integers(0, 256, size=(5, 7, 3), dtype=np.uint8)
    f32 = rng.uniform(size=(2, 6, 4, 3)).astype(np.float32)
    odd = rng.integers(0, 256, size=(4, 5, 2), dtype=np.uint8)
    for name, image in [("u8", u8), ("f32", f32), ("odd", odd)]:
        for fn in ("flip_left_right", "flip_up_down", "transpose"):
            c(f"{name}/{fn}", fn, image)
        for k in (0, 1, 2, 3, -1, 5):
            c(f"{name}/rot90/{k}", "rot90", image, k=k)
        for frac in (0.5, 0.33, 0.9, 1.0):
            c(f"{name}/central_crop/{frac}", "central_crop", image, central_fraction=frac)
        for box in [(1, 2, 3, 4), (0, 0, 4, 4), (0, 0, 1, 1), (2, 0, 2, 3)]:
            c(f"{name}/crop/{box}", "crop_to_bounding_box", image, offset_height=box[0],
              offset_width=box[1], target_height=box[2], target_width=box[3])
        for box in [(1, 2, 9, 10), (0, 0, 8, 8), (3, 1, 9, 8)]:
            c(f"{name}/pad/{box}", "pad_to_bounding_box", image, offset_height=box[0],
              offset_width=box[1], target_height=box[2], target_width=box[3])
        for size in [(3, 3), (9, 10), (2, 9), (8, 2), (4, 4)]:
            c(f"{name}/crop_or_pad/{size}", "resize_with_crop_or_pad", image, target_height=size[0],
              target_width=size[1])
        for size in [(9, 10), (3, 3), (4, 11)]:
            for method in ("bilinear", "nearest", "area", "lanczos3"):
                c(f"{name}/with_pad/{size}/{method}", "resize_with_pad", image, target_height=size[0],
                  target_width=size[1], method=method)
        c(f"{name}/standardize", "per_image_standardization", image)
        c(f"{name}/contrast/1.7", "adjust_contrast", image, contrast_factor=1.7)
        c(f"{name}/contrast/0.3", "adjust_contrast", image, contrast_factor=0.3)
        for delta in (0.2, -0.3, 0.9):
            c(f"{name}/brightness/{delta}", "adjust_brightness", image, delta=delta)
        for gamma, gain in [(0.5, 1.0), (2.2, 0.8), (1.0, 1.5)]:
            c(f"{name}/gamma/{gamma}/{gain}", "adjust_gamma", image, gamma=gamma, gain=gain)
        for seed in [(1, 2), (7, 0), (-3, 12345678901)]:
            c(f"{name}/sflip_lr/{seed}", "stateless_random_flip_left_right", image, seed=seed)
            c(f"{name}/sflip_ud/{seed}", "stateless_random_flip_up_down", image, seed=seed)
            c(f"{name}/sbright/{seed}", "stateless_random_brightness", image, max_delta=0.3, seed=seed)
            c(f"{name}/scontrast/{seed}", "stateless_random_contrast", image, lower=0.2, upper=1.8, seed=seed)
            c(f"{name}/scrop/{seed}", "stateless_random_crop", image,
              size=[2, 3] + list(image.shape[2:]), seed=seed)
        # TensorFlow's errors (the test checks we raise the same class).
        c(f"{name}/err/crop_offset", "crop_to_bounding_box", image, offset_height=-1, offset_width=0,
          target_height=1, target_width=1)
        c(f"{name}/err/crop_big", "crop_to_bounding_box", image, offset_height=0, offset_width=0,
          target_height=50, target_width=1)
        c(f"{name}/err/pad_small", "pad_to_bounding_box", image, offset_height=0, offset_width=0,
          target_height=1, target_width=50)
        c(f"{name}/err/central", "central_crop", image, central_fraction=0.0)
        c(f"{name}/err/crop_or_pad", "resize_with_crop_or_pad", image, target_height=0, target_width=3)
        c(f"{name}/err/gamma", "adjust_gamma", image, gamma=-1.0)
    rgb_u8, rgb_f = u8, f32
    for name, image in [("u8", rgb_u8), ("f32", rgb_f)]:
        for factor in (0.0, 0.4, 1.6, 5.0):
            c(f"{name}/saturation/{factor}", "adjust_saturation", image, saturation_factor=factor)
        for delta in (0.0, 0.1, -0.45, 0.77, -1.0):
            c(f"{name}/hue/{delta}", "adjust_hue", image, delta=delta)
        c(f"{name}/gray", "rgb_to_grayscale", image)
        for seed in [(1, 2), (5, 9)]:
            c(f"{name}/ssat/{seed}", "stateless_random_saturation", image, lower=0.1, upper=2.0, seed=seed)
            c(f"{name}/shue/{seed}", "stateless_random_hue", image, max_delta=0.4, seed=seed)
        c(f"{name}/err/hue", "stateless_random_hue", image, max_delta=0.6, seed=(1, 2))
        c(f"{name}/err/contrast_range", "stateless_random_contrast", image, lower=1.0, upper=0.5, seed=(1, 2))
    # Colour spaces on float images, with grey pixels and saturated corners.
    special = np.array([[[0, 0, 0], [1, 1, 1], [0.5, 0.5, 0.5], [1, 0, 0]],
                        [[0, 1, 0], [0, 0, 1], [1, 1, 0], [0.2, 0.9, 0.9]]], np.float32)
    for name, image in [("rand", rgb_f), ("special", special)]:
        for fn in ("rgb_to_hsv", "rgb_to_yuv", "yuv_to_rgb", "rgb_to_grayscale", "rgb_to_yiq", "yiq_to_rgb"):
            c(f"{name}/{fn}", fn, image)
    c("f32/image_gradients", "image_gradients", rgb_f)
    c("i32/image_gradients", "image_gradients", odd[None].astype(np.int32))
    c("f32/sobel_edges", "sobel_edges", rgb_f)
    c("f32/err/image_gradients", "image_gradients", rgb_f[0])
    hsv = np.stack([rng.uniform(size=(3, 5)), rng.uniform(size=(3, 5)), rng.uniform(size=(3, 5))], -1)
    c("hsv/hsv_to_rgb", "hsv_to_rgb", hsv.astype(np.float32))
    c("gray/grayscale_to_rgb", "grayscale_to_rgb", odd[..., :1])
    # convert_image_dtype: every pair of a few dtypes, with and without saturate.
    values = {
        "uint8": np.array([0, 1, 127, 128, 254, 255], np.uint8),
        "int8": np.array([-128, -1, 0, 1, 64, 127], np.int8),
        "uint16": np.array([0, 1, 255, 256, 32768, 65535], np.uint16),
        "int16": np.array([-32768, -1, 0, 1, 255, 32767], np.int16),
        "int32": np.array([-2**31, -1, 0, 1, 2**24, 2**31 - 1], np.int32),
        "float32": np.array([0.0, 0.001, 0.25, 0.5, 0.999, 1.0], np.float32),
        "float64": np.array([0.0, 0.001, 0.25, 0.5, 0.999, 1.0], np.float64),
        "float16": np.array([0.0, 0.001, 0.25, 0.5, 0.999, 1.0], np.float16),
    }
    outside = np.array([-0.5, 1.5, 2.0, -2.0], np.float32)
    for src, array in values.items():
        for dst in values:
            for sat in (False, True):
                c(f"cid/{src}/{dst}/{int(sat)}", "convert_image_dtype", array, dtype=dst, saturate=sat)
    for dst in ("uint8", "int8", "int16", "int32", "uint16"):
        c(f"cid/outside/{dst}", "convert_image_dtype", outside, dtype=dst, saturate=True)
    # TensorFlow's stateless uniform stream itself.
    for seed in [(1, 2), (0, 0), (-1, 2**40), (123456789, -987654321)]:
        c(f"uniform/{seed}", "stateless_uniform", np.array([3, 7]), seed=seed)
        c(f"uniform_int/{seed}", "stateless_uniform", np.array([9]), seed=seed, minval=-5, maxval=1000,
          dtype="int32")
    return c.out


def boxes_cases(rng: np.random.Generator) -> dict[str, np.ndarray]:
    c = Calls()
    for trial in range(6):
        n = [5, 12, 30, 1, 8, 20][trial]
        corners = rng.uniform(0, 1, size=(n, 2, 2)).astype(np.float32)
        boxes = np.concatenate([corners[:, 0], corners[:, 0] + 0.4 * corners[:, 1]], axis=1)
        if trial == 4:  # corners given in reverse order, and duplicated scores
            boxes = boxes[:, [2, 3, 0, 1]]
        scores = rng.uniform(size=n).astype(np.float32)
        if trial == 4:
            scores[::2] = 0.5
        for iou in (0.0, 0.3, 0.5, 0.9):
            for thr in (float("-inf"), 0.4):
                c(f"nms/{trial}/{iou}/{thr}", "non_max_suppression", boxes, scores=scores, max_output_size=7,
                  iou_threshold=iou, score_threshold=thr)
        for sigma in (0.0, 0.5, 1.0):
            c(f"nms_scores/{trial}/{sigma}", "non_max_suppression_with_scores", boxes, scores=scores,
              max_output_size=6, iou_threshold=0.6, score_threshold=0.1, soft_nms_sigma=sigma)
        overlaps = rng.uniform(size=(n, n)).astype(np.float32)
        for thr in (0.2, 0.5, 0.8):
            c(f"nms_overlaps/{trial}/{thr}", "non_max_suppression_overlaps", overlaps, scores=scores,
              max_output_size=5, overlap_threshold=thr, score_threshold=0.2)
        for pad in (False, True):
            c(f"nms_padded/{trial}/{pad}", "non_max_suppression_padded", boxes, scores=scores,
              max_output_size=6, iou_threshold=0.5, pad_to_max_output_size=pad)
    batch_boxes = rng.uniform(0, 1, size=(2, 3, 10, 4)).astype(np.float32)
    batch_boxes[..., 2:] = batch_boxes[..., :2] + 0.3
    c("nms_padded/batch", "non_max_suppression_padded", batch_boxes,
      scores=rng.uniform(size=(2, 3, 10)).astype(np.float32), max_output_size=4, pad_to_max_output_size=True)
    images = rng.integers(0, 256, size=(2, 6, 7, 3), dtype=np.uint8)
    crop_boxes = np.array([[0, 0, 1, 1], [0.1, 0.2, 0.7, 0.9], [0.8, 0.9, 0.1, 0.3],
                           [-0.2, -0.1, 1.3, 1.1], [0.5, 0.5, 0.5, 0.5]], np.float32)
    for method in ("bilinear", "nearest"):
        for size in ([3, 4], [1, 1], [9, 2]):
            for extrapolation in (0.0, -7.5):
                c(f"crop_resize/{method}/{size}/{extrapolation}", "crop_and_resize", images, boxes=crop_boxes,
                  box_indices=np.array([0, 1, 1, 0, 1], np.int32), crop_size=size, method=method,
                  extrapolation_value=extrapolation)
    draw = np.array([[[0.1, 0.2, 0.6, 0.8], [0, 0, 1, 1], [-0.2, 0.3, 0.5, 1.4], [0.7, 0.6, 0.2, 0.9],
                      [0.3, 0.3, 0.3, 0.3], [1.2, 0, 1.5, 1]]] * 2, np.float32)
    for depth in (1, 3, 4):
        canvas = rng.uniform(size=(2, 8, 9, depth)).astype(np.float32)
        c(f"draw/{depth}/default", "draw_bounding_boxes", canvas, boxes=draw, colors=None)
        colors = np.array([[0.1, 0.9, 0.3, 1.0], [0.5, 0.25, 0.75, 0.0]], np.float32)
        c(f"draw/{depth}/colors", "draw_bounding_boxes", canvas, boxes=draw, colors=colors)
    patches_in = rng.integers(0, 100, size=(2, 7, 8, 2)).astype(np.float32)
    for sizes, strides, rates in [((1, 3, 3, 1), (1, 1, 1, 1), (1, 1, 1, 1)),
                                  ((1, 2, 3, 1), (1, 2, 3, 1), (1, 1, 1, 1)),
                                  ((1, 2, 2, 1), (1, 3, 2, 1), (1, 2, 3, 1)),
                                  ((1, 1, 1, 1), (1, 4, 4, 1), (1, 1, 1, 1))]:
        for padding in ("VALID", "SAME"):
            c(f"patches/{sizes}/{strides}/{rates}/{padding}", "extract_patches", patches_in, sizes=list(sizes),
              strides=list(strides), rates=list(rates), padding=padding)
    tv_f = rng.uniform(size=(2, 5, 6, 3)).astype(np.float32)
    c("tv/f32", "total_variation", tv_f)
    c("tv/f32_3d", "total_variation", tv_f[0])
    c("tv/i32", "total_variation", rng.integers(0, 255, size=(5, 4, 2)).astype(np.int32))
    a8 = rng.integers(0, 256, size=(2, 16, 18, 3), dtype=np.uint8)
    b8 = np.clip(a8.astype(int) + rng.integers(-30, 30, size=a8.shape), 0, 255).astype(np.uint8)
    af, bf = a8.astype(np.float32) / 255, b8.astype(np.float32) / 255
    c("psnr/u8", "psnr", a8, b=b8, max_val=255)
    c("psnr/f32", "psnr", af, b=bf, max_val=1.0)
    c("psnr/f32_3d", "psnr", af[0], b=bf[0], max_val=1.0)
    c("ssim/u8", "ssim", a8, img2=b8, max_val=255)
    c("ssim/f32", "ssim", af, img2=bf, max_val=1.0)
    c("ssim/f32_small_filter", "ssim", af, img2=bf, max_val=1.0, filter_size=5, filter_sigma=0.8, k1=0.02,
      k2=0.05)
    c("ssim/map", "ssim", af, img2=bf, max_val=1.0, return_index_map=True)
    big_a = rng.integers(0, 256, size=(1, 181, 177, 1), dtype=np.uint8)
    big_b = np.clip(big_a.astype(int) + rng.integers(-40, 40, size=big_a.shape), 0, 255).astype(np.uint8)
    c("msssim/u8", "ssim_multiscale", big_a, img2=big_b, max_val=255)
    c("msssim/small", "ssim_multiscale", af, img2=bf, max_val=1.0, power_factors=[0.3, 0.7], filter_size=5)
    c("msssim/three", "ssim_multiscale", a8[:, :15, :17], img2=b8[:, :15, :17], max_val=255,
      power_factors=[0.2, 0.5, 0.3], filter_size=3, filter_sigma=0.7)
    for k, seed in enumerate([(1, 2), (7, 8), (0, 0), (-5, 123456789012), (42, 42)]):
        size = np.array([[40, 60, 3], [300, 200, 3], [17, 23, 1], [480, 640, 3], [64, 64, 3]][k], np.int32)
        box = np.array([[[0.2, 0.3, 0.6, 0.7], [0.0, 0.0, 0.3, 0.2]]], np.float32)
        c(f"sdbb/{k}/default", "stateless_sample_distorted_bounding_box", size, bounding_boxes=box, seed=seed)
        c(f"sdbb/{k}/inception", "stateless_sample_distorted_bounding_box", size, bounding_boxes=box, seed=seed,
          min_object_covered=0.1, aspect_ratio_range=[0.75, 1.33], area_range=[0.08, 1.0], max_attempts=10)
        c(f"sdbb/{k}/strict", "stateless_sample_distorted_bounding_box", size.astype(np.int64),
          bounding_boxes=box, seed=seed, min_object_covered=0.9, area_range=[0.05, 0.3], max_attempts=50)
        c(f"sdbb/{k}/whole", "stateless_sample_distorted_bounding_box", size,
          bounding_boxes=np.zeros([1, 0, 4], np.float32), seed=seed, use_image_if_no_bounding_boxes=True,
          aspect_ratio_range=[0.5, 2.0])
    c("sdbb/err/no_boxes", "stateless_sample_distorted_bounding_box", np.array([9, 9, 3], np.int32),
      bounding_boxes=np.zeros([1, 0, 4], np.float32), seed=(1, 2))
    return c.out


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    wanted = set(sys.argv[1:])
    for name, make in [("resize", resize_cases), ("ops", ops_cases), ("boxes", boxes_cases)]:
        if wanted and name not in wanted:
            continue
        rng = np.random.default_rng(sum(map(ord, name)))
        np.savez_compressed(OUT / f"{name}.npz", **make(rng))
        print(name, (OUT / f"{name}.npz").stat().st_size, "bytes")


if __name__ == "__main__":
    main()
