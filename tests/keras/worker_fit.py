"""Worker of test_multiprocess_fit.py: Keras ``fit`` / ``evaluate`` / ``predict`` on 2 processes x 4 devices.

Usage: ``worker_fit.py DATA.npz`` under ``python -m tpustrategy.launch -n 2
--devices-per-process 4``. Reads ``x``, ``y`` and the initial weights ``w0``,
``w1``, ... from the file, trains the model of ``test_multiprocess_fit.build``
under ``MultiWorkerMirroredStrategy`` over a ``tpsd`` pipeline whose last batch
is partial, and prints ``RESULT <json>`` with the history, the evaluation, this
process's predictions and the final kernel.
"""

from __future__ import annotations

import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import numpy as np  # noqa: E402

import tpustrategy as tps  # noqa: E402

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10, collective_timeout=60)

import jax  # noqa: E402  (after initialize)

import tpustrategy.data as tpsd  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_multiprocess_fit import BATCH, build, compile_  # noqa: E402

data = np.load(sys.argv[1])
x, y = data["x"], data["y"]
weights = [data[f"w{i}"] for i in range(sum(1 for k in data.files if k.startswith("w")))]
strategy = tps.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = build()
    model.set_weights(weights)
    compile_(model, steps_per_execution=int(sys.argv[2]))
ds = tpsd.Dataset.from_tensor_slices((x, y)).batch(BATCH)
history = model.fit(ds, epochs=3, verbose=0).history
evaluated = model.evaluate(ds, verbose=0)
predicted = model.predict(ds, verbose=0)
predicted_arrays = model.predict(x, batch_size=BATCH, verbose=0)     # each process holds all of x
evaluated_arrays = model.evaluate(x, y, batch_size=BATCH, verbose=0)
print("RESULT " + json.dumps({
    "process_index": jax.process_index(),
    "history": {k: [float(v) for v in vs] for k, vs in history.items()},
    "evaluate": [float(v) for v in evaluated],
    "predict": np.asarray(predicted).tolist(),
    "predict_arrays": np.asarray(predicted_arrays).tolist(),
    "evaluate_arrays": [float(v) for v in evaluated_arrays],
    "kernel": model.layers[0].kernel.numpy().tolist(),
    "iterations": int(model.optimizer.iterations.numpy()),
}), flush=True)
