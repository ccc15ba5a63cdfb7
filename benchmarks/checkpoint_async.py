"""Checkpointing cost per training step: asynchronous saves vs none vs synchronous saves.

A training step (an MLP layer's forward/backward and an SGD update of
mirrored ``tps.Variable``s holding about 4 MiB, 8 replicas) runs ``STEPS``
times; every ``EVERY`` steps a ``CheckpointManager`` saves (``max_to_keep=2``):

  async vs no saves      ``manager.save(options=CheckpointOptions(enable_async=True))``:
                         the step waits only for the device-to-host copy; the files are
                         written in the background (ratio: the time per step with
                         async saves / without saves; goal: close to 1)
  async vs synchronous   the same loop with synchronous saves as the baseline (ratio < 1:
                         the async save's saving per step)
  time in save()         ms the training loop is blocked inside ``manager.save`` per
                         save, async vs synchronous (the same loops' saves): what the
                         per-step rows spread over ``EVERY`` steps, without the steps'
                         own noise

Rows are ms per step or per save (lower is better), all sides interleaved round by
round; each loop ends with ``manager.sync()`` inside the clock (every save is on
disk). The state is 4 MiB so the script ends in well under a minute on a small
machine: a step of the 64 MiB state this script used to time costs ~0.5 s on 8
fake CPU devices (its all-reduce), and 750 of them took over five minutes.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

_common.setup_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy as tps  # noqa: E402

EVERY = 10
WIDTH = 1024  # a width x width float32 weight: 4 MiB
PER_REPLICA = 16  # examples per replica per step


def build(width: int):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        w = tps.Variable(np.random.default_rng(0).normal(size=(width, width)).astype(np.float32) * 0.01)
        b = tps.Variable(np.zeros(width, np.float32))
    x = np.random.default_rng(1).normal(size=(8 * PER_REPLICA, width)).astype(np.float32)
    dist = strategy.experimental_distribute_values_from_function(
        lambda ctx: x[ctx.replica_id_in_sync_group * PER_REPLICA:(ctx.replica_id_in_sync_group + 1) * PER_REPLICA])

    def replica_step(xb):
        def loss(wv, bv):
            return jnp.mean(jnp.tanh(xb @ wv + bv) ** 2)

        gw, gb = jax.grad(loss, argnums=(0, 1))(w.read_value(), b.read_value())
        ctx = tps.get_replica_context()
        gw, gb = ctx.all_reduce("MEAN", gw), ctx.all_reduce("MEAN", gb)
        w.assign_sub(0.1 * gw)
        b.assign_sub(0.1 * gb)
        return loss(w.read_value(), b.read_value())

    @tps.function
    def step(values):
        return strategy.run(replica_step, (values,))

    return tps.train.Checkpoint(w=w, b=b), lambda: step(dist)


def loop(ckpt, step, steps: int, mode: str, blocked: list[float] | None = None) -> float:
    """Milliseconds per step of ``steps`` steps, saving every EVERY steps per ``mode``.

    ``blocked`` (if given) gets the median ms spent inside one ``manager.save`` call.
    """
    directory = tempfile.mkdtemp(prefix="tps-bench-ckpt-")
    try:
        manager = tps.train.CheckpointManager(ckpt, directory, max_to_keep=2)
        options = tps.train.CheckpointOptions(enable_async=True) if mode == "async" else None
        in_save = []
        start = time.perf_counter()
        for i in range(1, steps + 1):
            _common.wait(step())
            if mode != "none" and i % EVERY == 0:
                t0 = time.perf_counter()
                manager.save(options=options)
                in_save.append(time.perf_counter() - t0)
        manager.sync()
        elapsed = time.perf_counter() - start
        if blocked is not None and in_save:
            blocked.append(statistics.median(in_save) * 1e3)
        return elapsed * 1e3 / steps
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    args = _common.parser(__doc__.splitlines()[0]).parse_args()
    steps, rounds = (2 * EVERY, 2) if args.quick else (3 * EVERY, 7)
    ckpt, step = build(WIDTH)
    for mode in ("sync", "async", "sync", "async"):  # compile (fingerprints, copies) and warm the file system
        loop(ckpt, step, EVERY, mode)
    blocked: dict[str, list[float]] = {"async": [], "sync": []}
    res = _common.side_by_side({mode: (lambda m=mode: loop(ckpt, step, steps, m, blocked.get(m)))
                                for mode in ("none", "async", "sync")}, rounds)
    size = f"{WIDTH * WIDTH * 4 / 2**20:.0f} MiB of weights, a save every {EVERY} steps"
    rows = [
        _common.row(f"training step with async saves vs no saves ({size})", res["async"], res["none"],
                    "ms/step", note="goal: ratio close to 1"),
        _common.row(f"training step with async saves vs synchronous saves ({size})", res["async"],
                    res["sync"], "ms/step", note="ratio < 1: time the async save gives back"),
        _common.row(f"time blocked in manager.save(): async vs synchronous ({size})", blocked["async"],
                    blocked["sync"], "ms/save", note="median per loop; async: the device-to-host copy"),
    ]
    _common.finish(rows, args.json)


if __name__ == "__main__":
    main()
