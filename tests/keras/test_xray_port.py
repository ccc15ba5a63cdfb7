"""keras.io's X-ray example under tpustrategy gives TensorFlow 2.21's values.

The program is ``xray_program.py``; ``tools/make_keras_xray_fixtures.py`` recorded what
Keras 3 on TensorFlow's backend gives under ``tf.distribute.MirroredStrategy`` (4 replicas over
logical CPUs, and 1). Under several replicas TensorFlow keeps unsynchronised batch
normalisation per replica: each replica normalises with its own batch's moments and updates its
own copy of the moving statistics (Keras 3 makes them ``aggregation="none"`` variables), so the
copies differ; ``evaluate`` / ``predict`` under the strategy use each replica's copy for its
share of the batch, and reading, saving and checkpoints give replica 0's copy — which is what a
model loaded without the strategy evaluates with.
"""

import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tests.keras import xray_program

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "xray_tf221.json"
WANT = json.loads(FIXTURE.read_text())["cases"]


def components(variable):
    """Each replica's copy of a variable: its buffer on each of the strategy's devices, in device order."""
    shards = sorted(variable.value.addressable_shards, key=lambda s: s.device.id)
    return [np.asarray(s.data) for s in shards]


def strategy_of(replicas):
    return tps.MirroredStrategy(devices=jax.devices()[:replicas])


def _close(got, want, err_msg, rtol=1e-5, atol=2e-6):
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=rtol, atol=atol,
                               err_msg=err_msg)


@pytest.mark.parametrize("replicas", [pytest.param(4, marks=pytest.mark.devices(4)), 1])
def test_batch_norm_statistics_are_each_replica_s_own_as_in_tensorflow(tmp_path, replicas):
    want = WANT[f"batch_norm_{replicas}"]
    got = xray_program.run_batch_norm(strategy_of(replicas), tpsd.Dataset, str(tmp_path), components)
    assert len(got["statistics"]) == len(want["statistics"]) == 2   # moving mean and variance
    for i, copies in enumerate(want["statistics"]):
        assert len(got["statistics"][i]) == replicas
        _close(got["statistics"][i], copies, f"moving statistic {i}", rtol=1e-5, atol=1e-6)
    for key in ("evaluate", "predict", "loaded_evaluate", "loaded_predict"):
        _close(got[key], want[key], key, rtol=1e-5, atol=1e-6)
    for key, values in want["history"].items():
        _close(got["history"][key], values, key, rtol=1e-5, atol=1e-6)
    if replicas > 1:   # the copies differ, and the loaded model has replica 0's: another result
        assert not np.allclose(*want["statistics"][0][:2])
        assert not np.allclose(want["predict"], want["loaded_predict"])


def _run_in_a_process_of(devices, tmp_path):
    script = (
        "import json, os, sys\n"
        "sys.path.insert(0, os.getcwd())\n"
        "import jax, tpustrategy as tps, tpustrategy.data as tpsd\n"
        "from tests.keras import xray_program, test_xray_port\n"
        "out = xray_program.run(tps.MirroredStrategy(), tpsd.Dataset, sys.argv[1], test_xray_port.components)\n"
        "json.dump(out, open(sys.argv[2], 'w'))\n")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu",
               XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}")
    result_path = tmp_path / "result.json"
    root = pathlib.Path(__file__).parents[2]
    subprocess.run([sys.executable, "-c", script, str(tmp_path), str(result_path)], cwd=root, env=env,
                   check=True, timeout=900)
    return json.loads(result_path.read_text())


def _for(key, tolerance):
    """Losses and statistics to ``tolerance``; a count (accuracy, precision, recall) to one example,
    since a prediction within float rounding of the 0.5 threshold may fall either side."""
    if key.endswith("loss"):
        return tolerance
    return {"rtol": 0, "atol": 1 / 50}   # one example of the at least 50 each count is over


@pytest.mark.parametrize("replicas", [pytest.param(4, marks=pytest.mark.devices(4)), 1])
def test_the_xray_example_s_fit_evaluate_and_restore_equal_tensorflow_s(tmp_path, replicas):
    want = WANT[f"xray_{replicas}"]
    if replicas == 1 or jax.device_count() == replicas:
        got = xray_program.run(strategy_of(replicas), tpsd.Dataset, str(tmp_path), components)
    else:
        # In a process of 8 devices a strategy over 4 of them drifts from epoch 2 (~1e-3, not
        # located: docs/pending/keras_acc.md): the program runs in a process of 4 devices, as
        # TensorFlow's ran over 4.
        got = _run_in_a_process_of(replicas, tmp_path)
    # One replica runs 13 steps an epoch for 5 epochs, 4 replicas 4 for 3: the two backends' float
    # rounding (convolutions, reductions) grows with the steps Adam takes.
    tolerance = {"rtol": 1e-3, "atol": 1e-4} if replicas == 1 else {"rtol": 1e-5, "atol": 2e-6}
    assert set(got["history"]) == set(want["history"])
    assert got["stopped_epoch"] == want["stopped_epoch"]
    for key, values in want["history"].items():
        _close(got["history"][key], values, key, **_for(key, tolerance))
    for key in ("evaluate", "loaded_evaluate", "weights_evaluate"):
        assert set(got[key]) == set(want[key])
        for name in want[key]:
            _close(got[key][name], want[key][name], f"{key}: {name}", **_for(name, tolerance))
    _close(got["predict"], want["predict"], "predict", **tolerance)
    _close(got["loaded_predict"], want["loaded_predict"], "loaded_predict", **tolerance)
    assert len(got["statistics"]) == len(want["statistics"]) == 4   # two layers' mean and variance
    for i, copies in enumerate(want["statistics"]):
        assert len(got["statistics"][i]) == replicas
        _close(got["statistics"][i], copies, f"moving statistic {i}", **tolerance)
