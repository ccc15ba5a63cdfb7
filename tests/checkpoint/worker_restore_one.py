"""Restores test_multiprocess.py's 2-process input positions on one process.

Usage: ``worker_restore_one.py DIR``; prints ``RESULT`` with the next global
batch of the DATA iterator and the error restoring the FILE iterator.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

import tpustrategy as tps
import tpustrategy.data as tpsd

directory = pathlib.Path(sys.argv[1])
strategy = tps.MirroredStrategy()


def distributed(dataset, policy):
    options = tpsd.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return iter(strategy.experimental_distribute_dataset(dataset.with_options(options)))


data_it = distributed(tpsd.Dataset.range(100).shuffle(20, seed=2).batch(8), tpsd.AutoShardPolicy.DATA)
with strategy.scope():
    big = tps.Variable(np.zeros(1 << 20, np.float32))
tps.train.Checkpoint(iterator=data_it, big=big).restore(str(directory / "data-1")).assert_consumed()
files = sorted(str(p) for p in directory.glob("*.tfrecord"))
file_it = distributed(tpsd.TFRecordDataset(files).map(lambda r: np.int64(int(r))).batch(8), tpsd.AutoShardPolicy.FILE)
try:
    tps.train.Checkpoint(iterator=file_it).restore(str(directory / "files-1"))
    error = None
except ValueError as e:
    error = str(e)
step = next(data_it)
print("RESULT " + json.dumps({
    "data_next": [int(x) for part in strategy.experimental_local_results(step) for x in np.asarray(part)],
    "files_error": error,
    "big_matches": bool(np.array_equal(big.numpy(), np.random.default_rng(0).random(1 << 20, dtype=np.float32))),
}), flush=True)
data_it.close(), file_it.close()  # stop the input threads before the interpreter exits
