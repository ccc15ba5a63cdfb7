"""TensorFlow's multi-worker checkpoint pattern on 2 processes (test_multiworker_paths.py).

Usage (under the launcher): ``worker_multiworker_paths.py DIR``. Follows the
multi-worker tutorial: the chief saves into ``DIR/ckpt``, each other worker
into ``DIR/ckpt/workertemp_<id>`` (``write_filepath``), which it deletes after
each save; then every process restores ``latest_checkpoint(DIR/ckpt)``. Then
an asynchronous save of both processes into one folder while training goes
on, and a save whose checkpoint names differ between the processes. Prints
one ``RESULT`` line per process.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import tpustrategy as tps

tps.initialize(initialization_timeout=60, heartbeat_timeout=20, shutdown_timeout=20, collective_timeout=60)

import numpy as np  # noqa: E402

directory = sys.argv[1]
strategy = tps.MultiWorkerMirroredStrategy()
resolver = strategy.cluster_resolver
task_type, task_id = resolver.task_type, resolver.task_id
with strategy.scope():
    w = tps.Variable(np.zeros(8, np.float32))
    step = tps.Variable(0)


def _is_chief(task_type, task_id):
    return task_type is None or task_type == "chief" or (task_type == "worker" and task_id == 0)


def write_filepath(filepath, task_type, task_id):  # the tutorial's helper, as written there
    dirpath, base = os.path.dirname(filepath), os.path.basename(filepath)
    if not _is_chief(task_type, task_id):
        dirpath = os.path.join(dirpath, "workertemp_" + str(task_id))
    return os.path.join(dirpath, base)


checkpoint_dir = os.path.join(directory, "ckpt")
checkpoint = tps.train.Checkpoint(w=w, step=step)
write_checkpoint_dir = write_filepath(checkpoint_dir, task_type, task_id)
manager = tps.train.CheckpointManager(checkpoint, directory=write_checkpoint_dir, max_to_keep=1)
result = {"task": [task_type, task_id], "saved": [], "worker_dir_after": []}
for epoch in range(2):
    w.assign(np.full(8, epoch + 1, np.float32))
    step.assign(epoch + 1)
    result["saved"].append(manager.save())
    result.setdefault("own_latest", []).append(tps.train.latest_checkpoint(write_checkpoint_dir))
    if not _is_chief(task_type, task_id):
        shutil.rmtree(write_checkpoint_dir)
    result["worker_dir_after"].append(os.path.exists(write_checkpoint_dir))
result["chief_dir"] = sorted(os.listdir(checkpoint_dir))
w.assign(np.zeros(8, np.float32))
latest = tps.train.latest_checkpoint(checkpoint_dir)
tps.train.Checkpoint(w=w, step=step).restore(latest).assert_consumed()
result["latest"], result["restored"] = latest, [float(w.numpy()[0]), int(step.numpy())]

# An asynchronous save of both processes into one folder, while the values change.
shared = tps.train.CheckpointManager(checkpoint, os.path.join(directory, "shared"), max_to_keep=2)
w.assign(np.full(8, 7, np.float32))
path = shared.save(checkpoint_number=7, options=tps.train.CheckpointOptions(enable_async=True))
w.assign(np.full(8, 8, np.float32))  # training goes on
shared.sync()
tps.train.Checkpoint(w=w, step=step).restore(path).assert_consumed()
result["async"] = [path, float(w.numpy()[0])]

# What must agree still does: the checkpoint's name.
try:
    tps.train.Checkpoint(w=w).save(os.path.join(directory, "names", f"name{task_id}"))
    result["names_error"] = None
except ValueError as e:
    result["names_error"] = str(e)
print("RESULT " + json.dumps(result), flush=True)
