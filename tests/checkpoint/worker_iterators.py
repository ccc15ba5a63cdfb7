"""Input positions saved by a 2-process job, for restoring onto 1 process (test_multiprocess.py).

Usage under the launcher: ``worker_iterators.py DIR`` (``DIR/*.tfrecord`` exist).
Saves ``DIR/data`` (auto-shard DATA: every process reads the same stream, and
a 4 MiB mirrored variable) and
``DIR/files`` (auto-shard FILE: each process reads its own files) after two
steps, then prints ``RESULT`` with this process's pieces of the next step.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

import tpustrategy as tps
import tpustrategy.data as tpsd

tps.initialize(initialization_timeout=60, heartbeat_timeout=20, shutdown_timeout=20, collective_timeout=60)

import jax  # noqa: E402

directory = pathlib.Path(sys.argv[1])
strategy = tps.MultiWorkerMirroredStrategy()


def distributed(dataset, policy):
    options = tpsd.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return iter(strategy.experimental_distribute_dataset(dataset.with_options(options)))


def pieces(step):
    return [int(x) for part in strategy.experimental_local_results(step) for x in np.asarray(part)]


data_it = distributed(tpsd.Dataset.range(100).shuffle(20, seed=2).batch(8), tpsd.AutoShardPolicy.DATA)
files = sorted(str(p) for p in directory.glob("*.tfrecord"))
file_it = distributed(tpsd.TFRecordDataset(files).map(lambda r: np.int64(int(r))).batch(8), tpsd.AutoShardPolicy.FILE)
for _ in range(2):
    next(data_it), next(file_it)
with strategy.scope():  # 4 MiB of random floats, mirrored over both processes' 8 devices
    big = tps.Variable(np.random.default_rng(0).random(1 << 20, dtype=np.float32))
tps.train.Checkpoint(iterator=data_it, big=big).save(str(directory / "data"))
tps.train.Checkpoint(iterator=file_it).save(str(directory / "files"))
print("RESULT " + json.dumps({"process_index": jax.process_index(), "data_next": pieces(next(data_it))}), flush=True)
data_it.close(), file_it.close()  # stop the input threads before the interpreter exits
