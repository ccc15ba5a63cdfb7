"""tps.train.Checkpoint holds Keras models, optimizers and metrics by their variables."""

import keras
import numpy as np
import pytest

import tpustrategy as tps

pytest.importorskip("orbax.checkpoint")


def build(strategy=None):
    def make():
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.BatchNormalization()])
        optimizer = keras.optimizers.Adam(0.01)
        optimizer.build(model.trainable_variables)
        return model, optimizer, keras.metrics.Mean()

    if strategy is None:
        return make()
    with strategy.scope():
        return make()


def test_a_keras_model_optimizer_and_metric_restore_onto_fewer_replicas_and_no_strategy(tmp_path):
    import jax

    model, optimizer, metric = build(tps.MirroredStrategy())
    x = np.random.default_rng(0).normal(size=(8, 4)).astype("float32")
    model.compile(optimizer=optimizer, loss="mse")
    model.fit(x, np.zeros((8, 3), "float32"), batch_size=8, epochs=2, verbose=0)
    metric.update_state([1.0, 2.0, 6.0])
    path = tps.train.Checkpoint(model=model, optimizer=optimizer, metric=metric).save(str(tmp_path / "ck"))
    for strategy in (tps.MirroredStrategy(devices=jax.devices()[:4]), None):
        model2, optimizer2, metric2 = build(strategy)
        tps.train.Checkpoint(model=model2, optimizer=optimizer2, metric=metric2).restore(path)
        for a, b in zip(model.variables, model2.variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        for a, b in zip(optimizer.variables, optimizer2.variables):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert float(metric2.result()) == 3.0
    np.testing.assert_allclose(model2.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
