"""Worker of test_multiprocess.py: metrics and an optimizer over 2 processes x 4 replicas.

Run under ``python -m tpustrategy.launch -n 2 --devices-per-process 4``; prints
one line ``RESULT <json>``. Global replica r holds the values ``[r, r + 1]``
(argument ``uniform``) or ``r + arange(r % 3)`` (``ragged``: pieces of different
sizes, some empty), labels ``[0, r % 2]`` against scores ``[[1, 0], [0, 1]]``,
and the gradient ``full(3, r)``. A second argument ``build`` creates the
optimizer's state before the first step; ``lazy`` lets the first
``apply_gradients`` (inside the compiled step) create it.
"""

from __future__ import annotations

import json
import sys

import numpy as np

import tpustrategy as tps

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10,
               collective_timeout=30)

import jax  # noqa: E402  (after initialize, which must precede the backend)

strategy = tps.MultiWorkerMirroredStrategy()
with strategy.scope():
    mean = tps.metrics.Mean()
    accuracy = tps.metrics.SparseCategoricalAccuracy()
    w = tps.Variable(np.ones(3, np.float32), name="w")
    optimizer = tps.optimizers.SGD(0.5, momentum=0.5)
if sys.argv[2] == "build":
    optimizer.build([w])


def per_replica(fn):
    return strategy.experimental_distribute_values_from_function(lambda ctx: fn(ctx.replica_id_in_sync_group))


sizes = {"uniform": lambda r: 2, "ragged": lambda r: r % 3}[sys.argv[1]]
values = per_replica(lambda r: (r + np.arange(sizes(r))).astype(np.float32))
labels = per_replica(lambda r: np.asarray([0, r % 2], np.int32))
scores = per_replica(lambda r: np.eye(2, dtype=np.float32))
grads = per_replica(lambda r: np.full(3, r, np.float32))


def step(v, y, s, g):
    mean.update_state(v)
    accuracy.update_state(y, s)
    optimizer.apply_gradients([(g, w)])
    return mean.result()


in_replica = strategy.run(step, args=(values, labels, scores, grads))
after_step = {"mean": float(mean.result()), "accuracy": float(accuracy.result()),
              "in_replica": [float(x) for x in strategy.experimental_local_results(in_replica)],
              "w": np.asarray(w.read_value()).tolist()}
mean.update_state([100.0])  # cross-replica: every process runs the same update once
after_cross = float(mean.result())


@tps.function
def compiled_step(g):
    def replica(g):
        optimizer.apply_gradients([(g, w)])
        mean.update_state(g[:1])

    strategy.run(replica, args=(g,))
    return mean.result()


after_compiled = float(compiled_step(grads))
after_compiled_w = np.asarray(w.read_value()).tolist()
mean.reset_state()
print("RESULT " + json.dumps({
    "process_index": jax.process_index(),
    "after_step": after_step,
    "after_cross": after_cross,
    "after_compiled": after_compiled,
    "after_compiled_w": after_compiled_w,
    "iterations": int(optimizer.iterations),
    "after_reset": float(mean.result()),
}), flush=True)
