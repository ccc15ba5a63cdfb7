"""``tf.image.resize`` (TensorFlow 2's ``resize_images_v2``) and ``resize_with_pad``.

Every ``ResizeMethod`` uses TensorFlow 2's half-pixel sampling; the result is float32 except for
``NEAREST_NEIGHBOR``, which keeps the input dtype. See ``resize_kernels`` for the arithmetic.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.image import resize_kernels
from tpustrategy._src.image.checks import as_image, check_3d_or_4d
from tpustrategy._src.image.geometry import pad_to_bounding_box


class ResizeMethod(enum.StrEnum):
    """The resampling methods of ``tf.image.resize`` (``tf.image.ResizeMethod``).

    Members compare equal to TensorFlow's strings (``ResizeMethod.BILINEAR == 'bilinear'``), so
    ``method='bilinear'`` works as in TensorFlow.
    """

    BILINEAR = "bilinear"
    NEAREST_NEIGHBOR = "nearest"
    BICUBIC = "bicubic"
    AREA = "area"
    LANCZOS3 = "lanczos3"
    LANCZOS5 = "lanczos5"
    GAUSSIAN = "gaussian"
    MITCHELLCUBIC = "mitchellcubic"


_METHODS = {m.value for m in ResizeMethod}


def _check_size(size: Any) -> tuple[int, int]:
    try:
        array = np.asarray(size)
    except Exception as error:
        raise ValueError("'size' must be a 1-D int32 Tensor") from error
    if array.dtype.kind not in "iu" or array.shape != (2,):
        if array.dtype.kind not in "iu" and array.size and array.dtype.kind != "b":
            raise ValueError(
                "'size' must be a 1-D int32 Tensor\n"
                f"tps.image.resize: received size={size!r} ({array.dtype}); Fix: pass two ints, "
                "size=[new_height, new_width].")
        raise ValueError(
            "'size' must be a 1-D Tensor of 2 elements: new_height, new_width\n"
            f"tps.image.resize: received size={size!r}; Fix: pass size=[new_height, new_width].")
    return int(array[0]), int(array[1])


def _method(method: Any) -> str:
    value = method.value if isinstance(method, ResizeMethod) else method
    if value not in _METHODS:
        raise ValueError(
            f"Resize method is not implemented: {method}\n"
            f"tps.image.resize: Fix: pass one of tps.image.ResizeMethod's members or strings "
            f"{sorted(_METHODS)}.")
    return value


def resize(images: Any, size: Any, method: Any = ResizeMethod.BILINEAR,
           preserve_aspect_ratio: bool = False, antialias: bool = False,
           name: str | None = None) -> np.ndarray:
    """Resizes images to ``size`` (``tf.image.resize``).

    Args:
      images: ``[height, width, channels]`` or ``[batch, height, width, channels]``, any real dtype.
      size: ``[new_height, new_width]``.
      method: a ``ResizeMethod`` (or its string): bilinear, nearest, bicubic, area, lanczos3,
        lanczos5, gaussian, mitchellcubic.
      preserve_aspect_ratio: fit inside ``size`` keeping the aspect ratio (the result is at most
        ``size``; its sides are the rounded ``scale * side``).
      antialias: when down-sampling, widen the filter so every input pixel contributes (ignored
        by ``NEAREST_NEIGHBOR`` and ``AREA``, as in TensorFlow).
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      The resized images with the input's rank; float32, except the input dtype for
      ``NEAREST_NEIGHBOR``.

    Raises:
      ValueError: images not 3-D/4-D, a malformed ``size``, or an unknown method.
      InvalidArgumentError: a non-positive output size.

    Example:
      >>> tps.image.resize(np.zeros([4, 6, 3], np.uint8), [2, 3]).shape
      (2, 3, 3)
    """
    del name
    images = as_image(images, "tps.image.resize", "images")
    batched = check_3d_or_4d(images, "tps.image.resize", "images")
    if not batched:
        images = images[None]
    new_h, new_w = _check_size(size)
    kind = _method(method)
    _, h, w, _ = images.shape
    if preserve_aspect_ratio:
        factor = min(np.float32(new_h) / np.float32(h), np.float32(new_w) / np.float32(w))
        # TensorFlow's round is half-to-even (tf.math.round).
        new_h = int(np.rint(np.float32(factor * np.float32(h))))
        new_w = int(np.rint(np.float32(factor * np.float32(w))))
    if new_h <= 0 or new_w <= 0:
        raise InvalidArgumentError(
            f"output dimensions must be positive\ntps.image.resize: received size "
            f"[{new_h}, {new_w}]; Fix: pass a size of two positive ints.")
    if images.dtype == np.bool_ or images.dtype.kind not in "iuf":
        raise TypeError(
            f"tps.image.resize: images of dtype {images.dtype} cannot be resized.\n"
            "Fix: pass an integer or floating-point image (images.astype(np.float32)).")
    if kind == "nearest":
        out = resize_kernels.nearest(images, new_h, new_w)
    elif kind == "bilinear" and not antialias:
        out = resize_kernels.bilinear(images, new_h, new_w)
    elif kind == "bicubic" and not antialias:
        out = resize_kernels.bicubic(images, new_h, new_w)
    elif kind == "area":
        out = resize_kernels.area(images, new_h, new_w)
    else:
        kernel = {"bilinear": "triangle", "bicubic": "keyscubic"}.get(kind, kind)
        out = resize_kernels.scale_and_translate(images, new_h, new_w, kernel, antialias)
    return out if batched else out[0]


def resize_with_pad(image: Any, target_height: int, target_width: int,
                    method: Any = ResizeMethod.BILINEAR, antialias: bool = False) -> np.ndarray:
    """Resizes keeping the aspect ratio, then zero-pads to the target (``tf.image.resize_with_pad``).

    The scaled sides are ``floor(side / ratio)`` with ``ratio = max(w / target_w, h / target_h)``
    (float32), and the padding ``floor((target - scaled) / 2)`` goes above and left.

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      target_height: the result's height (> 0).
      target_width: the result's width (> 0).
      method: a ``ResizeMethod`` as for ``resize``.
      antialias: as for ``resize``.

    Returns:
      ``[target_height, target_width, channels]`` (or batched): float32, or the input dtype for
      ``NEAREST_NEIGHBOR``.

    Raises:
      ValueError: a non-positive target or an image not 3-D/4-D.
    """
    api = "tps.image.resize_with_pad"
    images = as_image(image, api)
    batched = check_3d_or_4d(images, api)
    if not batched:
        images = images[None]
    for key, value in (("target_width", target_width), ("target_height", target_height)):
        if int(value) <= 0:
            raise ValueError(f"{key} must be > 0.\n{api}: received {key}={value}; Fix: pass a "
                             "positive size.")
    f = np.float32
    h, w = f(images.shape[1]), f(images.shape[2])
    th, tw = f(target_height), f(target_width)
    ratio = max(f(w / tw), f(h / th))
    scaled_h, scaled_w = f(h / ratio), f(w / ratio)
    pad_h = max(0, int(np.floor(f((th - scaled_h) / f(2)))))
    pad_w = max(0, int(np.floor(f((tw - scaled_w) / f(2)))))
    resized = resize(images, [int(np.floor(scaled_h)), int(np.floor(scaled_w))], method,
                     antialias=antialias)
    padded = pad_to_bounding_box(resized, pad_h, pad_w, int(target_height), int(target_width))
    return padded if batched else padded[0]
