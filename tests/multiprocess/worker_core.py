"""Worker of test_core_multi_worker.py: TensorFlow's multi-worker patterns on 2 processes x 4 devices.

Run under ``python -m tpustrategy.launch -n 2 --devices-per-process 4``; prints
one line ``RESULT <json>``.
"""

from __future__ import annotations

import json
import sys

import tpustrategy as tps

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10, collective_timeout=30)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy.data as tpsd  # noqa: E402

strategy = tps.MultiWorkerMirroredStrategy()
pid = jax.process_index()
out: dict = {}

# 1. The README pattern: next(it) inside tps.function, a variable updated by all-reduced gradients.
with strategy.scope():
    w = tps.Variable(jnp.zeros((2, 1)))


def step(x, y):
    loss, g = jax.value_and_grad(lambda w: jnp.mean((x @ w - y) ** 2))(w.read_value())
    w.assign_sub(0.1 * tps.get_replica_context().all_reduce("MEAN", g))
    return loss


@tps.function
def train(it):
    return strategy.reduce("MEAN", strategy.run(step, next(it)), axis=None)


x = np.arange(64, dtype=np.float32).reshape(32, 2) / 32
y = x @ np.array([[1.0], [-1.0]], np.float32)
ds = tpsd.Dataset.from_tensor_slices((x, y)).repeat().batch(16)
it = iter(strategy.experimental_distribute_dataset(ds))
out["readme_losses"] = [float(train(it)) for _ in range(4)]
out["readme_w"] = np.asarray(w.read_value()).ravel().tolist()

# 2. A while loop over get_next_as_optional inside tps.function, with a ragged last step.
dist = strategy.experimental_distribute_dataset(tpsd.Dataset.range(20).map(lambda v: np.float32(v)).batch(8))


@tps.function
def total_of(iterator):
    total = jnp.float32(0)
    while True:
        optional = iterator.get_next_as_optional()
        if not optional.has_value():
            break
        total = total + strategy.reduce("SUM", optional.get_value(), axis=0)
    return total


out["optional_total"] = float(total_of(iter(dist)))


# 3. Uneven data per process (process 1 has less): ragged across processes, inside tps.function.
def per_process(ctx):
    n = 12 if ctx.input_pipeline_id == 0 else 5
    return tpsd.Dataset.range(n).map(lambda v: np.float32(v)).batch(2)


def replica_sum(v):
    return tps.get_replica_context().all_reduce("SUM", jnp.sum(v))


@tps.function
def uneven_step(batch):
    return strategy.reduce("SUM", strategy.run(replica_sum, (batch,)), axis=None) / strategy.num_replicas_in_sync


out["uneven_totals"] = [float(uneven_step(b)) for b in strategy.distribute_datasets_from_function(per_process)]

# 4. gather: every replica's component on every process, along axis 0 and 1.
values = strategy.experimental_distribute_values_from_function(
    lambda ctx: np.full((1, 2), ctx.replica_id_in_sync_group, np.float32))
out["gather0"] = np.asarray(strategy.gather(values, axis=0)).ravel().tolist()
out["gather1_shape"] = list(np.shape(strategy.gather(values, axis=1)))

# 5. A value from experimental_distribute_values_from_function reduced inside tps.function.
reduce_in_function = tps.function(lambda v: strategy.reduce("SUM", v, axis=None))
out["reduce_host_values_in_function"] = np.asarray(reduce_in_function(values)).ravel().tolist()

# 6. A variable created outside scope() and updated in run (TensorFlow: every replica's update).
plain = tps.Variable(0.0)
strategy.run(lambda: plain.assign_add(1.0))
out["plain_after_run"] = float(plain.read_value())

# 7. A written variable's old value the user kept (an array over both processes' devices): the
# step donates a copy of it, and the kept array stays readable.
with strategy.scope():
    counter = tps.Variable(np.zeros(4, np.float32))


def count_step():
    counter.assign_add(np.ones(4, np.float32))
    return counter.read_value()[0]


for _ in range(3):
    strategy.run(count_step)
kept = counter.read_value()
for _ in range(3):
    strategy.run(count_step)
out["kept_value"] = np.asarray(kept.addressable_shards[0].data).tolist()
out["counter_after"] = np.asarray(counter.read_value().addressable_shards[0].data).tolist()

print("RESULT " + json.dumps(out), flush=True)
sys.stdout.flush()
