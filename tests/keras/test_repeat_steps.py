"""``fit(ds.repeat(), steps_per_epoch=N)`` keeps one iterator across epochs, as Keras on one device.

The reference is single-device Keras 3 fed the same batches by a Python generator (Keras keeps
one iterator of an infinite input across epochs): epoch 2 starts where epoch 1 stopped, not at
batch 0. The same for ``validation_steps`` over a repeated validation dataset.
"""

import itertools

import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

X = np.random.default_rng(3).normal(size=(40, 4)).astype("float32")
Y = (X[:, 0] - X[:, 1] > 0).astype("int32")
XV, YV = X[:24] * 0.5, 1 - Y[:24]


def build():
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(2)])
    return model


def compile_(model, steps_per_execution=1):
    model.compile(optimizer=keras.optimizers.SGD(0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()], steps_per_execution=steps_per_execution)


def batches(x, y, size):
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


@pytest.fixture(scope="module")
def reference():
    model = build()
    weights = model.get_weights()
    compile_(model)
    train = (b for b in itertools.cycle(batches(X, Y, 8)))       # 5 batches; 3 per epoch: 0 1 2 | 3 4 0 | 1 2 3 | 4 0 1
    val = (b for b in itertools.cycle(batches(XV, YV, 8)))       # 3 batches; 2 per epoch: 0 1 | 2 0 | 1 2 | 0 1
    history = model.fit(train, epochs=4, steps_per_epoch=3, validation_data=val, validation_steps=2,
                        verbose=0).history
    return weights, history, model.get_weights()


def _restarting_history(weights):
    """What the bug gave: every epoch restarts at batch 0 (for the test's own sanity check)."""
    model = build()
    model.set_weights(weights)
    compile_(model)
    history = {}
    for _ in range(4):
        h = model.fit((b for b in batches(X, Y, 8)[:3]), epochs=1, steps_per_epoch=3, verbose=0,
                      validation_data=(b for b in batches(XV, YV, 8)[:2]), validation_steps=2).history
        for k, v in h.items():
            history.setdefault(k, []).extend(v)
    return history


@pytest.mark.parametrize("steps_per_execution", [1, 2])
@pytest.mark.parametrize("make", [tps.MirroredStrategy, tps.TPUStrategy], ids=["mirrored", "tpu"])
def test_repeat_with_steps_per_epoch_continues_the_stream_across_epochs(reference, make, steps_per_execution):
    weights, history, final = reference
    assert not np.allclose(_restarting_history(weights)["loss"][1:], history["loss"][1:], rtol=1e-4)
    strategy = make()
    with strategy.scope():
        model = build()
        model.set_weights(weights)
        compile_(model, steps_per_execution)
    ds = tpsd.Dataset.from_tensor_slices((X, Y)).batch(8).repeat()
    val = tpsd.Dataset.from_tensor_slices((XV, YV)).batch(8).repeat()
    got = model.fit(ds, epochs=4, steps_per_epoch=3, validation_data=val, validation_steps=2, verbose=0).history
    assert set(got) == set(history)
    for key in history:
        np.testing.assert_allclose(got[key], history[key], rtol=1e-5, atol=1e-6, err_msg=key)
    for a, b in zip(model.get_weights(), final):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_finite_dataset_longer_than_steps_per_epoch_is_read_on_until_its_end(reference):
    # Keras's rule: with steps_per_epoch below the cardinality the iterator runs on across epochs
    # and restarts only once the dataset is exhausted (5 batches, 3 per epoch: 0 1 2 | 3 4 | 0 1 2).
    weights, _, _ = reference
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        got_model = build()
        got_model.set_weights(weights)
        compile_(got_model)
    seen = []

    class Count(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(int(got_model.optimizer.iterations.numpy()))

    with pytest.warns(UserWarning, match="ran out of data"):   # Keras's own warning at the end of the data
        got_model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(8), epochs=3, steps_per_epoch=3, verbose=0,
                      callbacks=[Count()])
    assert seen == [3, 5, 8]
