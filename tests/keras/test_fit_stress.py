"""Many epochs of ``fit`` with validation and callbacks on 8 fake CPU devices: no stall, one device's numbers.

The TPU guide's Keras shape (compile in the scope, ``fit`` with ``validation_data`` and
``steps_per_execution``) over 20 short epochs, with callbacks that read metrics after every
batch and change the learning rate every epoch: every program Keras and tpustrategy dispatch
(steps, metric reads, metric resets) counts against the bound on programs in flight.
"""

import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

X = np.random.default_rng(9).normal(size=(64, 4)).astype("float32")
Y = (X[:, 0] * X[:, 1] > 0).astype("int32")
EPOCHS = 20


def compiled(strategy=None, steps_per_execution=1):
    def make():
        keras.utils.set_random_seed(2)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
        model.compile(optimizer=keras.optimizers.Adam(0.01), steps_per_execution=steps_per_execution,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"])
        return model

    if strategy is None:
        return make()
    with strategy.scope():
        return make()


class ReadMetrics(keras.callbacks.Callback):
    """Reads every metric after every batch (what a progress bar or logger does)."""

    def __init__(self):
        super().__init__()
        self.reads = 0

    def on_train_batch_end(self, batch, logs=None):
        for metric in self.model.metrics:
            keras.tree.map_structure(float, metric.result())
            self.reads += 1


def callbacks():
    return [ReadMetrics(), keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.01 / (1 + 0.05 * epoch))]


@pytest.fixture(scope="module")
def reference():
    model = compiled()
    return model.fit(X, Y, batch_size=16, epochs=EPOCHS, shuffle=False, validation_data=(X[:32], Y[:32]),
                     validation_batch_size=16, callbacks=callbacks(), verbose=0).history


@pytest.mark.parametrize("steps_per_execution", [1, 4])
@pytest.mark.parametrize("make", [tps.TPUStrategy, tps.MirroredStrategy], ids=["tpu", "mirrored"])
def test_many_epochs_of_fit_with_validation_and_callbacks_finish_and_equal_one_device(
        reference, make, steps_per_execution):
    model = compiled(make(), steps_per_execution)
    train = tpsd.Dataset.from_tensor_slices((X, Y)).batch(16).repeat()
    val = tpsd.Dataset.from_tensor_slices((X[:32], Y[:32])).batch(16)
    cbs = callbacks()
    got = model.fit(train, epochs=EPOCHS, steps_per_epoch=4, validation_data=val, callbacks=cbs,
                    verbose=0).history
    assert cbs[0].reads > 0
    assert set(got) == set(reference)
    for key in reference:
        np.testing.assert_allclose(got[key], reference[key], rtol=1e-4, atol=1e-5, err_msg=key)
