"""The random image ops: ``random_*`` (NumPy's generator) and ``stateless_random_*`` (TensorFlow's).

``stateless_random_*(..., seed=[a, b])`` draw TensorFlow's own Philox values (see ``philox``), so
they give TensorFlow's results for the same seed. ``random_*(..., seed=s)`` cannot: TensorFlow's
stateful values depend on its global seed and on op-creation counters. Here a ``seed`` selects
a NumPy generator (one per op and seed, shared by later calls with that seed, so a ``map``
function gets a new draw per element and the same sequence on every run); ``seed=None`` draws
from a generator seeded from the OS.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.image import color, philox
from tpustrategy._src.image.checks import as_image, check_at_least_3d

_LOCK = threading.Lock()
_GENERATORS: dict[tuple[str, int], np.random.Generator] = {}
_UNSEEDED = np.random.default_rng()

Uniform = Callable[[tuple[int, ...], float, float], np.ndarray]


def _check_op_seed(seed: Any, api: str) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, np.ndarray) and seed.ndim == 0:
        seed = seed.item()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{api}: seed must be an int or None; received {type(seed).__name__}: "
                        f"{seed!r}.\nFix: pass seed=42, or use tps.image.stateless_{api.split('.')[-1]} "
                        "with seed=(a, b) for TensorFlow's own values.")
    return int(seed)


def _stateful(api: str, seed: Any) -> Uniform:
    op_seed = _check_op_seed(seed, api)

    def uniform(shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
        with _LOCK:
            if op_seed is None:
                gen = _UNSEEDED
            else:
                gen = _GENERATORS.setdefault((api, op_seed), np.random.default_rng(op_seed))
            return gen.uniform(low, high, size=shape).astype(np.float32)

    return uniform


def stateful_integers(api: str, seed: Any, low: int, high: int) -> int:
    """One int in ``[low, high)`` from ``api``'s generator for ``seed`` (as ``_stateful``'s)."""
    op_seed = _check_op_seed(seed, api)
    with _LOCK:
        gen = _UNSEEDED if op_seed is None else _GENERATORS.setdefault((api, op_seed), np.random.default_rng(op_seed))
        return int(gen.integers(low, high))


def _stateless(api: str, seed: Any) -> Uniform:
    pair = philox.check_seed(seed, api)

    def uniform(shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
        return philox.stateless_uniform(list(shape), pair, low, high)

    return uniform


def _flip(image: Any, axis: int, uniform: Uniform, api: str) -> np.ndarray:
    array = as_image(image, api)
    check_at_least_3d(array, api)
    if array.ndim == 3:
        return np.flip(array, axis).copy() if uniform((), 0.0, 1.0) < 0.5 else array
    if array.ndim == 4:
        # TensorFlow rounds each draw: a draw above one half flips that image.
        flips = np.rint(uniform((array.shape[0],), 0.0, 1.0)) == 1
        return np.where(flips[:, None, None, None], np.flip(array, axis + 1), array)
    raise ValueError(f"'image' (shape {tuple(array.shape)}) must have either 3 or 4 dimensions.\n"
                     f"{api}: Fix: pass [height, width, channels] or [batch, height, width, channels].")


def random_flip_left_right(image: Any, seed: int | None = None) -> np.ndarray:
    """Mirrors left-right with probability 1/2 (``tf.image.random_flip_left_right``).

    A batch gets one draw per image. NumPy's generator: see the module docstring.

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      seed: an int for a reproducible sequence, or None.

    Returns:
      The image, mirrored or not, same shape and dtype.
    """
    api = "tps.image.random_flip_left_right"
    return _flip(image, 1, _stateful(api, seed), api)


def random_flip_up_down(image: Any, seed: int | None = None) -> np.ndarray:
    """Flips upside down with probability 1/2 (``tf.image.random_flip_up_down``).

    Args:
      image: ``[height, width, channels]`` or ``[batch, height, width, channels]``.
      seed: an int for a reproducible sequence, or None.

    Returns:
      The image, flipped or not, same shape and dtype.
    """
    api = "tps.image.random_flip_up_down"
    return _flip(image, 0, _stateful(api, seed), api)


def stateless_random_flip_left_right(image: Any, seed: Any) -> np.ndarray:
    """``random_flip_left_right`` with TensorFlow's values for ``seed=[a, b]``
    (``tf.image.stateless_random_flip_left_right``)."""
    api = "tps.image.stateless_random_flip_left_right"
    return _flip(image, 1, _stateless(api, seed), api)


def stateless_random_flip_up_down(image: Any, seed: Any) -> np.ndarray:
    """``random_flip_up_down`` with TensorFlow's values for ``seed=[a, b]``
    (``tf.image.stateless_random_flip_up_down``)."""
    api = "tps.image.stateless_random_flip_up_down"
    return _flip(image, 0, _stateless(api, seed), api)


def _crop_offsets(value: Any, size: Any, api: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    array = np.asarray(value)
    sizes = np.asarray(size)
    if sizes.dtype.kind not in "iu" or sizes.shape != (array.ndim,):
        raise ValueError(f"{api}: size must be a 1-D int tensor with one entry per dimension of value "
                         f"(rank {array.ndim}); received size={size!r}.\nFix: pass e.g. "
                         f"size={list(array.shape[:-1]) + [array.shape[-1]]} shrunk where you crop.")
    shape = np.array(array.shape, np.int64)
    if not np.all(shape >= sizes):
        raise InvalidArgumentError(
            f"assertion failed: [Need value.shape >= size, got ] [{' '.join(map(str, shape))}] "
            f"[{' '.join(map(str, sizes))}]\n{api}: Fix: crop to a size no larger than the value "
            "(pad first with tps.image.resize_with_crop_or_pad).")
    return array, sizes.astype(np.int64), shape - sizes + 1


def random_crop(value: Any, size: Any, seed: int | None = None, name: str | None = None) -> np.ndarray:
    """A crop of ``size`` at a uniformly random offset (``tf.image.random_crop``).

    Args:
      value: an array of any rank.
      size: one entry per dimension of ``value`` (keep a dimension whole by giving its size).
      seed: an int for a reproducible sequence, or None (NumPy's generator).
      name: accepted for TensorFlow compatibility; unused.

    Returns:
      ``value[offset : offset + size]``.

    Raises:
      InvalidArgumentError: ``size`` larger than ``value`` in some dimension.
    """
    del name
    api = "tps.image.random_crop"
    array, sizes, limit = _crop_offsets(value, size, api)
    draws = _stateful(api, seed)((len(sizes),), 0.0, 1.0)
    offsets = np.minimum((draws * limit).astype(np.int64), limit - 1)
    return array[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))].copy()


def stateless_random_crop(value: Any, size: Any, seed: Any, name: str | None = None) -> np.ndarray:
    """``random_crop`` with TensorFlow's offsets for ``seed=[a, b]``
    (``tf.image.stateless_random_crop``)."""
    del name
    api = "tps.image.stateless_random_crop"
    array, sizes, limit = _crop_offsets(value, size, api)
    draws = philox.stateless_uniform_int32([len(sizes)], philox.check_seed(seed, api), 0, 2**31 - 1)
    offsets = draws.astype(np.int64) % limit
    return array[tuple(slice(o, o + s) for o, s in zip(offsets, sizes))].copy()


def _check_delta(max_delta: float, api: str, hue: bool = False) -> None:
    if hue and max_delta > 0.5:
        raise ValueError(f"max_delta must be <= 0.5.\n{api}: received max_delta={max_delta!r}; Fix: "
                         "the hue wraps around at 1, so 0.5 already reaches every hue.")
    if max_delta < 0:
        raise ValueError(f"max_delta must be non-negative.\n{api}: received max_delta={max_delta!r}; "
                         "Fix: pass the half-width of the range, e.g. 0.2.")


def _check_range(lower: float, upper: float, api: str) -> None:
    if upper <= lower:
        raise ValueError(f"upper must be > lower.\n{api}: received lower={lower!r}, upper={upper!r}; "
                         "Fix: pass lower < upper, e.g. lower=0.8, upper=1.2.")
    if lower < 0:
        raise ValueError(f"lower must be non-negative.\n{api}: received lower={lower!r}; Fix: pass "
                         "lower >= 0.")


def _brightness(image: Any, max_delta: float, uniform: Uniform, api: str) -> np.ndarray:
    _check_delta(max_delta, api)
    return color.adjust_brightness(image, float(uniform((), -max_delta, max_delta)))


def _contrast(image: Any, lower: float, upper: float, uniform: Uniform, api: str) -> np.ndarray:
    _check_range(lower, upper, api)
    return color.adjust_contrast(image, float(uniform((), lower, upper)))


def _saturation(image: Any, lower: float, upper: float, uniform: Uniform, api: str) -> np.ndarray:
    _check_range(lower, upper, api)
    return color.adjust_saturation(image, float(uniform((), lower, upper)))


def _hue(image: Any, max_delta: float, uniform: Uniform, api: str) -> np.ndarray:
    _check_delta(max_delta, api, hue=True)
    return color.adjust_hue(image, float(uniform((), -max_delta, max_delta)))


def random_brightness(image: Any, max_delta: float, seed: int | None = None) -> np.ndarray:
    """``adjust_brightness`` by a delta uniform in ``[-max_delta, max_delta)``
    (``tf.image.random_brightness``; NumPy's generator)."""
    api = "tps.image.random_brightness"
    return _brightness(image, max_delta, _stateful(api, seed), api)


def stateless_random_brightness(image: Any, max_delta: float, seed: Any) -> np.ndarray:
    """``random_brightness`` with TensorFlow's delta for ``seed=[a, b]``
    (``tf.image.stateless_random_brightness``)."""
    api = "tps.image.stateless_random_brightness"
    return _brightness(image, max_delta, _stateless(api, seed), api)


def random_contrast(image: Any, lower: float, upper: float, seed: int | None = None) -> np.ndarray:
    """``adjust_contrast`` by a factor uniform in ``[lower, upper)``
    (``tf.image.random_contrast``; NumPy's generator)."""
    api = "tps.image.random_contrast"
    return _contrast(image, lower, upper, _stateful(api, seed), api)


def stateless_random_contrast(image: Any, lower: float, upper: float, seed: Any) -> np.ndarray:
    """``random_contrast`` with TensorFlow's factor for ``seed=[a, b]``
    (``tf.image.stateless_random_contrast``)."""
    api = "tps.image.stateless_random_contrast"
    return _contrast(image, lower, upper, _stateless(api, seed), api)


def random_saturation(image: Any, lower: float, upper: float, seed: int | None = None) -> np.ndarray:
    """``adjust_saturation`` by a factor uniform in ``[lower, upper)``
    (``tf.image.random_saturation``; NumPy's generator)."""
    api = "tps.image.random_saturation"
    return _saturation(image, lower, upper, _stateful(api, seed), api)


def stateless_random_saturation(image: Any, lower: float, upper: float, seed: Any = None) -> np.ndarray:
    """``random_saturation`` with TensorFlow's factor for ``seed=[a, b]``
    (``tf.image.stateless_random_saturation``)."""
    api = "tps.image.stateless_random_saturation"
    return _saturation(image, lower, upper, _stateless(api, seed), api)


def random_hue(image: Any, max_delta: float, seed: int | None = None) -> np.ndarray:
    """``adjust_hue`` by a delta uniform in ``[-max_delta, max_delta)``, ``max_delta <= 0.5``
    (``tf.image.random_hue``; NumPy's generator)."""
    api = "tps.image.random_hue"
    return _hue(image, max_delta, _stateful(api, seed), api)


def stateless_random_hue(image: Any, max_delta: float, seed: Any) -> np.ndarray:
    """``random_hue`` with TensorFlow's delta for ``seed=[a, b]`` (``tf.image.stateless_random_hue``)."""
    api = "tps.image.stateless_random_hue"
    return _hue(image, max_delta, _stateless(api, seed), api)
