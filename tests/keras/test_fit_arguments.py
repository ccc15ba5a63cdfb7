"""``fit`` arguments Keras accepts with a dataset, over tpsd datasets under a strategy, equal one device.

``class_weight``, sample weights inside the dataset, ``initial_epoch`` and ``validation_freq``;
the reference is single-device Keras 3 on the same NumPy arrays in the same batches.
"""

import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

X = np.random.default_rng(5).normal(size=(48, 5)).astype("float32")
Y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype("int32")
W = np.linspace(0.5, 2.0, 48).astype("float32")


def compiled(strategy=None):
    def make():
        keras.utils.set_random_seed(11)
        model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.SGD(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()])
        return model

    if strategy is None:
        return make()
    with strategy.scope():
        return make()


def assert_history(got, want):
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("make", [tps.MirroredStrategy, tps.TPUStrategy], ids=["mirrored", "tpu"])
def test_class_weight_with_a_tpsd_dataset_equals_one_device(make):
    weights = {0: 1.0, 1: 3.0}
    want = compiled().fit(X, Y, batch_size=16, epochs=2, shuffle=False, class_weight=weights, verbose=0).history
    model = compiled(make())
    got = model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(16), epochs=2, class_weight=weights,
                    verbose=0).history
    assert_history(got, want)


def test_sample_weights_inside_the_dataset_equal_keras_sample_weight():
    want = compiled().fit(X, Y, sample_weight=W, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    model = compiled(tps.MirroredStrategy())
    got = model.fit(tpsd.Dataset.from_tensor_slices((X, Y, W)).batch(16), epochs=2, verbose=0).history
    assert_history(got, want)


def test_class_weight_and_sample_weights_together_name_the_conflict():
    model = compiled(tps.MirroredStrategy())
    with pytest.raises(ValueError, match=r"`class_weight` needs a dataset of \(x, y\) batches"):
        model.fit(tpsd.Dataset.from_tensor_slices((X, Y, W)).batch(16), class_weight={0: 2.0}, verbose=0)


def test_class_weight_on_a_distributed_dataset_names_the_fix():
    strategy = tps.MirroredStrategy()
    model = compiled(strategy)
    dist = strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices((X, Y)).batch(16))
    with pytest.raises(ValueError, match=r"cannot be applied to a distributed dataset.*\n.*tpsd dataset itself"):
        model.fit(dist, class_weight={0: 2.0}, verbose=0)


def test_initial_epoch_and_validation_freq_equal_one_device():
    val = (X[:24] * 0.5, Y[:24])
    want = compiled().fit(X, Y, batch_size=16, epochs=4, initial_epoch=1, shuffle=False, validation_data=val,
                          validation_batch_size=8, validation_freq=2, verbose=0).history
    model = compiled(tps.MirroredStrategy())
    got = model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(16), epochs=4, initial_epoch=1,
                    validation_data=tpsd.Dataset.from_tensor_slices(val).batch(8), validation_freq=2,
                    verbose=0).history
    assert len(got["loss"]) == 3 and len(got["val_loss"]) == 2   # after epochs 2 and 4 (1-based)
    assert_history(got, want)
