"""Colour ops of ``tf.image``: brightness, contrast, saturation, hue, gamma, colour spaces.

The ``adjust_*`` ops work in float32 (float16 and float32 images as they are, others through
``convert_image_dtype``) and convert back to the input dtype, saturating where TensorFlow does.
Hue and saturation follow TensorFlow's CPU kernels: hue is shifted in a six-sector hue range with
the pixel's min and max kept; saturation is scaled in HSV and clamped to ``[0, 1]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.image.checks import as_image, check_at_least_3d, check_channels
from tpustrategy._src.image.dtypes import convert_image_dtype

_F = np.float32
_RGB_TO_YUV = np.array([[0.299, -0.14714119, 0.61497538],
                        [0.587, -0.28886916, -0.51496512],
                        [0.114, 0.43601035, -0.10001026]])
_YUV_TO_RGB = np.array([[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]])
_RGB_TO_YIQ = np.array([[0.299, 0.59590059, 0.2115], [0.587, -0.27455667, -0.52273617],
                        [0.114, -0.32134392, 0.31119955]])
_YIQ_TO_RGB = np.array([[1, 1, 1], [0.95598634, -0.27201283, -1.10674021], [0.6208248, -0.64720424, 1.70423049]])
_GRAY = np.array([0.2989, 0.5870, 0.1140], _F)


def _to_float(image: np.ndarray) -> np.ndarray:
    if image.dtype in (np.float16, np.float32):
        return image
    return convert_image_dtype(image, np.float32)


def _scalar(value: Any, api: str, name: str) -> float:
    array = np.asarray(value)
    if array.ndim != 0 or array.dtype.kind not in "iuf":
        raise ValueError(f"{api}: {name} must be a number; received {value!r}.\n"
                         f"Fix: pass {name} as a Python float.")
    return float(array)


def adjust_brightness(image: Any, delta: float) -> np.ndarray:
    """Adds ``delta`` to every value (``tf.image.adjust_brightness``).

    Args:
      image: an RGB or grayscale image or batch; integer images are converted to float first
        (``delta`` is then in units of the full range, e.g. 0.1 = 25.5 of 255).
      delta: the amount to add.

    Returns:
      The image in its own dtype (integers saturate at their limits).
    """
    array = as_image(image, "tps.image.adjust_brightness")
    flt = _to_float(array)
    adjusted = (flt + flt.dtype.type(_scalar(delta, "tps.image.adjust_brightness", "delta"))).astype(flt.dtype)
    return convert_image_dtype(adjusted, array.dtype, saturate=True)


def adjust_contrast(images: Any, contrast_factor: float) -> np.ndarray:
    """Scales each channel's distance from its mean (``tf.image.adjust_contrast``).

    ``(x - mean) * contrast_factor + mean``, with the mean over height and width of each image
    and channel.

    Args:
      images: ``[..., height, width, channels]``, at least 3-D.
      contrast_factor: the scale.

    Returns:
      The images in their own dtype (integers saturate).
    """
    api = "tps.image.adjust_contrast"
    array = as_image(images, api, "images")
    check_at_least_3d(array, api, "images")
    flt = _to_float(array)
    work = flt.astype(_F)
    mean = work.mean(axis=(-3, -2), keepdims=True, dtype=_F)
    factor = _F(_scalar(contrast_factor, api, "contrast_factor"))
    adjusted = ((work - mean) * factor + mean).astype(flt.dtype)
    return convert_image_dtype(adjusted, array.dtype, saturate=True)


def adjust_gamma(image: Any, gamma: float = 1, gain: float = 1) -> np.ndarray:
    """``gain * image ** gamma`` on the float image (``tf.image.adjust_gamma``).

    Args:
      image: an image or batch; integer images are scaled to ``[0, 1]`` first.
      gamma: a non-negative exponent.
      gain: a multiplier.

    Returns:
      The image in its own dtype (integers saturate).

    Raises:
      ValueError: a negative ``gamma``.
    """
    api = "tps.image.adjust_gamma"
    array = as_image(image, api)
    g = _scalar(gamma, api, "gamma")
    if g < 0:
        raise ValueError(f"Gamma should be a non-negative real number.\n{api}: received gamma={gamma!r}; "
                         "Fix: pass gamma >= 0 (gamma < 1 brightens, > 1 darkens).")
    flt = _to_float(array)
    t = flt.dtype.type
    adjusted = (t(_scalar(gain, api, "gain")) * flt ** t(g)).astype(flt.dtype)
    return convert_image_dtype(adjusted, array.dtype, saturate=True)


def _hsv_parts(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """TensorFlow's kernel RGB -> HSV: hue in [0, 1), value = max, saturation = range / max."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    v = np.maximum(r, np.maximum(g, b))
    rng = v - np.minimum(r, np.minimum(g, b))
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > 0, rng / v, _F(0)).astype(_F)
        norm = _F(1) / (_F(6) * rng)
        h = np.where(r == v, norm * (g - b),
                     np.where(g == v, norm * (b - r) + _F(2 / 6), norm * (r - g) + _F(4 / 6)))
    h = np.where(rng > 0, h, _F(0))
    h = np.where(h < 0, h + _F(1), h).astype(_F)
    return h, s, v


