"""TensorFlow's format written by 2 processes: one data shard each, one index (test_tf_format_sharded.py).

Usage (under the launcher): ``worker_tf_sharded.py DIR``. A
``CheckpointManager(..., max_to_keep=2, format="tensorflow")`` saves three
times into ``DIR/managed`` (values made from the save's number), then every
process restores the latest into fresh variables; ``Checkpoint.write(DIR/plain,
format="tensorflow")`` writes once more. Prints one ``RESULT`` line per process.
"""

from __future__ import annotations

import json
import os
import sys

import tpustrategy as tps

tps.initialize(initialization_timeout=60, heartbeat_timeout=20, shutdown_timeout=20, collective_timeout=60)

import numpy as np  # noqa: E402

directory = sys.argv[1]
strategy = tps.MultiWorkerMirroredStrategy()
with strategy.scope():
    w = tps.Variable(np.zeros((4, 3), np.float32))
    b = tps.Variable(np.zeros(5, np.float32))
    step = tps.Variable(np.int32(0))
ckpt = tps.train.Checkpoint(model={"w": w, "b": b}, step=step)
manager = tps.train.CheckpointManager(ckpt, os.path.join(directory, "managed"), max_to_keep=2, format="tensorflow")
result: dict = {"saved": []}
for i in range(1, 4):
    w.assign(np.arange(12, dtype=np.float32).reshape(4, 3) * i)
    b.assign(np.full(5, -i, np.float32))
    step.assign(np.int32(i))
    result["saved"].append(manager.save())
with strategy.scope():
    w2 = tps.Variable(np.zeros((4, 3), np.float32))
    b2 = tps.Variable(np.zeros(5, np.float32))
    step2 = tps.Variable(np.int32(0))
fresh = tps.train.Checkpoint(model={"w": w2, "b": b2}, step=step2)
latest = tps.train.latest_checkpoint(os.path.join(directory, "managed"))
fresh.restore(latest).assert_consumed()
result["latest"] = latest
result["restored"] = [np.asarray(w2.numpy()).tolist(), np.asarray(b2.numpy()).tolist(), int(step2.numpy()),
                      fresh.save_counter]
result["plain"] = ckpt.write(os.path.join(directory, "plain"), format="tensorflow")
print("RESULT " + json.dumps(result), flush=True)
