"""Per-call cost on one device: ``strategy.run`` and ``tps.function`` vs plain ``jax.jit``.

The user's alternative on one GPU, one TPU chip or a laptop is plain ``jax.jit`` with the
state donated, so that is the baseline here (not ``jit(shard_map)`` over fake devices).
Both sides do the same work, synchronised (each call's result is waited on before the
next call), interleaved round by round:

- tiny step, k variables (k = 1, 8, 64, 256): an input ``x`` (8 floats, already on the
  device) is added to each of k mirrored variables of 8 floats, and the step returns
  ``sum(x)``. Hand-written: ``jit(lambda state, x: ([v + x for v in state], x.sum()),
  donate_argnums=0)`` with the k arrays kept by the caller.
- MLP train step: 256 -> 256 -> 256 -> 10, batch 64, softmax cross-entropy, SGD; ours
  holds the 6 weights in mirrored variables and all-reduces the gradients (MEAN, one
  replica), hand-written ``jit`` takes and returns the 6 arrays donated.

Rows: µs per call (lower is better), ratio ours / jit with its spread, and the overhead
ours - jit in µs (median of the per-round differences, min..max). Goals (issue 37):
tiny step with 1 or 8 variables <= +5 µs, with 64 <= +10 µs; MLP <= 1.03x. Also the
main thread's CPU time per call (``time.thread_time``), the Python and dispatch work
itself. Runs on whatever device JAX picks (one fake CPU device without an accelerator).
"""

from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_common.setup_devices(1)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy as tps  # noqa: E402

VARIABLE_COUNTS = (1, 8, 64, 256)
GOALS_US = {1: 5, 8: 5, 64: 10}
MLP_SIZES = (256, 256, 256, 10)
MLP_BATCH = 64
MLP_GOAL = 1.03


def tiny_cases(strategy, k: int, device):
    """``(run, function, hand, check)`` of the tiny step with ``k`` variables."""
    x = jax.device_put(np.arange(8, dtype=np.float32), device)
    with strategy.scope():
        variables = [tps.Variable(np.zeros(8, np.float32)) for _ in range(k)]

    def step(x):
        for v in variables:
            v.assign_add(x)
        return jnp.sum(x)

    @tps.function
    def function_step(x):
        return strategy.run(step, (x,))

    hand = jax.jit(lambda state, x: ([v + x for v in state], jnp.sum(x)), donate_argnums=0)
    state = [[jax.device_put(np.zeros(8, np.float32), device) for _ in range(k)]]

    def hand_step():
        state[0], out = hand(state[0], x)
        return out

    def check(calls_ours: int, calls_hand: int) -> None:
        want = np.arange(8, dtype=np.float32)
        for v in variables:
            np.testing.assert_allclose(np.asarray(v.read_value()), want * calls_ours)
        for a in state[0]:
            np.testing.assert_allclose(np.asarray(a), want * calls_hand)

    return (lambda: strategy.run(step, (x,))), (lambda: function_step(x)), hand_step, check


def _mlp_init(seed: int = 0):
    rng = np.random.default_rng(seed)
    return [((rng.normal(size=(a, b)) / np.sqrt(a)).astype(np.float32), np.zeros(b, np.float32))
            for a, b in zip(MLP_SIZES[:-1], MLP_SIZES[1:])]


