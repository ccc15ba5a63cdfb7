"""The resampling kernels behind ``tf.image.resize``, in float32 as TensorFlow's CPU kernels.

Four families, each picked by ``resize`` as TensorFlow 2.21 picks its op:

* ``nearest``  - ``ResizeNearestNeighbor(half_pixel_centers=True)``: source index
  ``floor((x + 0.5) * in / out)`` clamped to the image.
* ``bilinear`` - ``ResizeBilinear(half_pixel_centers=True)``: source position
  ``(x + 0.5) * in / out - 0.5``, neighbours clamped at the edges.
* ``bicubic``  - ``ResizeBicubic(half_pixel_centers=True)``: Keys' cubic (a = -0.5) with weights
  read from a 1025-entry table (so they are quantised to 1/1024 as TensorFlow's), out-of-image
  taps dropped and the rest renormalised.
* ``area``     - ``ResizeArea``: the mean over each output pixel's footprint.
* ``scale_and_translate`` - ``ScaleAndTranslate``: separable filtering with a named kernel
  (lanczos3/5, gaussian, mitchellcubic, keyscubic, triangle), widened by the down-scaling factor
  when ``antialias`` is set.

The index arithmetic is done in float32 as TensorFlow does it, since a float64 index can land on
the other side of a pixel boundary; sums are float32 too.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_F = np.float32
_TABLE_SIZE = 1024


def _in_out(in_size: int, out_size: int) -> np.float32:
    return _F(in_size) / _F(out_size)


def nearest(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """[b, h, w, c] -> [b, height, width, c] with the input dtype."""

    def index(in_size: int, out_size: int) -> np.ndarray:
        scale = _in_out(in_size, out_size)
        pos = (np.arange(out_size, dtype=_F) + _F(0.5)) * scale
        return np.asarray(np.clip(np.floor(pos).astype(np.int64), 0, in_size - 1))

    rows = index(images.shape[1], height)
    cols = index(images.shape[2], width)
    return images[:, rows][:, :, cols]


def _linear_weights(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scale = _in_out(in_size, out_size)
    pos = (np.arange(out_size, dtype=_F) + _F(0.5)) * scale - _F(0.5)
    floor = np.floor(pos)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(pos).astype(np.int64), in_size - 1)
    return lower, upper, (pos - floor).astype(_F)


def bilinear(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """[b, h, w, c] -> float32 [b, height, width, c]."""
    x = images.astype(_F)
    y0, y1, ly = _linear_weights(x.shape[1], height)
    x0, x1, lx = _linear_weights(x.shape[2], width)
    lx = lx[None, None, :, None]
    ly = ly[None, :, None, None]
    top_rows, bottom_rows = x[:, y0], x[:, y1]
    top = top_rows[:, :, x0] + (top_rows[:, :, x1] - top_rows[:, :, x0]) * lx
    bottom = bottom_rows[:, :, x0] + (bottom_rows[:, :, x1] - bottom_rows[:, :, x0]) * lx
    return np.asarray((top + (bottom - top) * ly).astype(_F))


def _keys_table() -> np.ndarray:
    a = _F(-0.5)
    x = (np.arange(_TABLE_SIZE + 1, dtype=_F) / _F(_TABLE_SIZE)).astype(_F)
    near = ((a + _F(2)) * x - (a + _F(3))) * x * x + _F(1)
    x1 = x + _F(1)
    far = ((a * x1 - _F(5) * a) * x1 + _F(8) * a) * x1 - _F(4) * a
    return np.stack([near, far], axis=1).astype(_F)


_KEYS = _keys_table()


def _cubic_weights(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    scale = _in_out(in_size, out_size)
    pos = (np.arange(out_size, dtype=_F) + _F(0.5)) * scale - _F(0.5)
    base = np.floor(pos)
    offset = np.rint((pos - base) * _F(_TABLE_SIZE)).astype(np.int64)
    base = base.astype(np.int64)
    weights = np.stack([_KEYS[offset, 1], _KEYS[offset, 0],
                        _KEYS[_TABLE_SIZE - offset, 0], _KEYS[_TABLE_SIZE - offset, 1]], axis=1)
    taps = base[:, None] + np.arange(-1, 3)[None, :]
    inside = (taps >= 0) & (taps < in_size)
    weights = np.where(inside, weights, _F(0)).astype(_F)
    total = weights.sum(axis=1, dtype=_F)
    ok = np.abs(total) >= _F(1000) * np.finfo(_F).tiny
    weights = np.where(ok[:, None], weights * (_F(1) / np.where(ok, total, _F(1)))[:, None], weights)
    return np.clip(taps, 0, in_size - 1), weights.astype(_F)


def bicubic(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """[b, h, w, c] -> float32 [b, height, width, c]; columns first, then rows, as TensorFlow."""
    x = images.astype(_F)
    ry, wy = _cubic_weights(x.shape[1], height)
    rx, wx = _cubic_weights(x.shape[2], width)
    # Interpolate along y for every needed column, then along x.
    cols = x[:, :, rx]  # [b, h, width, 4, c]
    along_y = np.zeros((x.shape[0], height, width, 4, x.shape[3]), _F)
    for k in range(4):
        along_y += cols[:, ry[:, k]] * wy[None, :, k, None, None, None]
    out = np.zeros((x.shape[0], height, width, x.shape[3]), _F)
    for k in range(4):
        out += along_y[:, :, :, k] * wx[None, None, :, k, None]
    return out


def _area_matrix(in_size: int, out_size: int) -> np.ndarray:
    """[out, in] footprint weights (not normalised): the overlap of each output pixel's span."""
    scale = _in_out(in_size, out_size)
    matrix = np.zeros((out_size, in_size), _F)
    for o in range(out_size):
        start = _F(o) * scale
        end = _F(o + 1) * scale
        for i in range(int(np.floor(start)), int(np.ceil(end))):
            weight = min(_F(i + 1), end) - max(_F(i), start)
            matrix[o, min(i, in_size - 1)] += _F(weight)
    return matrix


