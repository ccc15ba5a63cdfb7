"""MLP train step: strategy.run and tps.function vs the same step hand-written in JAX; TensorFlow.

Model: ``_mlp.py`` (64 -> 512 -> 512 -> 10, softmax cross-entropy), 8 replicas,
global batch 1024 (128 per replica), optax SGD with the gradients all-reduced
(MEAN). Every side gets the same batch every step: ours as a host-built
``tps.PerReplica`` passed again each step (the library keeps its device copy), the
hand-written side as arrays already sharded over the devices. The baseline is
``jax.jit(jax.shard_map(body, ..., check_vma=False))`` + optax, returning the same
form as ours (per-replica losses for ``run``, the reduced loss for ``tps.function``).

Rows (seconds per step, lower is better; ratio = ours / hand-written):
  run, synchronised             ``strategy.run(replica_step, (params, opt_state, x, y))``
                                outside any function; params come back Mirrored.
                                Every step's result is waited on before the next
                                call (a loop that logs the loss). Target <= 1.10.
  tps.function (Variables), sync    params and optax state in ``tps.Variable``s; the
                                function returns ``strategy.reduce(MEAN, loss)``.
                                Target <= 1.05.
  tps.function (functional), sync   params and optax state through ``run``, returned
                                by the function. Target <= 1.05.
  the same three, pipelined     the result from 4 calls back is waited on (at most
                                5 programs in flight on both sides; XLA's CPU
                                collectives lock up with dozens queued), 16 calls
                                per round so most are timed in the steady state.
  small MLP 64-256-10: ...      the six rows again for a 64 -> 256 -> 10 model (a few ms
                                a step), where a fixed per-call cost weighs about ten
                                times more. Target <= 1.03 for every row.
  steps/s vs TensorFlow         (``--tf-python PATH``, a Python with TensorFlow) TF's
                                MirroredStrategy custom loop on 8 logical CPUs,
                                ``tf.function`` + ``strategy.run``, the loss read
                                every step; vs our Variables step, synchronised.
                                Higher is better. TF runs in a subprocess after
                                ours (not interleaved). Without a TF Python the row
                                says "skipped".

All sides are interleaved round by round in one process; at the end the parameters
of every side must agree (same number of steps, same updates).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_common.setup_devices(8)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from _mlp import GLOBAL_BATCH, SIZES, init_params, loss_fn  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import tpustrategy as tps  # noqa: E402

LR = 0.01
ROWS = [  # (key, row name, hand-written key, target)
    ("run", "strategy.run MLP step vs jit(shard_map)+optax", "hand_run", 1.10),
    ("variables", "tps.function MLP step (Variables) vs jit(shard_map)+optax", "hand_fn", 1.05),
    ("functional", "tps.function MLP step (functional) vs jit(shard_map)+optax", "hand_fn", 1.05),
]
TF_ROW = "steps/s: tps.function (Variables) vs TF MirroredStrategy, synchronised"
# (row prefix, layer sizes, target for every row or None for ROWS' own): the model of _mlp.py
# (~40 ms a step here) and a small one (~4 ms), where a fixed per-call cost weighs ten times more
# (issue 26's goal: <= 1.03 through strategy.run and tps.function alike).
MODELS = [("", SIZES, None), ("small MLP 64-256-10: ", [64, 256, 10], 1.03)]


def planned_rows() -> list[str]:
    return [f"{prefix}{name}, {mode}" for prefix, _, _ in MODELS for mode in ("synchronised", "pipelined")
            for _, name, _, _ in ROWS] + [TF_ROW]


def cases(strategy, optax, x, y, sizes=SIZES):
    """Step callables (each returns what the step gives the user) and a final check."""
    tx = optax.sgd(LR)
    n, mesh = strategy.num_replicas_in_sync, strategy.mesh
    x_pr, y_pr = tps.PerReplica(list(np.split(x, n))), tps.PerReplica(list(np.split(y, n)))
    p0 = init_params(0, sizes)
    st = {}

    def replica_step(params, opt_state, x, y):
        ctx = tps.get_replica_context()
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(ctx.all_reduce("MEAN", grads), opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    # strategy.run: functional state through run, per-replica loss out.
    st["run"] = (p0, tx.init(p0))

    def run():
        params, opt_state, loss = strategy.run(replica_step, (*st["run"], x_pr, y_pr))
        st["run"] = (params, opt_state)
        strategy.experimental_local_results(loss)  # a loop that logs the loss reads it every step
        return params, opt_state, loss

    # tps.function, functional.
    @tps.function
    def functional_step(params, opt_state, x, y):
        params, opt_state, loss = strategy.run(replica_step, (params, opt_state, x, y))
        return params, opt_state, strategy.reduce("MEAN", loss, axis=None)

    st["functional"] = (p0, tx.init(p0))

    def functional():
        params, opt_state, loss = functional_step(*st["functional"], x_pr, y_pr)
        st["functional"] = (params, opt_state)
        return params, opt_state, loss

    # tps.function, Variables.
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

    def variables():
        return variables_step(x_pr, y_pr)

    # Hand-written: replicated params, sharded batch, pmean of the gradients.
    def body(params, opt_state, x, y, reduce_loss):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(jax.lax.pmean(grads, "replica"), opt_state, params)
        loss = jax.lax.pmean(loss, "replica") if reduce_loss else loss[None]
        return optax.apply_updates(params, updates), opt_state, loss

    def hand_program(reduce_loss):
        return jax.jit(jax.shard_map(
            lambda *a: body(*a, reduce_loss), mesh=mesh,
            in_specs=(P(), P(), P("replica"), P("replica")),
            out_specs=(P(), P(), P() if reduce_loss else P("replica")), check_vma=False))

    xs = jax.device_put(x, NamedSharding(mesh, P("replica")))
    ys = jax.device_put(y, NamedSharding(mesh, P("replica")))

    def hand(key, program):
        st[key] = jax.device_put((p0, tx.init(p0)), NamedSharding(mesh, P()))

        def step():
            params, opt_state, loss = program(*st[key], xs, ys)
            st[key] = (params, opt_state)
            [shard.data for shard in loss.addressable_shards]  # its per-device losses, as ours
            return params, opt_state, loss
        return step

    steps = {"run": run, "variables": variables, "functional": functional,
             "hand_run": hand("hand_run", hand_program(False)),
             "hand_fn": hand("hand_fn", hand_program(True))}
    last = {}

    def counted(name):
        def step():
            last[name] = out = steps[name]()
            return out
        return step

    def check():
        """Every side took the same steps: equal parameters and equal last losses."""
        ref = np.asarray(st["hand_fn"][0][0][0])
        got = {"hand_run": st["hand_run"][0][0][0], "run": st["run"][0][0][0],
               "functional": st["functional"][0][0][0], "variables": pv[0][0].read_value()}
        for name, w in got.items():
            np.testing.assert_allclose(np.asarray(w), ref, rtol=2e-4, atol=1e-5, err_msg=name)
        loss = float(np.asarray(last["hand_fn"][2]))
        per_replica = {"run": np.stack([np.asarray(v) for v in strategy.experimental_local_results(last["run"][2])]),
                       "hand_run": np.asarray(last["hand_run"][2])}
        for name, v in per_replica.items():
            np.testing.assert_allclose(v.mean(), loss, rtol=2e-4, err_msg=name)
        for name, v in (("functional", last["functional"][2]), ("variables", last["variables"])):
            np.testing.assert_allclose(float(np.asarray(v)), loss, rtol=2e-4, err_msg=name)

    return {name: counted(name) for name in steps}, check


TF_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    import tensorflow as tf
    steps, rounds, sizes, gb, lr = int(sys.argv[1]), int(sys.argv[2]), [64, 512, 512, 10], 1024, 0.01
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
    per = gb // n
    xd = strategy.experimental_distribute_values_from_function(lambda c: x[c.replica_id_in_sync_group * per:(c.replica_id_in_sync_group + 1) * per])
    yd = strategy.experimental_distribute_values_from_function(lambda c: y[c.replica_id_in_sync_group * per:(c.replica_id_in_sync_group + 1) * per])
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
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(steps):
            train_step(xd, yd).numpy()  # synchronised: the loss is read every step
        rates.append(steps / (time.perf_counter() - t0))
    print(json.dumps({"steps_per_s": rates}))
""")


