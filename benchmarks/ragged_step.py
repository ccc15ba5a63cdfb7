"""Ragged steps: per-replica batches of different sizes vs the same step with equal batches.

The step is the ``_mlp.py`` MLP train step (plain SGD written as ``assign_sub`` /
a returned update, gradients all-reduced MEAN), 8 replicas. Ragged: per-replica
batches of [128] * 7 + [100] rows (a short last piece, as a partial last batch
gives); uniform: [128] * 8. Two forms of the step, each given a host-built
``tps.PerReplica``:
  tps.function   Variables style: ``@tps.function`` around ``strategy.run`` and
                 ``strategy.reduce(MEAN, loss)``;
  strategy.run   functional style: params in, new params and per-replica loss out,
                 outside any function.

Rows (seconds, lower is better; ratio = ragged / uniform):
  first call     trace + compile + run of the first call, measured in a fresh
                 subprocess per round (so nothing is cached), ragged and uniform
                 subprocesses alternating; in each the tps.function step is called
                 first, then the strategy.run step. Target <= 3.
  later calls    synchronised calls (each result waited on) after the first, both
                 kinds interleaved in this process. Target <= 2.
Every first call is checked against a single-device reference (the mean over
replicas of each replica's loss and gradient, TensorFlow's rule), and the later
calls' final parameters against the same reference run for as many steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_common.setup_devices(8)

import jax  # noqa: E402
import numpy as np  # noqa: E402
from _mlp import init_params, loss_fn, numpy_value_and_grad  # noqa: E402

import tpustrategy as tps  # noqa: E402

LR = 0.01
SIZES = {"ragged": [128] * 7 + [100], "uniform": [128] * 8}
FORMS = (("function", "tps.function (Variables)"), ("run", "strategy.run (functional)"))


def batches(kind: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    sizes = SIZES[kind]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(sum(sizes), 64)).astype(np.float32)
    y = rng.integers(0, 10, size=sum(sizes)).astype(np.int32)
    cuts = np.cumsum(sizes)[:-1]
    return np.split(x, cuts), np.split(y, cuts)


def make_steps(strategy, kind: str):
    """The two forms of the step for one kind of batch; each returns what the step gives."""
    xs, ys = batches(kind)
    x_pr, y_pr = tps.PerReplica(xs), tps.PerReplica(ys)
    p0 = init_params(0)
    with strategy.scope():
        pv = jax.tree.map(tps.Variable, p0)

    def var_replica_step(x, y):
        loss, grads = jax.value_and_grad(loss_fn)(jax.tree.map(lambda v: v.read_value(), pv), x, y)
        grads = tps.get_replica_context().all_reduce("MEAN", grads)
        jax.tree.map(lambda v, g: v.assign_sub(LR * g), pv, grads)
        return loss

    @tps.function
    def function_step(x, y):
        return strategy.reduce("MEAN", strategy.run(var_replica_step, (x, y)), axis=None)

    def run_replica_step(params, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        grads = tps.get_replica_context().all_reduce("MEAN", grads)
        return jax.tree.map(lambda p, g: p - LR * g, params, grads), loss

    st = {"params": p0}

    def run():
        st["params"], loss = strategy.run(run_replica_step, (st["params"], x_pr, y_pr))
        return st["params"], loss

    steps = {"function": lambda: function_step(x_pr, y_pr), "run": run}
    params = {"function": lambda: jax.tree.map(lambda v: np.asarray(v.read_value()), pv),
              "run": lambda: jax.tree.map(lambda p: np.asarray(strategy.experimental_local_results(p)[0]),
                                          st["params"], is_leaf=lambda v: isinstance(v, tps.DistributedValues))}
    return steps, params, (xs, ys)


def reference(data, params):
    """One step on a single device (float64 NumPy): SGD on the replicas' mean loss and gradient."""
    xs, ys = data
    losses, grads = zip(*(numpy_value_and_grad(params, x, y) for x, y in zip(xs, ys)))
    mean = [tuple(sum(g[i][j] for g in grads) / len(grads) for j in (0, 1)) for i in range(len(params))]
    new = [(w - LR * gw, b - LR * gb) for (w, b), (gw, gb) in zip(params, mean)]
    return new, np.asarray(losses)


def check_step(strategy, kind, name, step, params, data) -> None:
    """One more call of ``step`` agrees with the reference step from the same parameters."""
    before = params[name]()
    out = _common.wait(step())
    want_p, want_losses = reference(data, before)
    if name == "function":
        np.testing.assert_allclose(float(np.asarray(out)), want_losses.mean(), rtol=2e-4)
    else:
        got = np.stack([np.asarray(v) for v in strategy.experimental_local_results(out[1])])
        np.testing.assert_allclose(got, want_losses, rtol=2e-4, err_msg=f"{kind} {name} losses")
    assert_close(params[name](), want_p, f"{kind} {name} params")


def assert_close(got, want, what: str) -> None:
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5, err_msg=what)


def first_call(kind: str) -> None:
    """Subprocess: the first call of each form of the step, timed, then checked."""
    strategy = tps.MirroredStrategy()
    steps, params, data = make_steps(strategy, kind)
    times, outs = {}, {}
    for name in ("function", "run"):
        t0 = time.perf_counter()
        outs[name] = _common.wait(steps[name]())
        times[name] = time.perf_counter() - t0
    want_p, want_losses = reference(data, init_params(0))
    np.testing.assert_allclose(float(np.asarray(outs["function"])), want_losses.mean(), rtol=2e-4)
    got = [np.asarray(v) for v in strategy.experimental_local_results(outs["run"][1])]
    np.testing.assert_allclose(np.stack(got), want_losses, rtol=2e-4)
    for name in ("function", "run"):
        assert_close(params[name](), want_p, f"{kind} {name} params after the first step")
    print(json.dumps(times))


def first_calls(kind: str) -> dict[str, float]:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--first-call", kind],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode:
        raise RuntimeError(f"first-call subprocess ({kind}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--first-call", choices=sorted(SIZES), help=argparse_help())
    args = p.parse_args()
    if args.first_call:
        first_call(args.first_call)
        return
    rounds_first, iters, rounds = (2, 5, 3) if args.quick else (4, 5, 11)
    first = _common.side_by_side({kind: (lambda k=kind: first_calls(k)) for kind in SIZES}, rounds_first)

    strategy = tps.MirroredStrategy()
    made = {kind: make_steps(strategy, kind) for kind in SIZES}
    cases = {(kind, name): step for kind, (steps, _, _) in made.items() for name, step in steps.items()}
    for step in cases.values():  # the first call (compile) and warm-up
        _common.timed_sync(step, 3)
    later = _common.side_by_side({key: (lambda s=s: _common.timed_sync(s, iters)) for key, s in cases.items()},
                                 rounds)
    for kind, (steps, params, data) in made.items():  # the steady-state step is still right
        for name, step in steps.items():
            check_step(strategy, kind, name, step, params, data)

    rows = []
    for name, label in FORMS:
        rows.append(_common.row(
            f"ragged step first call (compile included) vs uniform first call: {label}",
            [r[name] for r in first["ragged"]], [r[name] for r in first["uniform"]], "s",
            note="fresh subprocess per call; target <= 3"))
    for name, label in FORMS:
        rows.append(_common.row(
            f"ragged step later calls vs uniform calls, synchronised: {label}",
            later[("ragged", name)], later[("uniform", name)], "s/step", note="target <= 2"))
    _common.finish(rows, args.json)


def argparse_help() -> str:
    return "internal: time the first calls of one kind of step in this process and print them as JSON"


if __name__ == "__main__":
    main()
