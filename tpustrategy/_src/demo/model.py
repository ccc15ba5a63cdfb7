"""The demo's model: a two-layer MLP classifier held in mirrored ``tps.Variable``s."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import tpustrategy as tps


def init_params(seed: int, hidden: int = 128) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.normal(size=(64, hidden)) * np.sqrt(2.0 / 64)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.normal(size=(hidden, 10)) * np.sqrt(1.0 / hidden)).astype(np.float32),
        "b2": np.zeros(10, np.float32),
    }


def logits(params: dict[str, Any], x: Any) -> Any:
    h = jax.nn.relu(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def cross_entropy(params: dict[str, Any], x: Any, y: Any) -> Any:
    logp = jax.nn.log_softmax(logits(params, x))
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def as_variables(tree: Any) -> Any:
    """A pytree of mirrored variables (create under ``strategy.scope()``)."""
    return jax.tree_util.tree_map(lambda x: tps.Variable(x), tree)


def read(tree: Any) -> Any:
    return jax.tree_util.tree_map(lambda v: v.read_value(), tree, is_leaf=lambda v: isinstance(v, tps.Variable))


def assign(tree: Any, values: Any) -> None:
    leaves = jax.tree_util.tree_leaves(tree, is_leaf=lambda v: isinstance(v, tps.Variable))
    for var, value in zip(leaves, jax.tree_util.tree_leaves(values)):
        var.assign(value)
