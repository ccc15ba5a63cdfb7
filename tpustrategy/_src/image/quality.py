"""Image measures and patch extraction of ``tf.image``: psnr, ssim, total_variation, extract_patches."""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.image.checks import as_image
from tpustrategy._src.image.dtypes import convert_image_dtype

_F = np.float32


def _pair(a: Any, b: Any, api: str) -> tuple[np.ndarray, np.ndarray]:
    x, y = as_image(a, api, "a"), as_image(b, api, "b")
    if x.ndim < 3 or y.ndim < 3 or x.shape[-3:] != y.shape[-3:]:
        raise ValueError(f"{api}: the two images must be at least 3-D with equal last three dimensions; "
                         f"received shapes {tuple(x.shape)} and {tuple(y.shape)}.\nFix: compare images "
                         "of the same height, width and channels.")
    if x.dtype != y.dtype:
        raise TypeError(f"{api}: both images must have one dtype; received {x.dtype} and {y.dtype}.\n"
                        "Fix: cast one (tps.image.convert_image_dtype).")
    return x, y


def _max_val(max_val: Any, dtype: np.dtype) -> np.ndarray:
    return convert_image_dtype(np.asarray(max_val).astype(dtype), np.float32)


def psnr(a: Any, b: Any, max_val: float, name: str | None = None) -> np.ndarray:
    """Peak signal-to-noise ratio per image, in dB (``tf.image.psnr``).

    Args:
      a: ``[..., height, width, channels]``.
      b: the same shape and dtype.
      max_val: the dynamic range (255 for uint8 images, 1.0 for floats in [0, 1]).
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      float32 ``[...]``: ``20 log10(max_val) - 10 log10(mse)`` (inf for equal images).
    """
    del name
    x, y = _pair(a, b, "tps.image.psnr")
    peak = _max_val(max_val, x.dtype)
    x, y = convert_image_dtype(x, np.float32), convert_image_dtype(y, np.float32)
    mse = np.square(x - y).mean(axis=(-3, -2, -1), dtype=_F)
    with np.errstate(divide="ignore"):
        return np.asarray((_F(20) * np.log(peak) / np.log(_F(10)) - _F(10 / np.log(10)) * np.log(mse)).astype(_F))


def _gauss(size: int, sigma: float) -> np.ndarray:
    coords = np.arange(size, dtype=_F) - _F(size - 1) / _F(2)
    g = np.square(coords) * (_F(-0.5) / np.square(_F(sigma)))
    g = (g[None, :] + g[:, None]).reshape(-1)
    g = np.exp(g - g.max())
    return np.asarray((g / g.sum(dtype=_F)).astype(_F).reshape(size, size))


