"""Worker of test_multi_worker.py: ragged steps across processes take the eager path everywhere.

Run under ``python -m tpustrategy.launch -n 2 --devices-per-process 4``; prints
one line ``RESULT <json>``.
"""

from __future__ import annotations

import json

import tpustrategy as tps

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10,
               collective_timeout=30)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy.data as tpsd  # noqa: E402

strategy = tps.MultiWorkerMirroredStrategy()


def total(x):
    ctx = tps.get_replica_context()
    s = ctx.all_reduce("sum", jnp.sum(x).astype(jnp.float32))
    g = jax.grad(lambda w: ctx.all_reduce("sum", w * jnp.sum(x).astype(jnp.float32)))(1.0)
    return s, g, ctx.all_gather(x.astype(jnp.float32), axis=0)


# range(6).batch(6) over 8 replicas: pieces [1,1,1,1,1,1,0,0]; process 0's are all of
# size 1, process 1's are not: both processes must agree that the step is ragged.
dist = strategy.experimental_distribute_dataset(tpsd.Dataset.range(6).batch(6))
steps = []
for batch in dist:
    s, g, gathered = strategy.run(total, args=(batch,))
    steps.append({
        "sum": [float(v) for v in strategy.experimental_local_results(s)],
        "grad": [float(v) for v in strategy.experimental_local_results(g)],
        "gathered": [np.asarray(v).tolist() for v in strategy.experimental_local_results(gathered)],
        "reduce_mean_axis0": float(strategy.reduce("mean", batch, axis=0)),
    })
# An even step afterwards still compiles and agrees.
even = next(iter(strategy.experimental_distribute_dataset(tpsd.Dataset.range(16).batch(16))))
steps.append({"sum": [float(v) for v in strategy.experimental_local_results(strategy.run(total, args=(even,))[0])]})
print("RESULT " + json.dumps({"steps": steps}), flush=True)