def _hsv_to_rgb_sectors(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """TensorFlow's saturation kernel HSV -> RGB (by hue sector)."""
    c = (s * v).astype(_F)
    m = (v - c).astype(_F)
    dh = (h * _F(6)).astype(_F)
    sector = dh.astype(np.int32)
    fmodu = np.mod(dh, _F(2)).astype(_F)
    x = (c * (_F(1) - np.abs(fmodu - _F(1)))).astype(_F)
    zero = np.zeros_like(c)
    table = {0: (c, x, zero), 1: (x, c, zero), 2: (zero, c, x), 3: (zero, x, c), 4: (x, zero, c),
             5: (c, zero, x)}
    out = np.zeros(h.shape + (3,), _F)
    for k, parts in table.items():
        mask = sector == k
        for ch in range(3):
            out[..., ch] = np.where(mask, parts[ch] + m, out[..., ch])
    return out


def adjust_saturation(image: Any, saturation_factor: float, name: str | None = None) -> np.ndarray:
    """Multiplies the HSV saturation by ``saturation_factor`` (``tf.image.adjust_saturation``).

    Args:
      image: RGB ``[..., 3]``.
      saturation_factor: the multiplier (the result is clamped to ``[0, 1]``).
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      The image in its own dtype.
    """
    del name
    api = "tps.image.adjust_saturation"
    array = as_image(image, api)
    check_channels(array, 3, api, "image")
    flt = _to_float(array)
    h, s, v = _hsv_parts(flt.astype(_F))
    factor = _F(_scalar(saturation_factor, api, "saturation_factor"))
    s = np.clip(s * factor, _F(0), _F(1)).astype(_F)
    out = _hsv_to_rgb_sectors(h, s, v).astype(flt.dtype)
    return convert_image_dtype(out, array.dtype)


def adjust_hue(image: Any, delta: float, name: str | None = None) -> np.ndarray:
    """Rotates the hue by ``delta`` turns (``tf.image.adjust_hue``).

    Args:
      image: RGB ``[..., 3]``.
      delta: in ``[-1, 1]``: the fraction of a full turn of the colour wheel.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      The image in its own dtype.

    Raises:
      ValueError: ``delta`` outside ``[-1, 1]``.
    """
    del name
    api = "tps.image.adjust_hue"
    d = _scalar(delta, api, "delta")
    if d < -1 or d > 1:
        raise ValueError(f"delta must be in the interval [-1, 1]\n{api}: received delta={delta!r}; "
                         "Fix: pass the hue shift as a fraction of a turn, e.g. 0.1.")
    array = as_image(image, api)
    check_channels(array, 3, api, "image")
    flt = _to_float(array)
    rgb = flt.astype(_F)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    # The pixel's hue as a position in six sectors; min and max stay, the middle moves.
    vmax = np.maximum(r, np.maximum(g, b))
    vmin = np.minimum(r, np.minimum(g, b))
    sector = np.select(
        [(r < g) & (b < r), (r < g) & (b > g), r < g, (b < g), (b > r)], [1, 3, 2, 0, 4], 5)
    vmid = np.select([sector == 0, sector == 1, sector == 2, sector == 3, sector == 4],
                     [g, r, b, g, r], b)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = ((vmid - vmin) / (vmax - vmin)).astype(_F)
    rising = (sector % 2) == 0
    hue = np.where(vmax == vmin, _F(0), sector.astype(_F) + np.where(rising, ratio, _F(1) - ratio))
    hue = (hue + _F(d * 6.0)).astype(_F)
    hue = np.where(hue < 0, hue + _F(6), hue)
    hue = np.where(hue >= _F(6), hue - _F(6), hue).astype(_F)
    sector = hue.astype(np.int32)
    ratio = (hue - sector.astype(_F)).astype(_F)
    ratio = np.where(sector % 2 == 0, ratio, _F(1) - ratio)
    mid = (vmin + ratio * (vmax - vmin)).astype(_F)
    choices = {0: (vmax, mid, vmin), 1: (mid, vmax, vmin), 2: (vmin, vmax, mid),
               3: (vmin, mid, vmax), 4: (mid, vmin, vmax), 5: (vmax, vmin, mid)}
    out = np.empty(rgb.shape, _F)
    for ch in range(3):
        out[..., ch] = np.select([sector == k for k in range(5)], [choices[k][ch] for k in range(5)],
                                 choices[5][ch])
    return convert_image_dtype(out.astype(flt.dtype), array.dtype)


def rgb_to_grayscale(images: Any, name: str | None = None) -> np.ndarray:
    """Luma ``0.2989 R + 0.5870 G + 0.1140 B`` (``tf.image.rgb_to_grayscale``).

    Args:
      images: ``[..., 3]``.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``[..., 1]`` in the input dtype.
    """
    del name
    array = as_image(images, "tps.image.rgb_to_grayscale", "images")
    check_channels(array, 3, "tps.image.rgb_to_grayscale")
    flt = convert_image_dtype(array, np.float32)
    gray = np.matmul(flt.astype(_F), _GRAY).astype(_F)[..., None]
    return convert_image_dtype(gray, array.dtype)


def grayscale_to_rgb(images: Any, name: str | None = None) -> np.ndarray:
    """Repeats the single channel three times (``tf.image.grayscale_to_rgb``).

    Args:
      images: ``[..., 1]``, at least 2-D.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``[..., 3]``, same dtype.

    Raises:
      ValueError: fewer than 2 dimensions or a last dimension other than 1.
    """
    del name
    api = "tps.image.grayscale_to_rgb"
    array = as_image(images, api, "images")
    if array.ndim < 2:
        raise ValueError(f"'image' (shape {tuple(array.shape)}) must be at least two-dimensional.\n"
                         f"{api}: Fix: pass [height, width, 1].")
    if array.shape[-1] != 1:
        raise ValueError(f"Last dimension of a grayscale image should be size 1.\n{api}: received "
                         f"shape {tuple(array.shape)}; Fix: pass [..., 1] (add image[..., None]).")
    return np.repeat(array, 3, axis=-1)


def _float_images(images: Any, api: str) -> np.ndarray:
    array = as_image(images, api, "images")
    check_channels(array, 3, api)
    if array.dtype.kind != "f":
        raise TypeError(f"{api}: images must be float16, float32 or float64; received {array.dtype}.\n"
                        "Fix: convert first: tps.image.convert_image_dtype(images, np.float32).")
    return array


def rgb_to_hsv(images: Any, name: str | None = None) -> np.ndarray:
    """RGB in ``[0, 1]`` to HSV in ``[0, 1]`` (``tf.image.rgb_to_hsv``).

    Args:
      images: float ``[..., 3]``.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``[..., 3]`` hue, saturation, value in the input dtype.
    """
    del name
    array = _float_images(images, "tps.image.rgb_to_hsv")
    h, s, v = _hsv_parts(array.astype(_F))
    return np.stack([h, s, v], axis=-1).astype(array.dtype)


def hsv_to_rgb(images: Any, name: str | None = None) -> np.ndarray:
    """HSV in ``[0, 1]`` to RGB (``tf.image.hsv_to_rgb``).

    Args:
      images: float ``[..., 3]`` hue, saturation, value.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``[..., 3]`` RGB in the input dtype.
    """
    del name
    array = _float_images(images, "tps.image.hsv_to_rgb")
    work = array.astype(_F)
    h, s, v = work[..., 0], work[..., 1], work[..., 2]
    dh = h * _F(6)
    dr = np.clip(np.abs(dh - _F(3)) - _F(1), _F(0), _F(1))
    dg = np.clip(-np.abs(dh - _F(2)) + _F(2), _F(0), _F(1))
    db = np.clip(-np.abs(dh - _F(4)) + _F(2), _F(0), _F(1))
    one_minus_s = _F(1) - s
    out = np.stack([(one_minus_s + s * d) * v for d in (dr, dg, db)], axis=-1)
    return out.astype(array.dtype)


def rgb_to_yuv(images: Any) -> np.ndarray:
    """RGB to YUV with TensorFlow's matrix (``tf.image.rgb_to_yuv``).

    Args:
      images: float ``[..., 3]`` in ``[0, 1]``.

    Returns:
      ``[..., 3]`` Y in ``[0, 1]``, U in ``[-0.436, 0.436]``, V in ``[-0.615, 0.615]``.
    """
    array = _float_images(images, "tps.image.rgb_to_yuv")
    return np.asarray(np.matmul(array, _RGB_TO_YUV.astype(array.dtype)), array.dtype)


def yuv_to_rgb(images: Any) -> np.ndarray:
    """YUV to RGB with TensorFlow's matrix (``tf.image.yuv_to_rgb``).

    Args:
      images: float ``[..., 3]``.

    Returns:
      ``[..., 3]`` RGB.
    """
    array = _float_images(images, "tps.image.yuv_to_rgb")
    return np.asarray(np.matmul(array, _YUV_TO_RGB.astype(array.dtype)), array.dtype)


def rgb_to_yiq(images: Any) -> np.ndarray:
    """RGB to YIQ with TensorFlow's matrix (``tf.image.rgb_to_yiq``).

    Args:
      images: float ``[..., 3]`` in ``[0, 1]``.

    Returns:
      ``[..., 3]`` Y in ``[0, 1]``, I in ``[-0.5957, 0.5957]``, Q in ``[-0.5226, 0.5226]``.
    """
    array = _float_images(images, "tps.image.rgb_to_yiq")
    return np.asarray(np.matmul(array, _RGB_TO_YIQ.astype(array.dtype)), array.dtype)


def yiq_to_rgb(images: Any) -> np.ndarray:
    """YIQ to RGB with TensorFlow's matrix (``tf.image.yiq_to_rgb``).

    Args:
      images: float ``[..., 3]``.

    Returns:
      ``[..., 3]`` RGB.
    """
    array = _float_images(images, "tps.image.yiq_to_rgb")
    return np.asarray(np.matmul(array, _YIQ_TO_RGB.astype(array.dtype)), array.dtype)


def per_image_standardization(image: Any) -> np.ndarray:
    """``(x - mean) / max(stddev, 1 / sqrt(N))`` per image (``tf.image.per_image_standardization``).

    Args:
      image: ``[..., height, width, channels]``, at least 3-D; N counts the values of one image.

    Returns:
      float32, each image with mean 0 and (unless nearly constant) variance 1.
    """
    api = "tps.image.per_image_standardization"
    array = as_image(image, api)
    check_at_least_3d(array, api)
    x = array.astype(_F)
    axes = (-3, -2, -1)
    mean = x.mean(axis=axes, keepdims=True, dtype=_F)
    std = np.sqrt(np.square(x - mean).mean(axis=axes, keepdims=True, dtype=_F)).astype(_F)
    floor = _F(1) / np.sqrt(_F(np.prod(x.shape[-3:])))
    return np.asarray((x - mean) / np.maximum(std, floor), _F)
