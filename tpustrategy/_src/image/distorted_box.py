"""``tf.image.sample_distorted_bounding_box``: a random crop that keeps part of an object.

The algorithm is TensorFlow's kernel's: up to ``max_attempts`` times, draw an aspect ratio, a
height whose area lies in ``area_range`` (of the image) and a position; accept the first crop
that covers at least ``min_object_covered`` of some given box; fall back to the whole image.
``stateless_sample_distorted_bounding_box`` draws TensorFlow's own Philox stream (``philox``) in
the kernel's order, so it gives TensorFlow's crops for the same seed; the stateful form draws
NumPy's numbers (see ``random_ops``), so its crops differ from TensorFlow's.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.image import philox

_LOCK = threading.Lock()
_GENERATORS: dict[int, np.random.Generator] = {}
_UNSEEDED = np.random.default_rng()
_F = np.float32


class _NumpyDraws:
    """The kernel's two draws from a NumPy generator."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng

    def rand_float(self) -> np.float32:
        return _F(self._rng.random())

    def uniform(self, n: int) -> int:
        return int(self._rng.integers(0, n))


class _PhiloxDraws:
    """The kernel's two draws from TensorFlow's stateless Philox stream, word by word:
    ``rand_float`` is the 23-bit mantissa float of a word, ``uniform(n)`` is ``word % n``."""

    def __init__(self, seed: tuple[int, int]) -> None:
        self._seed = seed
        self._words = philox.random_bits(seed, 64)
        self._used = 0

    def _word(self) -> int:
        if self._used == len(self._words):
            self._words = philox.random_bits(self._seed, 2 * len(self._words))
        self._used += 1
        return int(self._words[self._used - 1])

    def rand_float(self) -> np.float32:
        bits = np.array([(self._word() & 0x7FFFFF) | 0x3F800000], np.uint32)
        return _F(bits.view(_F)[0] - _F(1))

    def uniform(self, n: int) -> int:
        return self._word() % n


def _rint(value: float | np.floating[Any]) -> int:
    return int(np.rint(_F(value)))


def _random_crop(width: int, height: int, min_area_frac: float, max_area_frac: float, ratio: float,
                 rng: _NumpyDraws | _PhiloxDraws) -> tuple[int, int, int, int] | None:
    if max_area_frac <= 0 or ratio <= 0 or width <= 0 or height <= 0 or min_area_frac > max_area_frac:
        return None
    min_area = _F(_F(min_area_frac) * _F(width) * _F(height))
    max_area = _F(_F(max_area_frac) * _F(width) * _F(height))
    h = _rint(np.sqrt(_F(min_area / _F(ratio))))
    max_h = _rint(np.sqrt(_F(max_area / _F(ratio))))
    if _rint(max_h * _F(ratio)) > width:
        max_h = int((width + 0.5 - 1e-7) / ratio)
        if _rint(max_h * _F(ratio)) > width:
            max_h -= 1
    max_h = min(max_h, height)
    h = min(h, max_h)
    if h < max_h:
        h += rng.uniform(max_h - h + 1)
    w = _rint(h * _F(ratio))
    area = float(w * h)
    if area < min_area:
        h += 1
        w = _rint(h * _F(ratio))
        area = float(w * h)
    if area < min_area:
        return None
    if area > max_area:
        h -= 1
        w = _rint(h * _F(ratio))
        area = float(w * h)
    if area < min_area or area > max_area or w > width or h > height or w <= 0 or h <= 0:
        return None
    y = rng.uniform(height - h) if h < height else 0
    x = rng.uniform(width - w) if w < width else 0
    return x, y, x + w, y + h


def _covers(crop: tuple[int, int, int, int], boxes: list[tuple[int, int, int, int]], minimum: float) -> bool:
    x0, y0, x1, y1 = crop
    if (x1 - x0) * (y1 - y0) < 1:
        return False
    for bx0, by0, bx1, by1 in boxes:
        area = (bx1 - bx0) * (by1 - by0)
        if area < 1:
            continue
        iw = max(min(x1, bx1) - max(x0, bx0), 0)
        ih = max(min(y1, by1) - max(y0, by0), 0)
        if _F(iw * ih) / _F(area) >= _F(minimum):
            return True
    return False


