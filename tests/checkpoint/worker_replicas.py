"""Restores, on this process's devices, what test_resume.py saved with 8 replicas.

Usage: ``worker_replicas.py CHECKPOINT NONE_CHECKPOINT``; prints ``RESULT <json>``.
"""

from __future__ import annotations

import json
import sys

import jax
import numpy as np

import tpustrategy as tps
import tpustrategy.data as tpsd

path, none_path = sys.argv[1], sys.argv[2]
strategy = tps.MirroredStrategy()
ON_READ, Agg = tps.VariableSynchronization.ON_READ, tps.VariableAggregation
with strategy.scope():
    w = tps.Variable(np.zeros(3, np.float32))
    total = tps.Variable(0.0, synchronization=ON_READ, aggregation=Agg.SUM)
    mean = tps.Variable(0.0, synchronization=ON_READ, aggregation=Agg.MEAN)
    first = tps.Variable(0.0, synchronization=ON_READ, aggregation=Agg.ONLY_FIRST_REPLICA)
    none = tps.Variable(0.0, synchronization=ON_READ, aggregation=Agg.NONE)
iterator = iter(strategy.experimental_distribute_dataset(tpsd.Dataset.range(64).batch(8)))
tps.train.Checkpoint(w=w, total=total, mean=mean, first=first, iterator=iterator).restore(path).assert_consumed()
try:
    tps.train.Checkpoint(none=none).restore(none_path)
    none_error = None
except ValueError as e:
    none_error = str(e)


def components(v):
    return [float(np.asarray(c)) for c in strategy.experimental_local_results(v)]


print("RESULT " + json.dumps({
    "replicas": strategy.num_replicas_in_sync,
    "w": w.numpy().tolist(),
    "w_devices": sorted(d.id for d in w.read_value().sharding.device_set),
    "total": float(total.numpy()), "total_components": components(total),
    "mean": float(mean.numpy()), "mean_components": components(mean),
    "first": float(first.numpy()),
    "next_batch": [int(x) for part in strategy.experimental_local_results(next(iterator))
                   for x in np.asarray(part)],
    "none_error": none_error,
    "devices": len(jax.devices()),
}), flush=True)
iterator.close()  # stops the input thread before the interpreter exits
