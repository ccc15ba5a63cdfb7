"""The demo job: data-parallel training over every replica.

Until the input pipeline lands this trains a softmax regression on a
synthetic, linearly separable problem with ``strategy.run`` + ``reduce``.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import tpustrategy as tps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tpustrategy-demo", description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--global-batch", type=int, default=256)
    args = parser.parse_args(argv)

    strategy = tps.TPUStrategy()
    n = strategy.num_replicas_in_sync
    rng = np.random.default_rng(0)
    true_w = rng.normal(size=(16, 4)).astype(np.float32)

    def batch():
        x = rng.normal(size=(args.global_batch, 16)).astype(np.float32)
        return x, np.argmax(x @ true_w, axis=1).astype(np.int32)

    def loss_fn(w, x, y):
        logp = jax.nn.log_softmax(x @ w)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    def step(w, x, y):
        ctx = tps.get_replica_context()
        loss, g = jax.value_and_grad(loss_fn)(w, x, y)
        g = ctx.all_reduce("MEAN", g)
        return w - 0.5 * g, loss

    w = jnp.zeros((16, 4))
    start = time.perf_counter()
    for i in range(args.steps):
        x, y = batch()
        w, loss = strategy.run(step, (w, tps.PerReplica(np.array_split(x, n)), tps.PerReplica(np.array_split(y, n))))
        if (i + 1) % max(1, args.steps // 5) == 0:
            print(f"step {i + 1:4d}/{args.steps}  loss {float(strategy.reduce('MEAN', loss, axis=None)):.4f}")
    elapsed = time.perf_counter() - start
    x, y = batch()
    acc = float(np.mean(np.argmax(x @ np.asarray(strategy.experimental_local_results(w)[0]), 1) == y))
    print(f"replicas {n} on {jax.devices()[0].platform.upper()}; accuracy {acc:.3f}; "
          f"{args.steps * args.global_batch / elapsed:,.0f} examples/s; {elapsed:.1f} s")
    return 0