def _mlp_loss(params, x, y):
    h = x
    for i, (w, b) in enumerate(params):
        h = h @ w + b
        if i < len(params) - 1:
            h = jax.nn.relu(h)
    logp = jax.nn.log_softmax(h)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def mlp_cases(strategy, device):
    """``(run, function, hand, check)`` of one SGD step of the MLP on one batch."""
    rng = np.random.default_rng(1)
    x = jax.device_put(rng.normal(size=(MLP_BATCH, MLP_SIZES[0])).astype(np.float32), device)
    y = jax.device_put(rng.integers(0, MLP_SIZES[-1], size=MLP_BATCH).astype(np.int32), device)
    lr = 0.01
    with strategy.scope():
        params = [(tps.Variable(w), tps.Variable(b)) for w, b in _mlp_init()]

    def step(x, y):
        values = [(w.read_value(), b.read_value()) for w, b in params]
        loss, grads = jax.value_and_grad(_mlp_loss)(values, x, y)
        grads = tps.get_replica_context().all_reduce("MEAN", grads)
        for (w, b), (gw, gb) in zip(params, grads):
            w.assign_sub(lr * gw)
            b.assign_sub(lr * gb)
        return loss

    @tps.function
    def function_step(x, y):
        return strategy.run(step, (x, y))

    def hand_update(values, x, y):
        loss, grads = jax.value_and_grad(_mlp_loss)(values, x, y)
        return jax.tree.map(lambda p, g: p - lr * g, values, grads), loss

    hand = jax.jit(hand_update, donate_argnums=0)
    state = [[(jax.device_put(w, device), jax.device_put(b, device)) for w, b in _mlp_init()]]

    def hand_step():
        state[0], loss = hand(state[0], x, y)
        return loss

    def check(calls_ours: int, calls_hand: int) -> None:
        if calls_ours == calls_hand:  # the same number of SGD steps: the same weights
            for (w, b), (hw, hb) in zip(params, state[0]):
                np.testing.assert_allclose(np.asarray(w.read_value()), np.asarray(hw), rtol=2e-4, atol=2e-5)
                np.testing.assert_allclose(np.asarray(b.read_value()), np.asarray(hb), rtol=2e-4, atol=2e-5)

    return (lambda: strategy.run(step, (x, y))), (lambda: function_step(x, y)), hand_step, check


def thread_cpu(step, iters: int) -> float:
    """The main thread's CPU seconds per call of ``step``, each result waited on."""
    start = time.thread_time()
    for _ in range(iters):
        _common.wait(step())
    return (time.thread_time() - start) / iters


def _count(step, counter):
    def counted():
        counter[0] += 1
        return step()
    return counted


def measure(name: str, cases, iters: int, rounds: int, goal_us: float | None = None,
            goal_ratio: float | None = None) -> list[dict]:
    run, function, hand, check = cases
    ours_calls, hand_calls = [0], [0]
    run, function = _count(run, ours_calls), _count(function, ours_calls)
    hand = _count(hand, hand_calls)
    for step in (run, function, hand):  # compile and warm up
        _common.timed_sync(step, 5)
    steps = {"run": run, "function": function, "hand": hand}
    wall = _common.side_by_side(
        {key: (lambda s=s: _common.timed_sync(s, iters) * 1e6) for key, s in steps.items()}, rounds)
    cpu = _common.side_by_side(
        {key: (lambda s=s: thread_cpu(s, iters) * 1e6) for key, s in steps.items()}, rounds)
    check(ours_calls[0], hand_calls[0])
    rows = []
    for key, label in (("run", "strategy.run"), ("function", "tps.function")):
        diff = [o - h for o, h in zip(wall[key], wall["hand"])]
        goal = (f"; goal <= +{goal_us:g} µs" if goal_us is not None else "") + \
               (f"; goal <= {goal_ratio:g}x" if goal_ratio is not None else "")
        rows.append(_common.row(
            f"one device, {name}: {label} vs jax.jit (donated state), synchronised",
            wall[key], wall["hand"], "µs/call",
            note=f"overhead {statistics.median(diff):+.1f} µs/call [{min(diff):+.1f}..{max(diff):+.1f}]{goal}"))
        diff = [o - h for o, h in zip(cpu[key], cpu["hand"])]
        rows.append(_common.row(
            f"one device, {name}: {label} vs jax.jit, main-thread CPU per call",
            cpu[key], cpu["hand"], "µs CPU/call", note=f"extra CPU {statistics.median(diff):+.1f} µs/call"))
    return rows


def main() -> None:
    p = _common.parser(__doc__.splitlines()[0])
    p.add_argument("--counts", default=",".join(map(str, VARIABLE_COUNTS)),
                   help="variable counts of the tiny step (comma-separated)")
    p.add_argument("--rounds", type=int, default=15, help="interleaved rounds per row (default 15)")
    args = p.parse_args()
    device = jax.devices()[0]
    strategy = tps.OneDeviceStrategy(device)
    iters, rounds = (20, 3) if args.quick else (300, args.rounds)
    rows = []
    for k in (int(c) for c in args.counts.split(",") if c):
        rows += measure(f"tiny step with an input and {k} variable{'s' * (k != 1)}",
                        tiny_cases(strategy, k, device), iters, rounds, goal_us=GOALS_US.get(k))
    mlp_iters = 10 if args.quick else 100
    rows += measure(f"MLP {'-'.join(map(str, MLP_SIZES))} train step, batch {MLP_BATCH}",
                    mlp_cases(strategy, device), mlp_iters, rounds, goal_ratio=MLP_GOAL)
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