def tf_rates(tf_python: str, steps: int, rounds: int) -> list[float]:
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    proc = subprocess.run([tf_python, "-c", TF_SCRIPT, str(steps), str(rounds)], capture_output=True,
                          text=True, env=env, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"TensorFlow subprocess ({tf_python}) failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["steps_per_s"]


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--tf-python", metavar="PATH", help="a Python with TensorFlow, for the TensorFlow row")
    args = p.parse_args()
    optax, missing = _common.optional_module("optax")
    if optax is None:
        _common.skip_all(planned_rows(), missing, args.json)
    strategy = tps.MirroredStrategy()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=GLOBAL_BATCH).astype(np.int32)
    rows = []
    results = {}
    for prefix, sizes, model_target in MODELS:
        steps, check = cases(strategy, optax, x, y, sizes)
        # (iterations per round, rounds): synchronised rounds are short (finer pairing under
        # the machine's load bursts); pipelined rounds run several times the pipeline depth
        # so that most calls are timed in the steady state, not filling or draining it.
        plan = {"synchronised": (5, 3) if args.quick else (4, 31),
                "pipelined": (8, 3) if args.quick else (4 * _common.PIPELINE_DEPTH, 13)}
        for step in steps.values():  # compile and warm up
            _common.timed_sync(step, 3)
        for mode, timed in (("synchronised", _common.timed_sync), ("pipelined", _common.timed_pipelined)):
            iters, rounds = plan[mode]
            res = _common.side_by_side(
                {name: (lambda s=s, timed=timed, iters=iters: timed(s, iters)) for name, s in steps.items()},
                rounds)
            if not prefix:
                results[mode] = res
            for key, name, hand, target in ROWS:
                rows.append(_common.row(f"{prefix}{name}, {mode}", res[key], res[hand], "s/step",
                                        note=f"target <= {model_target or target:.2f}"))
        check()
    if args.tf_python:
        tf = tf_rates(args.tf_python, 10 if args.quick else 30, 3 if args.quick else 7)
        ours = [1.0 / t for t in results["synchronised"]["variables"]]
        rows.append(_common.row(TF_ROW, ours, tf, "steps/s", higher_is_better=True, interleaved=False,
                                note="TF in a subprocess after ours"))
    else:
        rows.append(_common.skipped_row(TF_ROW, "no TensorFlow Python: pass --tf-python PATH", "steps/s"))
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
