"""TF-style custom training loop: Variables under scope, optax, ``@tps.function``.

The model's parameters and the optimizer's state are ``tps.Variable``s created
under ``strategy.scope()`` (mirrored on every replica). One ``@tps.function``
call is one XLA program: ``strategy.run`` of the replica step (gradients,
all-reduce, optax update, ``assign``) plus ``strategy.reduce`` of the loss.
"""

from __future__ import annotations

import os

# 8 fake CPU devices before JAX starts, unless the caller chose a count (=1: one device).
_FLAG = "--xla_force_host_platform_device_count"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}=8".strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import tpustrategy as tps  # noqa: E402


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A learnable 4-class task: the label is the quadrant of a random projection."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 16)).astype(np.float32)
    proj = x @ np.random.default_rng(123).normal(size=(16, 2))
    return x, ((proj[:, 0] > 0) * 2 + (proj[:, 1] > 0)).astype(np.int32)


def loss_and_logits(p: dict, x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
    logits = jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), logits


def main(steps: int = 300, global_batch: int = 256, lr: float = 1e-2) -> dict[str, float]:
    strategy = tps.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    init = {"w1": jax.random.normal(k1, (16, 64)) * 0.25, "b1": jnp.zeros(64),
            "w2": jax.random.normal(k2, (64, 4)) * 0.125, "b2": jnp.zeros(4)}
    tx = optax.adam(lr)
    with strategy.scope():
        params = jax.tree.map(tps.Variable, init)
        opt_state = jax.tree.map(tps.Variable, tx.init(init))  # a pytree of Variables

    def replica_step(x, y):
        p = jax.tree.map(lambda v: v.read_value(), params)
        s = jax.tree.map(lambda v: v.read_value(), opt_state)
        (loss, _), grads = jax.value_and_grad(loss_and_logits, has_aux=True)(p, x, y)
        grads = tps.get_replica_context().all_reduce("MEAN", grads)
        updates, new_s = tx.update(grads, s, p)
        jax.tree.map(lambda v, u: v.assign(u), opt_state, new_s)
        jax.tree.map(lambda v, u: v.assign(u), params, optax.apply_updates(p, updates))
        return loss

    @tps.function
    def train_step(x, y):
        return strategy.reduce("MEAN", strategy.run(replica_step, args=(x, y)), axis=None)

    x_all, y_all = make_data(global_batch * 16)
    losses = []
    for step in range(steps):
        i = (step % 16) * global_batch
        x, y = x_all[i:i + global_batch], y_all[i:i + global_batch]
        split = lambda a: tps.PerReplica(list(np.split(a, n)))  # noqa: E731
        losses.append(float(train_step(split(x), split(y))))
    x_test, y_test = make_data(2048, seed=1)
    p = jax.tree.map(lambda v: v.read_value(), params)
    accuracy = float((loss_and_logits(p, x_test, y_test)[1].argmax(-1) == y_test).mean())
    return {"first_loss": losses[0], "final_loss": float(np.mean(losses[-5:])), "accuracy": accuracy}


if __name__ == "__main__":
    print(main())
