"""Worker of test_core_multi_worker.py: uneven input across processes, 20 epochs in a row.

Each epoch, process 0's pipeline has more data than process 1's, so the last
steps are ragged across processes (and some are empty on process 1). Every
step runs compiled; prints ``RESULT {"epochs": [...totals...]}``.
"""

from __future__ import annotations

import json

import tpustrategy as tps

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10, collective_timeout=30)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy.data as tpsd  # noqa: E402

strategy = tps.MultiWorkerMirroredStrategy()


def per_process(ctx):
    n = 9 if ctx.input_pipeline_id == 0 else 3
    return tpsd.Dataset.range(n).map(lambda v: np.ones(8, np.float32) * v).batch(2)


def replica_step(x):
    return tps.get_replica_context().all_reduce("SUM", jnp.sum(x))


@tps.function
def compiled_step(x):
    return strategy.reduce("SUM", x, axis=0).sum()


totals = []
for _ in range(20):
    total = 0.0
    for batch in strategy.distribute_datasets_from_function(per_process):
        total += float(strategy.reduce("MEAN", strategy.run(replica_step, (batch,)), axis=None))
        total += float(compiled_step(batch))
    totals.append(total)
print("RESULT " + json.dumps({"epochs": totals}), flush=True)
