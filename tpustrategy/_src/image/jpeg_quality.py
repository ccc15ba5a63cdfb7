"""JPEG quality noise (``tf.image.adjust_jpeg_quality`` and its random forms).

TensorFlow's recipe, kept step for step: the image is converted to uint8 (saturating), encoded
as JPEG at the quality asked for, decoded with the image's own channel count and the
``dct_method`` given, and converted back to its dtype (saturating). The codec is ``tps.io``'s
(libjpeg-turbo: ``pip install 'tpustrategy[images]'``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.image import philox, random_ops
from tpustrategy._src.image.checks import as_image
from tpustrategy._src.image.dtypes import convert_image_dtype
from tpustrategy._src.io.image_ops import decode_jpeg, encode_jpeg


def adjust_jpeg_quality(image: Any, jpeg_quality: Any, dct_method: str = "", name: str | None = None) -> np.ndarray:
    """``image`` (``[h, w, 1 or 3]``, any image dtype) re-encoded as JPEG at ``jpeg_quality``
    (0..100) and decoded, in its own dtype (``tf.image.adjust_jpeg_quality``)."""
    del name
    api = "tps.image.adjust_jpeg_quality"
    array = as_image(image, api)
    quality = int(np.asarray(jpeg_quality))
    if not 0 <= quality <= 100:
        raise InvalidArgumentError(
            f"quality must be in [0,100], got {quality}\nFix: pass jpeg_quality between 0 and 100.")
    if array.ndim != 3 or array.shape[-1] not in (1, 3):
        raise InvalidArgumentError(
            f"image must have 1 or 3 channels, got {array.shape}\nFix: {api} takes one "
            "[height, width, 1 or 3] image; map it over a batch.")
    as_uint8 = convert_image_dtype(array, np.uint8, saturate=True)
    decoded = decode_jpeg(encode_jpeg(as_uint8, quality=quality), channels=array.shape[-1],
                          dct_method=dct_method)
    return convert_image_dtype(decoded, array.dtype, saturate=True)


def _check_range(low: Any, high: Any) -> None:
    if low < 0 or high < 0 or low > 100 or high > 100:
        raise ValueError("jpeg encoding range must be between 0 and 100.")
    if low >= high:
        raise ValueError("`min_jpeg_quality` must be less than `max_jpeg_quality`.")


def random_jpeg_quality(image: Any, min_jpeg_quality: int, max_jpeg_quality: int,
                        seed: int | None = None) -> np.ndarray:
    """``adjust_jpeg_quality`` at a quality drawn uniformly from
    ``[min_jpeg_quality, max_jpeg_quality)`` (``tf.image.random_jpeg_quality``; NumPy's
    generator, so the draws differ from TensorFlow's stateful ones)."""
    _check_range(min_jpeg_quality, max_jpeg_quality)
    draw = random_ops.stateful_integers("tps.image.random_jpeg_quality", seed,
                                        int(min_jpeg_quality), int(max_jpeg_quality))
    return adjust_jpeg_quality(image, draw)


def stateless_random_jpeg_quality(image: Any, min_jpeg_quality: int, max_jpeg_quality: int,
                                  seed: Any) -> np.ndarray:
    """``random_jpeg_quality`` with TensorFlow's quality for ``seed=[a, b]``
    (``tf.image.stateless_random_jpeg_quality``: its Philox int32 draw)."""
    _check_range(min_jpeg_quality, max_jpeg_quality)
    pair = philox.check_seed(seed, "tps.image.stateless_random_jpeg_quality")
    draw = philox.stateless_uniform_int32([], pair, int(min_jpeg_quality), int(max_jpeg_quality))
    return adjust_jpeg_quality(image, int(np.asarray(draw)))
