"""The benchmarks' model: an MLP 64 -> 512 -> 512 -> 10 with softmax cross-entropy.

``init_params`` builds the weights with NumPy (no JAX program to compile, so a
fresh process starts its first step at once); ``numpy_value_and_grad`` is a
float64 NumPy reference of ``loss_fn`` and its gradient, for checking results.
Import after ``_common.setup_devices`` (this module imports JAX).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

SIZES = [64, 512, 512, 10]
GLOBAL_BATCH = 1024
Params = list[tuple[Any, Any]]


def init_params(seed: int = 0, sizes: list[int] = SIZES) -> Params:
    """He-style normal weights, zero biases (float32 NumPy); the same for every caller with the same seed."""
    rng = np.random.default_rng(seed)
    return [((rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32), np.zeros(b, np.float32))
            for a, b in zip(sizes[:-1], sizes[1:])]


def loss_fn(params: Params, x: Any, y: Any) -> Any:
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    logp = jax.nn.log_softmax(h)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def numpy_value_and_grad(params: Params, x: np.ndarray, y: np.ndarray) -> tuple[float, Params]:
    """``loss_fn`` and its gradient with respect to ``params``, in float64 NumPy."""
    hs = [np.asarray(x, np.float64)]
    for i, (w, b) in enumerate(params):
        h = hs[-1] @ np.asarray(w, np.float64) + np.asarray(b, np.float64)
        hs.append(np.maximum(h, 0) if i < len(params) - 1 else h)
    logits = hs[-1]
    logp = logits - logits.max(axis=1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
    n = len(y)
    loss = -logp[np.arange(n), y].mean()
    d = np.exp(logp)
    d[np.arange(n), y] -= 1
    d /= n
    grads: Params = []
    for i in range(len(params) - 1, -1, -1):
        w = np.asarray(params[i][0], np.float64)
        grads.insert(0, (hs[i].T @ d, d.sum(axis=0)))
        if i:
            d = (d @ w.T) * (hs[i] > 0)
    return float(loss), grads
