"""Worker of test_multi_worker.py: a TFRecord dataset auto-sharded by FILE across processes.

Usage: ``worker_dataset.py DIR GLOBAL_BATCH`` under the launcher; reads
``DIR/*.tfrecord`` (records are decimal ints) and prints ``RESULT <json>``
with the values this process's replicas saw at each step.
"""

from __future__ import annotations

import json
import pathlib
import sys
import warnings

import numpy as np

import tpustrategy as tps
import tpustrategy.data as tpsd

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10,
               collective_timeout=30)

import jax  # noqa: E402

directory, global_batch = pathlib.Path(sys.argv[1]), int(sys.argv[2])
files = sorted(str(p) for p in directory.glob("*.tfrecord"))
strategy = tps.MultiWorkerMirroredStrategy()
dataset = tpsd.TFRecordDataset(files).map(lambda r: np.int64(int(r))).batch(global_batch)
options = tpsd.Options()
options.experimental_distribute.auto_shard_policy = tpsd.AutoShardPolicy.AUTO
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    dist = strategy.experimental_distribute_dataset(dataset.with_options(options))
steps = []
for batch in dist:
    steps.append([np.asarray(v).tolist() for v in strategy.experimental_local_results(batch)])
decision = getattr(dist, "auto_shard_decision", None)
print("RESULT " + json.dumps({
    "process_index": jax.process_index(),
    "steps": steps,
    "decision": str(decision() if callable(decision) else decision),
    "warnings": [str(w.message) for w in caught],
}), flush=True)
