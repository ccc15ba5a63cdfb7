"""Worker of test_multi_worker.py: collectives and reduce across processes.

Run under ``python -m tpustrategy.launch -n 2 --devices-per-process 4``; prints
one line ``RESULT <json>``.
"""

from __future__ import annotations

import json

import numpy as np

import tpustrategy as tps

config = tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10,
                        collective_timeout=30)

import jax  # noqa: E402  (after initialize, which must precede the backend)

strategy = tps.MultiWorkerMirroredStrategy()


def local(value):
    return [np.asarray(v).tolist() for v in strategy.experimental_local_results(value)]


def replica_fn():
    ctx = tps.get_replica_context()
    rid = ctx.replica_id_in_sync_group
    one = jax.numpy.asarray(rid, jax.numpy.float32) + 1.0
    return rid, ctx.all_reduce(tps.ReduceOp.SUM, one), ctx.all_reduce("mean", one)


rid, total, mean = strategy.run(replica_fn)


def ragged(ctx):
    # Replica 0 (process 0) holds [0, 1, 2, 3], replica 4 (process 1) holds [4, 5].
    pieces = {0: [0.0, 1.0, 2.0, 3.0], 4: [4.0, 5.0]}
    return np.asarray(pieces.get(ctx.replica_id_in_sync_group, []), np.float32)


partial = strategy.experimental_distribute_values_from_function(ragged)
host_equal = strategy.experimental_distribute_values_from_function(
    lambda ctx: np.full([2], ctx.replica_id_in_sync_group, np.float32))
run_equal = strategy.run(lambda: jax.numpy.full(
    [2], tps.get_replica_context().replica_id_in_sync_group, jax.numpy.float32))
print("RESULT " + json.dumps({
    "process_index": jax.process_index(),
    "process_count": jax.process_count(),
    "sources": config.sources,
    "num_replicas": strategy.num_replicas_in_sync,
    "replica_ids": local(rid),
    "all_reduce_sum": local(total),
    "all_reduce_mean": local(mean),
    "reduce_sum": float(strategy.reduce("sum", rid, axis=None)),
    "reduce_mean_axis0": float(strategy.reduce(tps.ReduceOp.MEAN, partial, axis=0)),
    "reduce_sum_axis0": float(strategy.reduce(tps.ReduceOp.SUM, partial, axis=0)),
    "reduce_mean_axis0_run": float(strategy.reduce(tps.ReduceOp.MEAN, run_equal, axis=0)),
    "reduce_mean_axis0_host": float(strategy.reduce(tps.ReduceOp.MEAN, host_equal, axis=0)),
}), flush=True)
