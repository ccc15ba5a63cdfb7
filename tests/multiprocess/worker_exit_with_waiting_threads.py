"""Worker of test_multi_worker.py: a process ends while its prefetch thread waits for a peer.

Both processes iterate one per-process pipeline (``distribute_datasets_from_function``,
so every step is agreed between the processes). Process 0 reads without
prefetching and stops after one step; process 1 prefetches, so after its first step
its background thread waits inside the coordination service for process 0's
arrival at step 1, which never comes. Both processes also leave a
``PreemptionWatcher`` open, whose thread polls the service with blocking gets. Both
then end normally: the exit must let those threads go (not abort from C++ when the
interpreter finalizes).

Prints ``RESULT {"steps": n, "pid": i}``.
"""

from __future__ import annotations

import json
import sys

import tpustrategy as tps

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=20, collective_timeout=30)

import numpy as np  # noqa: E402

strategy = tps.MultiWorkerMirroredStrategy()
watcher = tps.experimental.PreemptionWatcher()  # never closed
pid = strategy.cluster_resolver.task_id


def dataset_fn(ctx):
    return tps.data.Dataset.from_tensor_slices(np.arange(64, dtype=np.float32)).batch(
        ctx.get_per_replica_batch_size(2 * strategy.num_replicas_in_sync))


options = tps.InputOptions(prefetch_to_device=0 if pid == 0 else 2)
iterator = iter(strategy.distribute_datasets_from_function(dataset_fn, options))
first = next(iterator)
assert [np.asarray(x).tolist() for x in strategy.experimental_local_results(first)][0] == [0.0, 1.0]
assert watcher.preemption_message is None
print("RESULT " + json.dumps({"steps": 1, "pid": pid}), flush=True)
sys.stdout.flush()
