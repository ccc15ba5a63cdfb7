"""Writes ``tests/keras/fixtures/xray_tf221.json``: TensorFlow 2.21's values for keras.io's X-ray
example (``tests/keras/xray_program.py``) under ``tf.distribute.MirroredStrategy``.

Run with TensorFlow 2.21's interpreter (never imported by the library or the tests), from the
repository root::

    /work/tfvenv/bin/python tools/make_keras_xray_fixtures.py

Keras 3 on the TensorFlow backend runs the program over 4 logical CPU devices (4 replicas) and
over one (1 replica). Each moving statistic of batch normalisation is recorded per replica
(the ``MirroredVariable``'s components: Keras 3 creates them with ``aggregation="none"``, so
TensorFlow updates each replica's copy from that replica's batch), beside every history value,
``evaluate``'s results, predictions, and the results of the checkpoint loaded without the
strategy. ``tests/keras/test_xray_port.py`` runs the same program under tpustrategy.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "keras"))

import keras  # noqa: E402
import xray_program  # noqa: E402

OUT = os.path.join(ROOT, "tests", "keras", "fixtures", "xray_tf221.json")
REPLICAS = 4


def components(variable: object) -> list[np.ndarray]:
    value = variable.value
    parts = getattr(value, "values", None)
    return [np.asarray(p) for p in parts] if parts is not None else [np.asarray(value)]


def main() -> None:
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * REPLICAS)
    out = {"tensorflow": tf.__version__, "keras": keras.__version__, "cases": {}}
    for replicas in (REPLICAS, 1):
        strategy = tf.distribute.MirroredStrategy([f"/cpu:{i}" for i in range(replicas)])
        with tempfile.TemporaryDirectory() as directory:
            out["cases"][f"xray_{replicas}"] = xray_program.run(strategy, tf.data.Dataset, directory, components)
            out["cases"][f"batch_norm_{replicas}"] = xray_program.run_batch_norm(
                strategy, tf.data.Dataset, directory, components)
        print(replicas, "replicas:", out["cases"][f"xray_{replicas}"]["history"]["val_binary_accuracy"])
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
