"""strategy.run vs hand-written jax.jit(jax.shard_map(...)): per-call time of a train step.

Small MLP (64 -> 512 -> 512 -> 10), 8 replicas, global batch 1024, SGD with the
gradients all-reduced (MEAN). Both sides keep at most 4 programs in flight (the
CPU-collectives hazard), are measured interleaved in one process, and report
the median seconds per step; ratio = ours / hand-written (target <= 1.10).
"""

from __future__ import annotations

import collections
import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))
import _common  # noqa: E402

_common.setup_devices(8)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from _mlp import init_params, loss_fn  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import tpustrategy as tps  # noqa: E402

LR = 0.01


def main() -> None:
    args = _common.parser(__doc__.splitlines()[0]).parse_args()
    n = len(jax.devices())
    strategy = tps.MirroredStrategy()
    mesh = strategy.mesh
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1024, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=1024).astype(np.int32)

    # Ours ---------------------------------------------------------------------
    def replica_step(params, x, y):
        ctx = tps.get_replica_context()
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        grads = ctx.all_reduce("MEAN", grads)
        new = jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)
        return new, ctx.all_reduce("MEAN", loss)

    x_pr = tps.PerReplica(list(np.split(x, n)))
    y_pr = tps.PerReplica(list(np.split(y, n)))
    state = {"ours": init_params(jax.random.PRNGKey(0))}

    def ours_step():
        state["ours"], loss = strategy.run(replica_step, (state["ours"], x_pr, y_pr))
        return loss

    # Hand-written -------------------------------------------------------------
    # The fastest correct hand-written form: replication checks off (so gradients
    # are per-device, no extra collective to re-replicate the parameters).
    def body(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        grads = jax.lax.pmean(grads, "replica")
        new = jax.tree_util.tree_map(lambda p, g: p - LR * g, params, grads)
        return new, jax.lax.pmean(loss, "replica")

    hand = jax.jit(
        jax.shard_map(
            body,
            mesh=mesh,
            in_specs=(P(), P("replica"), P("replica")),
            out_specs=(P(), P()),
            check_vma=False,
        )
    )
    xs = jax.device_put(x, NamedSharding(mesh, P("replica")))
    ys = jax.device_put(y, NamedSharding(mesh, P("replica")))
    state["hand"] = jax.device_put(init_params(jax.random.PRNGKey(0)), NamedSharding(mesh, P()))
    inflight: collections.deque = collections.deque()

    def hand_step():
        state["hand"], loss = hand(state["hand"], xs, ys)
        inflight.append(loss)
        if len(inflight) > 4:
            inflight.popleft().block_until_ready()
        return loss

    def wait(out):
        jax.block_until_ready(out)

    iters = 20 if args.quick else 100
    for step in (ours_step, hand_step):  # compile and warm up
        _common.timed_loop(step, 5, wait)
    results = _common.side_by_side(
        {
            "ours": lambda: _common.timed_loop(ours_step, iters, wait),
            "hand": lambda: _common.timed_loop(hand_step, iters, wait),
        },
        rounds=3 if args.quick else 7,
    )
    np.testing.assert_allclose(  # same computation on both sides
        np.asarray(state["ours"][0][0].values[0]),
        np.asarray(state["hand"][0][0]),
        rtol=1e-4,
        atol=1e-5,
    )
    rows = [
        _common.row(
            "strategy.run train step vs jit(shard_map) (s/step)",
            results["ours"],
            results["hand"],
            "s/step",
        )
    ]
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
