"""tps.function train step vs hand-written jit(shard_map); steps per execution; TensorFlow.

(a) MLP 64 -> 512 -> 512 -> 10, 8 replicas, global batch 1024, optax SGD: one
    ``tps.function`` step (functional style: params and optax state through
    ``strategy.run``, reduce of the loss; and Variables style) vs the same step
    written by hand as ``jax.jit(jax.shard_map(..., check_vma=False))`` + optax.
    ratio = ours / hand-written seconds per step (target <= 1.05).
(b) Steps per execution: a tiny linear model (batch 64), k=10 steps per
    ``tps.function`` call vs k=1; ratio = seconds per step (k=10) / (k=1).
(c) With ``--tf-python PATH``: TensorFlow's MirroredStrategy custom training
    loop (tf.function + strategy.run, same MLP, 8 logical CPU devices) in a
    subprocess; steps/s vs ours.

Both sides of (a) keep at most 4 programs in flight (the library bounds its own;
the hand-written loop blocks on the result from 4 calls back): XLA's CPU
collectives deadlock with many queued programs. Batches are device-resident on
both sides (ours: the PerReplica returned by an identity ``run``).
"""

from __future__ import annotations

import collections
import json
import os
import statistics
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_common.setup_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from _mlp import GLOBAL_BATCH, init_params, loss_fn  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import tpustrategy as tps  # noqa: E402

LR = 0.01
def wait(out):
    jax.block_until_ready(jax.tree.leaves(out, is_leaf=lambda v: isinstance(v, tps.DistributedValues)))


def on_device(strategy, a):
    """A PerReplica whose components already live on the replicas' devices."""
    n = strategy.num_replicas_in_sync
    return strategy.run(lambda v: v, (tps.PerReplica(list(np.split(a, n))),))


def mlp_cases(strategy, tx, x, y):
    n, mesh = strategy.num_replicas_in_sync, strategy.mesh
    x_pr, y_pr = on_device(strategy, x), on_device(strategy, y)

    # Ours, functional: params and optax state through run; they come back Mirrored.
    def replica_step(params, opt_state, x, y):
        ctx = tps.get_replica_context()
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(ctx.all_reduce("MEAN", grads), opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    @tps.function
    def functional_step(params, opt_state, x, y):
        params, opt_state, loss = strategy.run(replica_step, (params, opt_state, x, y))
        return params, opt_state, strategy.reduce("MEAN", loss, axis=None)

    p0 = init_params(jax.random.PRNGKey(0))
    st = {"f": (p0, tx.init(p0))}

    def ours_functional():
        params, opt_state, loss = functional_step(*st["f"], x_pr, y_pr)
        st["f"] = (params, opt_state)
        return loss

    # Ours, Variables: params and optax state held in tps.Variables.
    with strategy.scope():
        pv = jax.tree.map(tps.Variable, p0)
        sv = jax.tree.map(tps.Variable, tx.init(p0))

    def var_replica_step(x, y):
        p = jax.tree.map(lambda v: v.read_value(), pv)
        s = jax.tree.map(lambda v: v.read_value(), sv)
        loss, grads = jax.value_and_grad(loss_fn)(p, x, y)
        updates, new_s = tx.update(tps.get_replica_context().all_reduce("MEAN", grads), s, p)
        jax.tree.map(lambda v, u: v.assign(u), sv, new_s)
        jax.tree.map(lambda v, u: v.assign(u), pv, optax.apply_updates(p, updates))
        return loss

    @tps.function
    def variables_step(x, y):
        return strategy.reduce("MEAN", strategy.run(var_replica_step, (x, y)), axis=None)

    def ours_variables():
        return variables_step(x_pr, y_pr)

    # Hand-written: replicated params, sharded batch, pmean of the gradients.
    def body(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(jax.lax.pmean(grads, "replica"), opt_state, params)
        return optax.apply_updates(params, updates), opt_state, jax.lax.pmean(loss, "replica")

    hand = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(), P(), P("replica"), P("replica")),
                                 out_specs=(P(), P(), P()), check_vma=False))
    xs = jax.device_put(x, NamedSharding(mesh, P("replica")))
    ys = jax.device_put(y, NamedSharding(mesh, P("replica")))
    st["h"] = jax.device_put((p0, tx.init(p0)), NamedSharding(mesh, P()))
    inflight: collections.deque = collections.deque()

    def hand_step():
        params, opt_state, loss = hand(*st["h"], xs, ys)
        st["h"] = (params, opt_state)
        inflight.append(loss)
        if len(inflight) > 4:
            inflight.popleft().block_until_ready()
        return loss

    def check():  # the three sides computed the same thing
        ref = np.asarray(st["h"][0][0][0])
        np.testing.assert_allclose(np.asarray(st["f"][0][0][0]), ref, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(np.asarray(pv[0][0].read_value()), ref, rtol=1e-4, atol=1e-6)

    del n
    return ours_functional, ours_variables, hand_step, check


def spe_cases(strategy, k, rng):
    """A tiny step; k steps per tps.function call vs one."""
    with strategy.scope():
        w = tps.Variable(jnp.zeros((8, 1)))
    batches = [(on_device(strategy, rng.normal(size=(64, 8)).astype(np.float32)),
                on_device(strategy, rng.normal(size=(64, 1)).astype(np.float32))) for _ in range(k)]

    def step(x, y):
        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w.read_value())
        w.assign_sub(0.01 * tps.get_replica_context().all_reduce("MEAN", g))

    @tps.function
    def train(batches):
        for x, y in batches:
            strategy.run(step, (x, y))
        return w.read_value()

    return (lambda: train(batches)), (lambda: train(batches[:1]))


