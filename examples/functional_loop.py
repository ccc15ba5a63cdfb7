"""Functional training loop: flax.nnx + optax pytrees through ``strategy.run``.

``nnx.split`` turns the model into a graphdef (static) and a state pytree. The
state and the optax state are ``run`` arguments and come back updated as
``tps.Mirrored`` values (they are results of the all-reduced gradients), which
feed the next step directly: no ``reduce``, no copy, no host round trip.
"""

from __future__ import annotations

import os

# 8 fake CPU devices before JAX starts, unless the caller chose a count (=1: one device).
_FLAG = "--xla_force_host_platform_device_count"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}=8".strip()

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402

import tpustrategy as tps  # noqa: E402


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A learnable 4-class task: the label is the quadrant of a random projection."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 16)).astype(np.float32)
    proj = x @ np.random.default_rng(123).normal(size=(16, 2))
    return x, ((proj[:, 0] > 0) * 2 + (proj[:, 1] > 0)).astype(np.int32)


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.hidden = nnx.Linear(16, 64, rngs=rngs)
        self.out = nnx.Linear(64, 4, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.out(jax.numpy.tanh(self.hidden(x)))


def main(steps: int = 300, global_batch: int = 256, lr: float = 1e-2) -> dict[str, float]:
    strategy = tps.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    graphdef, state = nnx.split(MLP(nnx.Rngs(0)))
    tx = optax.adam(lr)
    opt_state = tx.init(state)

    def loss_fn(state, x, y):
        logits = nnx.merge(graphdef, state)(x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    def replica_step(state, opt_state, x, y):
        ctx = tps.get_replica_context()
        loss, grads = jax.value_and_grad(loss_fn)(state, x, y)
        updates, opt_state = tx.update(ctx.all_reduce("MEAN", grads), opt_state, state)
        return optax.apply_updates(state, updates), opt_state, ctx.all_reduce("MEAN", loss)

    x_all, y_all = make_data(global_batch * 16)
    losses = []
    for step in range(steps):
        i = (step % 16) * global_batch
        x, y = x_all[i:i + global_batch], y_all[i:i + global_batch]
        split = lambda a: tps.PerReplica(list(np.split(a, n)))  # noqa: E731
        state, opt_state, loss = strategy.run(replica_step, args=(state, opt_state, split(x), split(y)))
        losses.append(loss)  # Mirrored: read lazily, so steps are not blocked on the host
    losses = [float(np.asarray(v)) for v in losses]
    x_test, y_test = make_data(2048, seed=1)
    # Mirrored leaves -> one host copy each (distributed values are pytrees: is_leaf keeps them whole).
    state = jax.tree.map(np.asarray, state, is_leaf=lambda v: isinstance(v, tps.DistributedValues))
    logits = nnx.merge(graphdef, state)(x_test)
    accuracy = float((logits.argmax(-1) == y_test).mean())
    return {"first_loss": losses[0], "final_loss": float(np.mean(losses[-5:])), "accuracy": accuracy}


if __name__ == "__main__":
    print(main())
