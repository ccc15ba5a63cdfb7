"""A small training job for the resume and preemption tests (one process or under the launcher).

Usage: ``worker_train.py MODE DIR STEPS [STOP]`` with MODE

- ``straight``: train STEPS steps.
- ``first``: train STOP steps, save with a CheckpointManager, stop.
- ``resume``: restore the latest checkpoint in DIR (a new process), train up to STEPS.
- ``preempt``: train under a PreemptionCheckpointHandler until STEPS run calls;
  sleeps a little each step so a SIGTERM sent from outside lands mid-training.

Each step prints ``STEP <i> <loss>``; at the end (also when the handler exits)
one ``RESULT <json>`` line: the losses by step, the process index, the step
the job started from, and the exit code. Losses are Python floats (exact).
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

import tpustrategy as tps
import tpustrategy.data as tpsd

MULTI = "TPS_NUM_PROCESSES" in os.environ
if MULTI:
    tps.initialize(initialization_timeout=60, heartbeat_timeout=20, shutdown_timeout=20,
                   collective_timeout=60)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

mode, directory, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
stop = int(sys.argv[4]) if len(sys.argv) > 4 else steps

strategy = tps.MultiWorkerMirroredStrategy() if MULTI else tps.MirroredStrategy()
rng = np.random.default_rng(0)
x = rng.normal(size=(384, 8)).astype(np.float32)
y = (x @ rng.normal(size=(8, 1)) + 0.1 * rng.normal(size=(384, 1))).astype(np.float32)
options = tpsd.Options()
options.experimental_distribute.auto_shard_policy = tpsd.AutoShardPolicy.DATA
dataset = (tpsd.Dataset.from_tensor_slices((x, y)).shuffle(100, seed=3).batch(32, drop_remainder=True)
           .repeat().with_options(options))
iterator = iter(strategy.experimental_distribute_dataset(dataset))
optimizer = optax.adam(1e-2)


def as_variables(tree):
    return jax.tree_util.tree_map(tps.Variable, tree)


with strategy.scope():
    init = {"w": 0.1 * jnp.ones((8, 16)), "b": jnp.zeros(16), "v": 0.1 * jnp.ones((16, 1))}
    params = as_variables(init)
    opt_state = as_variables(optimizer.init(init))


def is_var(v):
    return isinstance(v, tps.Variable)


def read(tree):
    return jax.tree_util.tree_map(lambda v: v.read_value(), tree, is_leaf=is_var)


def assign(tree, values):
    for var, value in zip(jax.tree_util.tree_leaves(tree, is_leaf=is_var), jax.tree_util.tree_leaves(values)):
        var.assign(value)


def loss_fn(p, xb, yb):
    h = jnp.tanh(xb @ p["w"] + p["b"])
    return jnp.mean((h @ p["v"] - yb) ** 2)


def replica_step(xb, yb):
    ctx = tps.get_replica_context()
    p = read(params)
    loss, grads = jax.value_and_grad(loss_fn)(p, xb, yb)
    grads = ctx.all_reduce("MEAN", grads)
    updates, new_state = optimizer.update(grads, read(opt_state), p)
    assign(params, optax.apply_updates(p, updates))
    assign(opt_state, new_state)
    return loss


@tps.function
def train_step(it):
    xb, yb = next(it)
    return strategy.reduce("MEAN", strategy.run(replica_step, (xb, yb)), axis=None)


checkpoint = tps.train.Checkpoint(params=params, opt_state=opt_state, iterator=iterator, step=0)
manager = tps.train.CheckpointManager(checkpoint, directory, max_to_keep=2)
losses: dict[int, float] = {}
result = {"process_index": jax.process_index(), "pid": os.getpid()}


def one_step(i):
    loss = float(np.asarray(train_step(iterator)))
    losses[i] = loss
    print(f"STEP {i} {loss!r}", flush=True)
    return loss


def report(**extra):
    print("RESULT " + json.dumps({**result, **extra, "losses": losses}), flush=True)
    iterator.close()  # stops the input thread before the interpreter exits


if mode == "straight":
    for i in range(steps):
        one_step(i)
    report(start=0)
elif mode == "first":
    for i in range(stop):
        one_step(i)
        checkpoint.step = i + 1
    path = manager.save(checkpoint_number=stop)
    report(start=0, saved=path)
elif mode == "resume":
    restored = manager.restore_or_initialize()
    start = checkpoint.step
    for i in range(start, steps):
        one_step(i)
    report(start=start, restored=restored)
elif mode == "preempt":
    handler = tps.experimental.PreemptionCheckpointHandler(None, checkpoint, directory)
    start = handler.total_run_calls
    print(f"PID {os.getpid()} START {start}", flush=True)
    try:
        while handler.total_run_calls < steps:
            handler.run(one_step, handler.total_run_calls)
            time.sleep(0.05)
    except SystemExit as e:
        report(start=start, exit=e.code, saved_at=handler.total_run_calls,
               latest=tps.train.latest_checkpoint(directory))
        raise
    report(start=start, exit=0)
else:
    raise SystemExit(f"unknown mode {mode}")
