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
import pathlib

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


@pytest.mark.parametrize("replicas", [pytest.param(4, marks=pytest.mark.devices(4)), 1])
def test_the_xray_example_s_fit_evaluate_and_restore_equal_tensorflow_s(tmp_path, replicas):
    want = WANT[f"xray_{replicas}"]
    got = xray_program.run(strategy_of(replicas), tpsd.Dataset, str(tmp_path), components)
    # One replica runs 13 steps an epoch for 5 epochs, 4 replicas 4 for 3: the two backends' float
    # rounding (convolutions, reductions) grows with the steps Adam takes.
    tolerance = {"rtol": 1e-3, "atol": 1e-4} if replicas == 1 else {"rtol": 1e-5, "atol": 2e-6}
    assert set(got["history"]) == set(want["history"])
    assert got["stopped_epoch"] == want["stopped_epoch"]
    for key, values in want["history"].items():
        _close(got["history"][key], values, key, **tolerance)
    for key in ("evaluate", "loaded_evaluate", "weights_evaluate"):
        assert set(got[key]) == set(want[key])
        for name in want[key]:
            _close(got[key][name], want[key][name], f"{key}: {name}", **tolerance)
    _close(got["predict"], want["predict"], "predict", **tolerance)
    _close(got["loaded_predict"], want["loaded_predict"], "loaded_predict", **tolerance)
    assert len(got["statistics"]) == len(want["statistics"]) == 4   # two layers' mean and variance
    for i, copies in enumerate(want["statistics"]):
        assert len(got["statistics"][i]) == replicas
        _close(got["statistics"][i], copies, f"moving statistic {i}", **tolerance)