TF_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import tensorflow as tf
    steps, sizes, gb, lr = int(sys.argv[1]), [64, 512, 512, 10], 1024, 0.01
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 8)
    strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(8)])
    rng = np.random.default_rng(0)
    x = rng.normal(size=(gb, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=gb).astype(np.int32)
    with strategy.scope():
        ws = [tf.Variable((rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32)) for a, b in zip(sizes, sizes[1:])]
        bs = [tf.Variable(np.zeros(b, np.float32)) for b in sizes[1:]]
    n = strategy.num_replicas_in_sync
    xd = strategy.experimental_distribute_values_from_function(lambda c: x[c.replica_id_in_sync_group::n])
    yd = strategy.experimental_distribute_values_from_function(lambda c: y[c.replica_id_in_sync_group::n])
    def replica_step(x, y):
        with tf.GradientTape() as tape:
            h = x
            for i, (w, b) in enumerate(zip(ws, bs)):
                h = h @ w + b
                h = tf.nn.relu(h) if i < len(ws) - 1 else h
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, h))
        grads = tf.distribute.get_replica_context().all_reduce("MEAN", tape.gradient(loss, ws + bs))
        for v, g in zip(ws + bs, grads):
            v.assign_sub(lr * g)
        return loss
    @tf.function
    def train_step(x, y):
        return strategy.reduce("MEAN", strategy.run(replica_step, args=(x, y)), axis=None)
    for _ in range(5):
        train_step(xd, yd).numpy()
    rates = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(steps):
            loss = train_step(xd, yd)
        loss.numpy()
        rates.append(steps / (time.perf_counter() - t0))
    print(json.dumps({"steps_per_s": rates}))
""")


def tf_rates(tf_python, steps):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    proc = subprocess.run([tf_python, "-c", TF_SCRIPT, str(steps)], capture_output=True, text=True,
                          env=env, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"TensorFlow subprocess failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["steps_per_s"]


def paired(ours, base):
    """Median of the per-round ratios: robust to the machine's speed drifting between rounds."""
    return statistics.median(o / b for o, b in zip(ours, base))


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--tf-python", metavar="PATH", help="a python with TensorFlow for row (c)")
    args = p.parse_args()
    strategy = tps.MirroredStrategy()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=GLOBAL_BATCH).astype(np.int32)
    functional, variables, hand, check = mlp_cases(strategy, optax.sgd(LR), x, y)
    iters, rounds = (10, 3) if args.quick else (25, 25)
    for fn in (functional, variables, hand):  # compile and warm up
        _common.timed_loop(fn, 5, wait)
    res = _common.side_by_side({
        "functional": lambda: _common.timed_loop(functional, iters, wait),
        "variables": lambda: _common.timed_loop(variables, iters, wait),
        "hand": lambda: _common.timed_loop(hand, iters, wait),
    }, rounds)
    check()
    rows = [
        _common.row(f"(a) tps.function step, {name}", res[key], res["hand"], "s/step",
                    note=f"vs jit(shard_map)+optax; paired ratio {paired(res[key], res['hand']):.3f}")
        for name, key in (("functional (params through run)", "functional"), ("Variables", "variables"))
    ]
    k = 10
    spe_k, spe_1 = spe_cases(strategy, k, rng)
    for fn in (spe_k, spe_1):
        _common.timed_loop(fn, 3, wait)
    spe_iters = 5 if args.quick else 20
    spe = _common.side_by_side({
        "k": lambda: _common.timed_loop(spe_k, spe_iters, wait) / k,
        "1": lambda: _common.timed_loop(spe_1, spe_iters * k, wait),
    }, rounds)
    rows.append(_common.row(f"(b) steps per execution k={k} vs k=1 (tiny step)", spe["k"], spe["1"],
                            "s/step", note="speed-up per step = 1/ratio"))
    hand_median = statistics.median(res["hand"])
    best = min(("functional", "variables"), key=lambda name: statistics.median(res[name]))
    if args.tf_python:
        tf = tf_rates(args.tf_python, 20 if args.quick else 100)
        ours = [1.0 / t for t in res[best]]
        rows.append(_common.row(f"(c) steps/s: tps.function ({best}) vs TF MirroredStrategy", ours, tf,
                                "steps/s", higher_is_better=True,
                                note=f"TF in a subprocess; hand jit(shard_map) {1 / hand_median:.1f} steps/s"))
    else:
        print("(c) TensorFlow MirroredStrategy: skipped (pass --tf-python PATH)")
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
