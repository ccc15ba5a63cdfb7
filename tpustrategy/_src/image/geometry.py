"""Flips, rotations, crops and pads of ``tf.image``: index operations that keep the dtype.

Each accepts one image ``[height, width, channels]`` or a batch ``[batch, height, width,
channels]``, as TensorFlow does, and returns the same rank.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.image.checks import as_image, as_int, check_3d_or_4d


def _batched(image: Any, api: str) -> tuple[np.ndarray, bool]:
    array = as_image(image, api)
    batched = check_3d_or_4d(array, api)
    return (array if batched else array[None]), batched


def _unbatch(images: np.ndarray, batched: bool) -> np.ndarray:
    return images if batched else images[0]


def flip_left_right(image: Any) -> np.ndarray:
    """Reverses the width axis (``tf.image.flip_left_right``).

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.

    Returns:
      The mirrored image, same shape and dtype.
    """
    images, batched = _batched(image, "tps.image.flip_left_right")
    return _unbatch(images[:, :, ::-1].copy(), batched)


def flip_up_down(image: Any) -> np.ndarray:
    """Reverses the height axis (``tf.image.flip_up_down``).

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.

    Returns:
      The flipped image, same shape and dtype.
    """
    images, batched = _batched(image, "tps.image.flip_up_down")
    return _unbatch(images[:, ::-1].copy(), batched)


def rot90(image: Any, k: Any = 1, name: str | None = None) -> np.ndarray:
    """Rotates by ``k`` quarter turns counter-clockwise (``tf.image.rot90``).

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      k: the number of quarter turns (any int; taken modulo 4).
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      The rotated image (height and width swapped for odd ``k``).
    """
    del name
    images, batched = _batched(image, "tps.image.rot90")
    turns = as_int(k, "tps.image.rot90", "k") % 4
    return _unbatch(np.rot90(images, turns, axes=(1, 2)).copy(), batched)


def transpose(image: Any, name: str | None = None) -> np.ndarray:
    """Swaps height and width (``tf.image.transpose``).

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``[width, height, channels]`` (or the batched form).
    """
    del name
    images, batched = _batched(image, "tps.image.transpose")
    return _unbatch(images.transpose(0, 2, 1, 3).copy(), batched)


def central_crop(image: Any, central_fraction: float) -> np.ndarray:
    """Keeps the central ``central_fraction`` of height and width (``tf.image.central_crop``).

    The border removed on each side is ``int((side - side * central_fraction) / 2)``, as in
    TensorFlow, so the kept size is ``side - 2 * border``.

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      central_fraction: a float in ``(0, 1]``.

    Returns:
      The cropped image, same dtype.

    Raises:
      ValueError: ``central_fraction`` outside ``(0, 1]`` or an image not 3-D/4-D.
    """
    fraction = float(np.asarray(central_fraction))
    if fraction <= 0.0 or fraction > 1.0:
        raise ValueError(
            f"central_fraction must be within (0, 1]\ntps.image.central_crop: received "
            f"central_fraction={central_fraction!r}; Fix: pass a fraction such as 0.875.")
    array = as_image(image, "tps.image.central_crop")
    if fraction == 1.0:
        return array
    if array.ndim not in (3, 4):
        raise ValueError(
            f"`image` should either be a Tensor with rank = 3 or rank = 4. Had rank = {array.ndim}.\n"
            "tps.image.central_crop: Fix: pass [height, width, channels] or "
            "[batch, height, width, channels].")
    images, batched = _batched(array, "tps.image.central_crop")
    h, w = images.shape[1:3]
    top = int((float(h) - float(h) * fraction) / 2)
    left = int((float(w) - float(w) * fraction) / 2)
    return _unbatch(images[:, top:h - top, left:w - left].copy(), batched)


def _offsets(api: str, **values: Any) -> dict[str, int]:
    return {key: as_int(value, api, key) for key, value in values.items()}


def pad_to_bounding_box(image: Any, offset_height: int, offset_width: int, target_height: int,
                        target_width: int) -> np.ndarray:
    """Pads with zeros to ``[target_height, target_width]`` (``tf.image.pad_to_bounding_box``).

    The image's top-left corner lands at ``(offset_height, offset_width)``.

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      offset_height: rows of zeros above the image.
      offset_width: columns of zeros left of the image.
      target_height: the height of the result.
      target_width: the width of the result.

    Returns:
      The padded image, same dtype.

    Raises:
      ValueError: negative offsets, or a target smaller than offset plus image.
    """
    api = "tps.image.pad_to_bounding_box"
    images, batched = _batched(image, api)
    v = _offsets(api, offset_height=offset_height, offset_width=offset_width,
                 target_height=target_height, target_width=target_width)
    h, w = images.shape[1:3]
    after_h = v["target_height"] - v["offset_height"] - h
    after_w = v["target_width"] - v["offset_width"] - w
    for ok, message in [(v["offset_height"] >= 0, "offset_height must be >= 0"),
                        (v["offset_width"] >= 0, "offset_width must be >= 0"),
                        (after_w >= 0, "width must be <= target - offset"),
                        (after_h >= 0, "height must be <= target - offset")]:
        if not ok:
            raise ValueError(
                f"{message}\n{api}: received image of height {h}, width {w}, offsets "
                f"({v['offset_height']}, {v['offset_width']}), target ({v['target_height']}, "
                f"{v['target_width']}); Fix: use offsets >= 0 and a target of at least offset + "
                "image size (resize_with_crop_or_pad crops and pads as needed).")
    padding = [(0, 0), (v["offset_height"], after_h), (v["offset_width"], after_w), (0, 0)]
    return _unbatch(np.pad(images, padding), batched)


def crop_to_bounding_box(image: Any, offset_height: int, offset_width: int, target_height: int,
                         target_width: int) -> np.ndarray:
    """Cuts out ``[target_height, target_width]`` at an offset (``tf.image.crop_to_bounding_box``).

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      offset_height: the top row of the crop.
      offset_width: the left column of the crop.
      target_height: the crop's height (> 0).
      target_width: the crop's width (> 0).

    Returns:
      The crop, same dtype.

    Raises:
      ValueError: negative offsets, a non-positive target, or a crop reaching past the image.
    """
    api = "tps.image.crop_to_bounding_box"
    images, batched = _batched(image, api)
    v = _offsets(api, offset_height=offset_height, offset_width=offset_width,
                 target_height=target_height, target_width=target_width)
    h, w = images.shape[1:3]
    for ok, message in [(v["offset_width"] >= 0, "offset_width must be >= 0."),
                        (v["offset_height"] >= 0, "offset_height must be >= 0."),
                        (v["target_width"] > 0, "target_width must be > 0."),
                        (v["target_height"] > 0, "target_height must be > 0."),
                        (w >= v["target_width"] + v["offset_width"], "width must be >= target + offset."),
                        (h >= v["target_height"] + v["offset_height"], "height must be >= target + offset.")]:
        if not ok:
            raise ValueError(
                f"{message}\n{api}: received image of height {h}, width {w}, offsets "
                f"({v['offset_height']}, {v['offset_width']}), target ({v['target_height']}, "
                f"{v['target_width']}); Fix: keep the box inside the image (resize_with_crop_or_pad "
                "crops and pads as needed).")
    top, left = v["offset_height"], v["offset_width"]
    crop = images[:, top:top + v["target_height"], left:left + v["target_width"]]
    return _unbatch(crop.copy(), batched)


def resize_with_crop_or_pad(image: Any, target_height: int, target_width: int) -> np.ndarray:
    """Centre-crops or zero-pads to the target size (``tf.image.resize_with_crop_or_pad``).

    A side larger than its target is cropped evenly (the extra row or column comes off the
    end); a smaller side is padded evenly (the extra zero row or column goes at the end).

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      target_height: the result's height (> 0).
      target_width: the result's width (> 0).

    Returns:
      ``[target_height, target_width, channels]`` (or batched), same dtype.

    Raises:
      ValueError: a non-positive target, or an image not 3-D/4-D.
    """
    api = "tps.image.resize_with_crop_or_pad"
    images, batched = _batched(image, api)
    v = _offsets(api, target_height=target_height, target_width=target_width)
    for key in ("target_width", "target_height"):
        if v[key] <= 0:
            raise ValueError(f"{key} must be > 0.\n{api}: received {key}={v[key]}; Fix: pass a "
                             "positive size.")
    th, tw = v["target_height"], v["target_width"]
    h, w = images.shape[1:3]
    crop_top, crop_left = max((h - th) // 2, 0), max((w - tw) // 2, 0)
    pad_top, pad_left = max((th - h) // 2, 0), max((tw - w) // 2, 0)
    cropped = crop_to_bounding_box(images, crop_top, crop_left, min(th, h), min(tw, w))
    return _unbatch(pad_to_bounding_box(cropped, pad_top, pad_left, th, tw), batched)