def stateless_sample_distorted_bounding_box(image_size: Any, bounding_boxes: Any, seed: Any,
                                            min_object_covered: float = 0.1, aspect_ratio_range: Any = None,
                                            area_range: Any = None, max_attempts: int | None = None,
                                            use_image_if_no_bounding_boxes: bool | None = None,
                                            name: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``sample_distorted_bounding_box`` with TensorFlow's crop for ``seed=[a, b]``
    (``tf.image.stateless_sample_distorted_bounding_box``).

    Args and Returns as for ``sample_distorted_bounding_box``; ``seed`` is a shape-[2] int pair.
    """
    del name
    api = "tps.image.stateless_sample_distorted_bounding_box"
    draws = _PhiloxDraws(philox.check_seed(seed, api))
    return _checked(api, image_size, bounding_boxes, 0, min_object_covered, aspect_ratio_range, area_range,
                    max_attempts, use_image_if_no_bounding_boxes, draws)


def sample_distorted_bounding_box(image_size: Any, bounding_boxes: Any, seed: int = 0,
                                  min_object_covered: float = 0.1, aspect_ratio_range: Any = None,
                                  area_range: Any = None, max_attempts: int | None = None,
                                  use_image_if_no_bounding_boxes: bool | None = None,
                                  name: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random crop covering part of a box (``tf.image.sample_distorted_bounding_box``).

    Args:
      image_size: ``[height, width, channels]`` (int).
      bounding_boxes: float ``[batch, N, 4]`` normalised ``[y_min, x_min, y_max, x_max]``.
      seed: an int for a reproducible sequence; 0 (TensorFlow's default) draws fresh values.
      min_object_covered: the fraction of some box the crop must cover.
      aspect_ratio_range: ``[low, high]`` of width / height; default ``[0.75, 1.33]``.
      area_range: ``[low, high]`` fraction of the image area; default ``[0.05, 1.0]``.
      max_attempts: tries before falling back to the whole image; default 100.
      use_image_if_no_bounding_boxes: with no boxes, treat the whole image as the box.
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``(begin, size, bboxes)``: ``begin = [y, x, 0]`` and ``size = [h, w, -1]`` in
      ``image_size``'s dtype (for ``tps.image`` slicing or ``tf.slice``), and the crop as a
      float32 ``[1, 1, 4]`` normalised box.

    Raises:
      InvalidArgumentError: no boxes without ``use_image_if_no_bounding_boxes``, boxes outside
        ``[0, 1]``, or bad ranges.
    """
    del name
    return _checked("tps.image.sample_distorted_bounding_box", image_size, bounding_boxes, seed,
                    min_object_covered, aspect_ratio_range, area_range, max_attempts,
                    use_image_if_no_bounding_boxes, None)


def _checked(api: str, image_size: Any, bounding_boxes: Any, seed: int, min_object_covered: Any,
             aspect_ratio_range: Any, area_range: Any, max_attempts: int | None,
             use_image_if_no_bounding_boxes: bool | None,
             draws: _PhiloxDraws | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    size = np.asarray(image_size)
    if size.shape != (3,) or size.dtype.kind not in "iu":
        raise InvalidArgumentError(f"image_size must be 1-dimensional with 3 elements; received "
                                   f"{image_size!r}\n{api}: Fix: pass image.shape as a list of ints.")
    height, width = int(size[0]), int(size[1])
    if height <= 0 or width <= 0:
        raise InvalidArgumentError(f"image height and width must be positive; received {size.tolist()}\n"
                                   f"{api}: Fix: pass the shape of a non-empty image.")
    ratio_range = [0.75, 1.33] if aspect_ratio_range is None else [float(v) for v in aspect_ratio_range]
    areas = [0.05, 1.0] if area_range is None else [float(v) for v in area_range]
    attempts = 100 if max_attempts is None else int(max_attempts)
    if attempts <= 0:
        raise InvalidArgumentError(f"max_attempts must be positive: {attempts}\n{api}: Fix: pass max_attempts >= 1.")
    if len(ratio_range) != 2 or len(areas) != 2:
        raise InvalidArgumentError(f"aspect_ratio_range and area_range must have 2 elements\n{api}: "
                                   f"received {ratio_range} and {areas}.")
    if not (0 < areas[0] <= 1 and 0 < areas[1] <= 1):
        raise InvalidArgumentError(f"area_range must be in (0, 1]; received {areas}\n{api}: Fix: e.g. "
                                   "area_range=[0.08, 1.0].")
    raw = np.asarray(bounding_boxes, _F).reshape(-1, 4)
    if np.any((raw < 0) | (raw > 1)):
        raise InvalidArgumentError(f"All bounding box coordinates must be in [0.0, 1.0]\n{api}: "
                                   f"received {raw.tolist()}; Fix: normalise by the image size.")
    boxes = [(int(_F(b[1]) * _F(width)), int(_F(b[0]) * _F(height)), int(_F(b[3]) * _F(width)),
              int(_F(b[2]) * _F(height))) for b in raw]
    if not boxes:
        if not use_image_if_no_bounding_boxes:
            raise InvalidArgumentError(
                "No bounding boxes provided as input. One must enable use_image_if_no_bounding_boxes if "
                f"you wish to not provide any bounding boxes.\n{api}: Fix: pass "
                "use_image_if_no_bounding_boxes=True.")
        boxes = [(0, 0, width, height)]
    covered = float(np.asarray(min_object_covered))
    if draws is None:
        with _LOCK:
            rng = (_UNSEEDED if not seed else
                   _GENERATORS.setdefault(int(seed), np.random.default_rng(int(seed))))
            return _sample(size, boxes, covered, ratio_range, areas, attempts, _NumpyDraws(rng))
    return _sample(size, boxes, covered, ratio_range, areas, attempts, draws)


def _sample(size: np.ndarray, boxes: list[tuple[int, int, int, int]], covered: float, ratio_range: list[float],
            areas: list[float], attempts: int,
            draws: _NumpyDraws | _PhiloxDraws) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    height, width = int(size[0]), int(size[1])
    crop = (0, 0, width, height)
    for _ in range(attempts):
        ratio = float(draws.rand_float() * _F(_F(ratio_range[1]) - _F(ratio_range[0])) + _F(ratio_range[0]))
        candidate = _random_crop(width, height, areas[0], areas[1], ratio, draws)
        if candidate is not None and _covers(candidate, boxes, covered):
            crop = candidate
            break
    x0, y0, x1, y1 = crop
    begin = np.array([y0, x0, 0], size.dtype)
    extent = np.array([y1 - y0, x1 - x0, -1], size.dtype)
    box = np.array([[[y0 / height, x0 / width, y1 / height, x1 / width]]], _F)
    return begin, extent, box
