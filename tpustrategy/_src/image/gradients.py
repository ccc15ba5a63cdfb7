"""Image derivatives of ``tf.image``: ``image_gradients`` (forward differences) and ``sobel_edges``."""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.image.checks import as_image

_SOBEL = (np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]]), np.array([[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]))


def _four_d(image: Any, api: str) -> np.ndarray:
    x = as_image(image, api)
    if x.ndim != 4:
        raise ValueError(f"{api.split('.')[-1]} expects a 4D tensor [batch_size, h, w, d], not {tuple(x.shape)}.\n"
                         f"{api}: Fix: add a batch axis: image[None].")
    return x


def image_gradients(image: Any) -> tuple[np.ndarray, np.ndarray]:
    """Forward differences ``(dy, dx)`` (``tf.image.image_gradients``).

    ``dy[:, i] = image[:, i + 1] - image[:, i]`` with a zero last row; ``dx`` likewise along width.

    Args:
      image: ``[batch, height, width, depth]``.

    Returns:
      ``(dy, dx)``, each shaped and typed as ``image``.
    """
    x = _four_d(image, "tps.image.image_gradients")
    dy = np.zeros_like(x)
    dx = np.zeros_like(x)
    dy[:, :-1] = x[:, 1:] - x[:, :-1]
    dx[:, :, :-1] = x[:, :, 1:] - x[:, :, :-1]
    return dy, dx


def sobel_edges(image: Any) -> np.ndarray:
    """The vertical and horizontal Sobel responses, with reflected borders (``tf.image.sobel_edges``).

    Args:
      image: float ``[batch, height, width, depth]``.

    Returns:
      ``[batch, height, width, depth, 2]``: ``[..., 0]`` the vertical (dy), ``[..., 1]`` the
      horizontal (dx) response.
    """
    x = _four_d(image, "tps.image.sobel_edges")
    padded = np.pad(x, [(0, 0), (1, 1), (1, 1), (0, 0)], mode="reflect")
    h, w = x.shape[1:3]
    out = np.zeros(x.shape + (2,), x.dtype)
    for k, kernel in enumerate(_SOBEL):
        for i in range(3):
            for j in range(3):
                if kernel[i, j]:
                    out[..., k] += x.dtype.type(kernel[i, j]) * padded[:, i:i + h, j:j + w]
    return out
