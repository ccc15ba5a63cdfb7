"""A Keras metric made before ``strategy.scope()`` and compiled inside it (as TensorFlow's
tf-keras distribute tests do) works in ``fit`` / ``evaluate`` and gives single-device Keras's numbers.

tf-keras updates such a metric in every replica of the model's strategy; here its variables
become the strategy's when ``compile`` receives it (``keras.variables.move_to``).
"""

import jax
import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

X = np.random.default_rng(3).normal(size=(64, 5)).astype("float32")
Y = keras.utils.to_categorical((X[:, 0] + X[:, 2] > 0).astype("int32"), 2).astype("float32")


def build():
    keras.utils.set_random_seed(7)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"),
                             keras.layers.Dense(2, activation="softmax")])


def fit(model, metric, *data, **batching):
    model.compile(keras.optimizers.SGD(0.1), "categorical_crossentropy", metrics=[metric])
    history = model.fit(*data, epochs=2, verbose=0, shuffle=False, **batching).history
    return history, model.evaluate(*data, verbose=0, return_dict=True, **batching)


@pytest.mark.parametrize("replicas", [1, pytest.param(8, marks=pytest.mark.devices(8))])
def test_a_metric_made_before_the_scope_works_and_equals_one_device(replicas):
    want_history, want_eval = fit(build(), keras.metrics.CategoricalAccuracy(), X, Y, batch_size=16)
    data = tpsd.Dataset.from_tensor_slices((X, Y)).batch(16)
    metric = keras.metrics.CategoricalAccuracy()          # outside every scope
    strategy = tps.MirroredStrategy(devices=jax.devices()[:replicas])
    with strategy.scope():
        model = build()
        got_history, got_eval = fit(model, metric, data)
    assert set(got_history) == set(want_history) == {"loss", "categorical_accuracy"}
    for key in want_history:
        np.testing.assert_allclose(got_history[key], want_history[key], rtol=1e-5, atol=1e-6, err_msg=key)
    for key in want_eval:
        np.testing.assert_allclose(got_eval[key], want_eval[key], rtol=1e-5, atol=1e-6, err_msg=key)
    # The metric object passed in is the one that counted, and it is the strategy's now.
    assert float(metric.result()) == pytest.approx(want_eval["categorical_accuracy"], abs=1e-6)
    assert float(metric.count.numpy()) == len(X)
    assert all(len(v.value.sharding.device_set) == replicas for v in metric.variables)


def test_a_metric_of_another_strategy_is_left_alone():
    first = tps.MirroredStrategy(devices=jax.devices()[:1])
    with first.scope():
        metric = keras.metrics.CategoricalAccuracy()
    owner = metric.variables[0].__dict__["_tps_state"]._strategy
    second = tps.MirroredStrategy(devices=jax.devices()[:1])
    with second.scope():
        model = build()
        model.compile("sgd", "categorical_crossentropy", metrics=[metric])
    assert metric.variables[0].__dict__["_tps_state"]._strategy is owner is first