def _filter_valid(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """Per-channel 'VALID' correlation over the height and width axes (-3, -2)."""
    k = kernel.shape[0]
    h, w = x.shape[-3] - k + 1, x.shape[-2] - k + 1
    out = np.zeros(x.shape[:-3] + (h, w, x.shape[-1]), _F)
    for i in range(k):
        for j in range(k):
            out += kernel[i, j] * x[..., i:i + h, j:j + w, :]
    return out


def ssim(img1: Any, img2: Any, max_val: float, filter_size: int = 11, filter_sigma: float = 1.5,
         k1: float = 0.01, k2: float = 0.03, return_index_map: bool = False) -> np.ndarray:
    """Structural similarity (Wang et al. 2004) per image (``tf.image.ssim``).

    A ``filter_size`` Gaussian window of width ``filter_sigma``, 'VALID' (no padding), averaged
    over positions and channels.

    Args:
      img1: ``[..., height, width, channels]``, height and width at least ``filter_size``.
      img2: the same shape and dtype.
      max_val: the dynamic range (255 for uint8, 1.0 for floats in [0, 1]).
      filter_size: the window size.
      filter_sigma: the window's standard deviation.
      k1: the luminance constant.
      k2: the contrast constant.
      return_index_map: return the per-position map (averaged over channels) instead of the mean.

    Returns:
      float32 ``[...]`` (or ``[..., h', w']`` with ``return_index_map``).

    Raises:
      InvalidArgumentError: images smaller than the filter.
    """
    api = "tps.image.ssim"
    x, y = _pair(img1, img2, api)
    peak = _max_val(max_val, x.dtype)
    x, y = convert_image_dtype(x, np.float32), convert_image_dtype(y, np.float32)
    size = int(filter_size)
    if min(x.shape[-3:-1]) < size:
        raise InvalidArgumentError(f"{api}: images of shape {tuple(x.shape)} are smaller than "
                                   f"filter_size={size}.\nFix: pass a smaller filter_size or larger images.")
    value, _ = _ssim_per_channel(x, y, peak, size, filter_sigma, k1, k2, return_index_map)
    return np.asarray(value.mean(axis=-1, dtype=_F), _F)


def _ssim_per_channel(x: np.ndarray, y: np.ndarray, peak: np.ndarray, size: int, sigma: float, k1: float,
                      k2: float, index_map: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """SSIM and contrast-structure per channel: ``[..., channels]`` (or maps with ``index_map``)."""
    kernel = _gauss(size, sigma)
    c1 = _F((_F(k1) * peak) ** 2)
    c2 = _F((_F(k2) * peak) ** 2)
    mean0, mean1 = _filter_valid(x, kernel), _filter_valid(y, kernel)
    num0 = mean0 * mean1 * _F(2)
    den0 = np.square(mean0) + np.square(mean1)
    luminance = (num0 + c1) / (den0 + c1)
    num1 = _filter_valid(x * y, kernel) * _F(2)
    den1 = _filter_valid(np.square(x) + np.square(y), kernel)
    cs = (num1 - num0 + c2) / (den1 - den0 + c2)
    value = luminance * cs
    if not index_map:
        value = value.mean(axis=(-3, -2), dtype=_F)
        cs = cs.mean(axis=(-3, -2), dtype=_F)
    return value, cs


_MSSSIM_WEIGHTS = (0.0448, 0.2856, 0.3001, 0.2363, 0.1333)


def ssim_multiscale(img1: Any, img2: Any, max_val: float, power_factors: Any = _MSSSIM_WEIGHTS,
                    filter_size: int = 11, filter_sigma: float = 1.5, k1: float = 0.01,
                    k2: float = 0.03) -> np.ndarray:
    """Multi-scale SSIM (Wang, Simoncelli & Bovik 2003) per image (``tf.image.ssim_multiscale``).

    At each of ``len(power_factors)`` scales the images are halved by 2x2 averaging (an odd side
    is first extended by mirroring its last row or column); the result is the product of the
    contrast-structure terms of all but the last scale and the SSIM of the last, each clipped at 0
    and raised to its power factor, averaged over channels.

    Args:
      img1: ``[..., height, width, channels]``; the smallest scale must still hold ``filter_size``.
      img2: the same shape and dtype.
      max_val: the dynamic range (255 for uint8, 1.0 for floats in [0, 1]).
      power_factors: the weight of each scale; default Wang et al.'s five.
      filter_size: the Gaussian window size.
      filter_sigma: the window's standard deviation.
      k1: the luminance constant.
      k2: the contrast constant.

    Returns:
      float32 ``[...]``.

    Raises:
      InvalidArgumentError: images too small for the filter at the smallest scale.
    """
    api = "tps.image.ssim_multiscale"
    x, y = _pair(img1, img2, api)
    peak = _max_val(max_val, x.dtype)
    imgs = [convert_image_dtype(x, np.float32), convert_image_dtype(y, np.float32)]
    factors = [float(f) for f in power_factors]
    size = int(filter_size)
    mcs: list[np.ndarray] = []
    value = np.zeros(0, _F)
    for scale in range(len(factors)):
        if scale > 0:
            imgs = [_halve(image) for image in imgs]
        if min(imgs[0].shape[-3:-1]) < size:
            raise InvalidArgumentError(
                f"{api}: at scale {scale} the images are {imgs[0].shape[-3:-1]}, smaller than "
                f"filter_size={size}.\nFix: pass images of at least {size * 2 ** (len(factors) - 1)} "
                "pixels a side, fewer power_factors, or a smaller filter_size.")
        value, cs = _ssim_per_channel(imgs[0], imgs[1], peak, size, filter_sigma, k1, k2)
        mcs.append(np.maximum(cs, _F(0)))
    mcs.pop()
    stacked = np.stack(mcs + [np.maximum(value, _F(0))], axis=-1)
    weighted = np.prod(np.power(stacked, np.array(factors, _F)), axis=-1, dtype=_F)
    return np.asarray(weighted.mean(axis=-1, dtype=_F), _F)


def _halve(image: np.ndarray) -> np.ndarray:
    """2x2 average pooling ('VALID') after mirroring an odd last row / column."""
    pad_h, pad_w = image.shape[-3] % 2, image.shape[-2] % 2
    if pad_h or pad_w:
        pad = [(0, 0)] * (image.ndim - 3) + [(0, pad_h), (0, pad_w), (0, 0)]
        image = np.pad(image, pad, mode="symmetric")
    h, w = image.shape[-3] // 2, image.shape[-2] // 2
    blocks = image.reshape(image.shape[:-3] + (h, 2, w, 2, image.shape[-1]))
    return np.asarray(blocks.mean(axis=(-4, -2), dtype=_F), _F)


def total_variation(images: Any, name: str | None = None) -> np.ndarray:
    """The sum of absolute differences of neighbouring pixels (``tf.image.total_variation``).

    Args:
      images: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      A scalar (3-D input) or ``[batch]``, in the input dtype (integers may wrap as TensorFlow's).
    """
    del name
    x = as_image(images, "tps.image.total_variation", "images")
    if x.ndim not in (3, 4):
        raise ValueError(f"'images' must be either 3 or 4-dimensional.\ntps.image.total_variation: "
                         f"received shape {tuple(x.shape)}; Fix: pass [h, w, c] or [b, h, w, c].")
    axis = None if x.ndim == 3 else (1, 2, 3)
    with np.errstate(over="ignore"):
        d1 = np.abs(np.diff(x, axis=-3))
        d2 = np.abs(np.diff(x, axis=-2))
        return np.asarray(d1.sum(axis=axis, dtype=x.dtype) + d2.sum(axis=axis, dtype=x.dtype), x.dtype)


def _four(values: Any, name: str, api: str) -> tuple[int, int]:
    v = [int(t) for t in values]
    if len(v) != 4 or v[0] != 1 or v[3] != 1:
        raise InvalidArgumentError(f"{api}: {name} must be [1, rows, cols, 1]; received {list(values)}.\n"
                                   f"Fix: pass e.g. {name}=[1, 3, 3, 1].")
    return v[1], v[2]


def extract_patches(images: Any, sizes: Any, strides: Any, rates: Any, padding: str,
                    name: str | None = None) -> np.ndarray:
    """Patches of ``images`` stacked in the depth axis (``tf.image.extract_patches``).

    Args:
      images: ``[batch, height, width, depth]``.
      sizes: ``[1, size_rows, size_cols, 1]``.
      strides: ``[1, stride_rows, stride_cols, 1]``: the step between patch origins.
      rates: ``[1, rate_rows, rate_cols, 1]``: the step between a patch's sampled pixels.
      padding: ``'VALID'`` (whole patches only) or ``'SAME'`` (zero padding; ``ceil(in / stride)``
        patches).
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``[batch, out_rows, out_cols, size_rows * size_cols * depth]``, same dtype; each patch in
      row, column, depth order.
    """
    del name
    api = "tps.image.extract_patches"
    x = as_image(images, api, "images")
    if x.ndim != 4:
        raise ValueError(f"{api}: images must be 4-D [batch, height, width, depth]; received shape "
                         f"{tuple(x.shape)}.\nFix: add a batch axis: images[None].")
    kr, kc = _four(sizes, "sizes", api)
    sr, sc = _four(strides, "strides", api)
    rr, rc = _four(rates, "rates", api)
    if padding not in ("VALID", "SAME"):
        raise ValueError(f"{api}: padding must be 'VALID' or 'SAME'; received {padding!r}.")
    batch, h, w, depth = x.shape
    er, ec = kr + (kr - 1) * (rr - 1), kc + (kc - 1) * (rc - 1)
    if padding == "VALID":
        oh, ow = max(-(-(h - er + 1) // sr), 0), max(-(-(w - ec + 1) // sc), 0)
        top = left = 0
    else:
        oh, ow = -(-h // sr), -(-w // sc)
        top = max((oh - 1) * sr + er - h, 0) // 2
        left = max((ow - 1) * sc + ec - w, 0) // 2
    padded = np.zeros((batch, h + 2 * er + top, w + 2 * ec + left, depth), x.dtype)
    padded[:, top:top + h, left:left + w] = x
    out = np.empty((batch, oh, ow, kr, kc, depth), x.dtype)
    for i in range(kr):
        for j in range(kc):
            r0, c0 = i * rr, j * rc
            out[:, :, :, i, j] = padded[:, r0:r0 + oh * sr:sr, c0:c0 + ow * sc:sc][:, :oh, :ow]
    return out.reshape(batch, oh, ow, kr * kc * depth)
