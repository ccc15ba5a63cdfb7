"""Input overlap on 2 processes x 4 devices: a train step fed by the distributed iterator vs device-resident batches.

The job runs under ``python -m tpustrategy.launch -n 2 --devices-per-process 4``.
Each process's pipeline (``from_tensor_slices -> repeat -> batch(1024) -> map``,
the map doing host work like parsing) goes through
``experimental_distribute_dataset``: the processes agree on every step (end of
data, piece sizes) through the coordination service and copy the step to the
devices on the prefetch thread, while the previous step computes. The step is
one ``tps.function`` (MLP 64 -> 512 -> 512 -> 10, optax-free SGD on
Variables, all-reduce across both processes), timed pipelined (the result from
4 calls back is waited on), side by side with the same step on one fixed batch
already on the devices. ratio = pipeline-fed / device-resident s/step, lower is
better (target <= 1.10). Each process reports its own rounds; both rows appear.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _common  # noqa: E402

WORKER = "--worker"


def worker(rounds: int, iters: int) -> None:
    import tpustrategy as tps

    tps.initialize(initialization_timeout=120, heartbeat_timeout=60)
    import jax
    import numpy as np
    from _mlp import GLOBAL_BATCH, init_params, loss_fn

    import tpustrategy.data as tpsd

    strategy = tps.MultiWorkerMirroredStrategy()
    rng = np.random.default_rng(jax.process_index())
    x = rng.normal(size=(GLOBAL_BATCH * 8, 64)).astype(np.float32)
    y = rng.integers(0, 10, size=GLOBAL_BATCH * 8).astype(np.int32)
    with strategy.scope():
        params = jax.tree.map(tps.Variable, init_params(0))

    def step(xb, yb):
        p = jax.tree.map(lambda v: v.read_value(), params)
        loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)
        grads = tps.get_replica_context().all_reduce("MEAN", grads)
        jax.tree.map(lambda v, g: v.assign_sub(0.01 * g), params, grads)
        return loss

    def parse(a, b):  # host work per batch, like parsing records
        return np.tanh(a) * np.float32(1.0001), b

    ds = tpsd.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH).map(parse)
    it = iter(strategy.experimental_distribute_dataset(ds))
    fixed = next(it)
    fed = tps.function(lambda iterator: strategy.reduce("MEAN", strategy.run(step, next(iterator)), axis=None))
    resident = tps.function(lambda batch: strategy.reduce("MEAN", strategy.run(step, batch), axis=None))
    for _ in range(3):
        _common.wait(fed(it))
        _common.wait(resident(fixed))
    results = _common.side_by_side({
        "fed": lambda: _common.timed_pipelined(lambda: fed(it), iters),
        "resident": lambda: _common.timed_pipelined(lambda: resident(fixed), iters),
    }, rounds)
    it.close()
    print("RESULT " + json.dumps(results), flush=True)


def main() -> None:
    if WORKER in sys.argv:
        quick = "--quick" in sys.argv
        worker(rounds=3 if quick else 9, iters=8 if quick else 16)
        return
    args = _common.parser(__doc__.splitlines()[0]).parse_args()
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and k != "XLA_FLAGS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.dirname(HERE), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "tpustrategy.launch", "-n", "2", "--devices-per-process", "4", "--timeout", "360",
           os.path.abspath(__file__), WORKER] + (["--quick"] if args.quick else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"the 2-process job failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}{proc.stdout[-2000:]}")
    rows = []
    for line in proc.stdout.splitlines():
        prefix, _, rest = line.partition(" ")
        if rest.startswith("RESULT "):
            res = json.loads(rest[len("RESULT "):])
            rows.append(_common.row(
                f"2 processes: pipeline-fed vs device-resident train step, process {prefix.strip('[p]')}",
                res["fed"], res["resident"], "s/step",
                note="tps.function + next(iterator), pipelined; agreement + device copy on the prefetch thread; "
                     "target <= 1.10"))
    if len(rows) != 2:
        raise RuntimeError(f"expected a RESULT line from each process; got:\n{proc.stdout[-3000:]}")
    _common.finish(sorted(rows, key=lambda r: r["name"]), args.json)


if __name__ == "__main__":
    main()
