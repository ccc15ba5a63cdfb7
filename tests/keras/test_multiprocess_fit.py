"""Keras ``fit`` on 2 processes x 4 fake CPU devices equals single-device Keras (one process).

The job runs ``worker_fit.py`` under ``python -m tpustrategy.launch`` (bounded by
the launcher's timeout and the test's); the dataset is auto-sharded across the
processes and its last batch (4 of 100 examples) is partial.
"""

from __future__ import annotations

import pathlib

import keras
import numpy as np
import pytest

from tests.multiprocess.harness import run_job

pytestmark = pytest.mark.timeout(240)

BATCH = 16
HERE = pathlib.Path(__file__).parent


def build(seed: int = 1) -> keras.Model:
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.BatchNormalization(), keras.layers.Dense(2)])


def compile_(model: keras.Model, steps_per_execution: int = 1) -> None:
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()], steps_per_execution=steps_per_execution)


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_fit_on_two_processes_of_four_devices_equals_single_device_keras(tmp_path, steps_per_execution):
    x = np.random.default_rng(0).normal(size=(100, 6)).astype("float32")
    y = (x[:, 0] + x[:, 1] > 0).astype("int32")
    model = build()
    weights = [w.numpy() for w in model.weights]
    np.savez(tmp_path / "data.npz", x=x, y=y, **{f"w{i}": w for i, w in enumerate(weights)})
    compile_(model)
    want = model.fit(x, y, batch_size=BATCH, epochs=3, shuffle=False, verbose=0).history
    evaluated = model.evaluate(x, y, batch_size=BATCH, verbose=0)
    predicted = model.predict(x, batch_size=BATCH, verbose=0)

    job = run_job(str(HERE / "worker_fit.py"), str(tmp_path / "data.npz"), str(steps_per_execution), timeout=150)
    assert job.returncode == 0, job.stderr[-3000:]
    results = job.results()
    assert sorted(results) == [0, 1], job.stdout[-3000:]
    for result in results.values():
        assert set(result["history"]) == set(want)
        for key in want:
            np.testing.assert_allclose(result["history"][key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)
        np.testing.assert_allclose(result["evaluate"], evaluated, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(result["predict"], predicted, rtol=1e-5, atol=1e-5)
        # NumPy arrays every process holds: each input predicted (and evaluated) once, not once per process
        np.testing.assert_allclose(result["predict_arrays"], predicted, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(result["evaluate_arrays"], evaluated, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(result["kernel"], model.layers[0].kernel.numpy(), rtol=1e-5, atol=1e-6)
        assert result["iterations"] == 21                     # 7 steps per epoch, the partial one included