def area(images: np.ndarray, height: int, width: int) -> np.ndarray:
    """[b, h, w, c] -> float32 [b, height, width, c]."""
    x = images.astype(_F)
    norm = _F(1) / (_in_out(x.shape[1], height) * _in_out(x.shape[2], width))
    out = _apply_taps(x, _taps(_area_matrix(x.shape[1], height)), axis=1)
    out = _apply_taps(out, _taps(_area_matrix(x.shape[2], width)), axis=2)
    return (out * norm).astype(_F)


def _taps(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A banded [out, in] weight matrix as (source indices, weights), both [out, K]."""
    nonzero = matrix != 0
    any_tap = nonzero.any(axis=1)
    first = np.where(any_tap, nonzero.argmax(axis=1), 0)
    last = np.where(any_tap, matrix.shape[1] - 1 - nonzero[:, ::-1].argmax(axis=1), 0)
    k = int((last - first).max(initial=0)) + 1
    index = np.minimum(first[:, None] + np.arange(k)[None, :], matrix.shape[1] - 1)
    weights = np.take_along_axis(matrix, index, axis=1)
    weights = np.where(first[:, None] + np.arange(k)[None, :] < matrix.shape[1], weights, _F(0))
    return index, weights.astype(_F)


def _apply_taps(x: np.ndarray, taps: tuple[np.ndarray, np.ndarray], axis: int) -> np.ndarray:
    """Sums ``weights[o, k] * x[..., index[o, k], ...]`` over k along ``axis``, tap by tap in order."""
    index, weights = taps
    shape = [1] * x.ndim
    shape[axis] = index.shape[0]
    out = np.zeros(x.shape[:axis] + (index.shape[0],) + x.shape[axis + 1:], _F)
    for k in range(index.shape[1]):
        out += np.take(x, index[:, k], axis=axis) * weights[:, k].reshape(shape)
    return out


# Kernels of ScaleAndTranslate: (radius, function of |x|).
def _lanczos(radius: float) -> Callable[[np.ndarray], np.ndarray]:
    def kernel(x: np.ndarray) -> np.ndarray:
        x = np.abs(x).astype(_F)
        pi_x = _F(np.pi) * x
        with np.errstate(divide="ignore", invalid="ignore"):
            value = (_F(radius) * np.sin(pi_x) * np.sin(pi_x / _F(radius)) / (pi_x * pi_x)).astype(_F)
        value = np.where(x <= _F(1e-3), _F(1), value)
        return np.where(x > _F(radius), _F(0), value).astype(_F)

    return kernel


def _gaussian(x: np.ndarray) -> np.ndarray:
    x = np.abs(x).astype(_F)
    sigma = _F(0.5)
    value = np.exp(-x * x / (_F(2) * sigma * sigma)).astype(_F)
    return np.where(x >= _F(1.5), _F(0), value).astype(_F)


def _triangle(x: np.ndarray) -> np.ndarray:
    x = np.abs(x).astype(_F)
    return np.where(x >= _F(1), _F(0), _F(1) - x).astype(_F)


def _keys_cubic(x: np.ndarray) -> np.ndarray:
    x = np.abs(x).astype(_F)
    far = ((_F(-0.5) * x + _F(2.5)) * x - _F(4)) * x + _F(2)
    near = (_F(1.5) * x - _F(2.5)) * x * x + _F(1)
    return np.where(x >= _F(2), _F(0), np.where(x >= _F(1), far, near)).astype(_F)


def _mitchell(x: np.ndarray) -> np.ndarray:
    x = np.abs(x).astype(_F)
    far = (((_F(-7 / 18) * x + _F(2)) * x - _F(10 / 3)) * x + _F(16 / 9))
    near = (_F(7 / 6) * x - _F(2)) * x * x + _F(8 / 9)
    return np.where(x >= _F(2), _F(0), np.where(x >= _F(1), far, near)).astype(_F)


KERNELS: dict[str, tuple[float, Callable[[np.ndarray], np.ndarray]]] = {
    "lanczos3": (3.0, _lanczos(3.0)),
    "lanczos5": (5.0, _lanczos(5.0)),
    "gaussian": (1.5, _gaussian),
    "triangle": (1.0, _triangle),
    "keyscubic": (2.0, _keys_cubic),
    "mitchellcubic": (2.0, _mitchell),
}


def _span_matrix(in_size: int, out_size: int, kernel_name: str, antialias: bool) -> np.ndarray:
    """[out, in] normalised filter weights of ScaleAndTranslate (scale = out / in, no translation)."""
    radius, kernel = KERNELS[kernel_name]
    scale = _F(out_size) / _F(in_size)
    inv_scale = _F(1.0 / float(scale))
    kernel_scale = max(inv_scale, _F(1)) if antialias else _F(1)
    reach = _F(radius) * kernel_scale
    matrix = np.zeros((out_size, in_size), _F)
    for o in range(out_size):
        sample = (_F(o) + _F(0.5)) * inv_scale
        if sample < 0 or sample > in_size:
            continue
        start = min(max(int(np.ceil(sample - reach - _F(0.5))), 0), in_size - 1)
        end = min(max(int(np.floor(sample + reach - _F(0.5))), 0), in_size - 1) + 1
        source = np.arange(start, end, dtype=_F)
        weights = kernel(((source + _F(0.5)) - sample) / kernel_scale)
        total = _F(0)
        for w in weights:
            total = _F(total + w)
        if abs(total) >= _F(1000) * np.finfo(_F).tiny:
            weights = (weights * (_F(1) / total)).astype(_F)
        matrix[o, start:end] = weights
    return matrix


def scale_and_translate(images: np.ndarray, height: int, width: int, kernel_name: str,
                        antialias: bool) -> np.ndarray:
    """[b, h, w, c] -> float32 [b, height, width, c]: along x first, then along y."""
    x = images.astype(_F)
    out = _apply_taps(x, _taps(_span_matrix(x.shape[2], width, kernel_name, antialias)), axis=2)
    return _apply_taps(out, _taps(_span_matrix(x.shape[1], height, kernel_name, antialias)), axis=1)
