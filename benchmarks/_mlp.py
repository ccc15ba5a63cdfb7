"""The benchmarks' model: an MLP 64 -> 512 -> 512 -> 10 with softmax cross-entropy.

Import after ``_common.setup_devices`` (this module imports JAX).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

SIZES = [64, 512, 512, 10]
GLOBAL_BATCH = 1024


def init_params(key: Any, sizes: list[int] = SIZES) -> list[tuple[Any, Any]]:
    """He-style normal weights, zero biases; the same for every caller with the same key."""
    return [
        (jax.random.normal(jax.random.fold_in(key, i), (a, b)) / np.sqrt(a), jnp.zeros(b))
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))
    ]


def loss_fn(params: list[tuple[Any, Any]], x: Any, y: Any) -> Any:
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    logp = jax.nn.log_softmax(h)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))
