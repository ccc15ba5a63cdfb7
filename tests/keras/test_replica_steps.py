"""``fit``'s train step per replica (``keras/replica_steps.py``) equals single-device Keras 3.

A model whose global-batch loss is the mean of its replicas' losses trains with Keras's
step run per replica (gradients averaged, metric variables summed); every other model keeps
Keras's partitioned program. Both are checked against the same training on one device
(weights and every epoch's logs), and the path each took is counted, so a model that should
fall back and silently does not — or the reverse — fails.
"""

import jax
import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.keras import replica_steps

N = 8
X = np.random.default_rng(0).normal(size=(96, 6)).astype("float32")
Y = (X[:, 0] + X[:, 1] > 0).astype("int32")
W = np.random.default_rng(1).uniform(0.5, 2.0, size=96).astype("float32")


def dense(seed=1, last=None, **kwargs):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="relu", **kwargs),
                             keras.layers.Dense(2, activation=last)])


def compile_(model, loss=None, steps_per_execution=1):
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=loss or keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy(), keras.metrics.SparseCategoricalCrossentropy(from_logits=True)],
                  steps_per_execution=steps_per_execution)


def per_replica_programs(n):
    """``n`` per-replica programs under a strategy of several replicas; with one replica none:
    Keras's own program is that replica's step (``replica_steps.eligible``)."""
    return n if jax.device_count() > 1 else 0


@pytest.fixture
def counted(monkeypatch):
    """How many per-replica programs ran (each call of one ``replica_steps.program``)."""
    calls = []
    original = replica_steps.program

    def program(*args, **kwargs):
        jitted = original(*args, **kwargs)

        def call(*a, **k):
            out = jitted(*a, **k)
            calls.append(1)
            return out
        return call

    monkeypatch.setattr(replica_steps, "program", program)
    return calls


def _pipeline(*arrays, batch):
    """A fresh ``tpsd`` pipeline over ``arrays`` each time it is called (fit's positional data)."""
    return lambda: (tpsd.Dataset.from_tensor_slices(arrays).batch(batch),)


def _fit_both(make, data, loss=None, steps_per_execution=1, epochs=3, compare=True, **fit_kwargs):
    """The same training on one device and under a strategy over every device: (reference, ours)."""
    reference = make()
    weights = reference.get_weights()
    compile_(reference, loss)
    want = reference.fit(*data(), epochs=epochs, verbose=0, shuffle=False, **fit_kwargs).history
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = make()
        model.set_weights(weights)
        compile_(model, loss, steps_per_execution)
    got = model.fit(*data(), epochs=epochs, verbose=0, shuffle=False, **fit_kwargs).history
    assert set(got) == set(want)
    if not compare:
        return model
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=2e-5, atol=2e-6, err_msg=key)
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    return model


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_a_mean_loss_model_trains_per_replica_like_one_device(counted, steps_per_execution):
    ds = _pipeline(X, Y, batch=24)
    _fit_both(dense, ds, steps_per_execution=steps_per_execution)
    assert len(counted) == per_replica_programs(3 * (4 if steps_per_execution == 1 else 1))   # 4 batches an epoch


def test_sample_weights_in_the_dataset_and_a_string_loss_train_per_replica_like_one_device(counted):
    ds = _pipeline(X, Y, W, batch=32)
    _fit_both(lambda: dense(last="softmax"), ds, loss="sparse_categorical_crossentropy")
    assert len(counted) == per_replica_programs(9)


@pytest.mark.devices(4)  # a batch of 26 splits over 2 replicas, not over 4 or 8
def test_a_batch_that_does_not_split_over_the_replicas_runs_keras_s_program(counted):
    ds = _pipeline(X[:90], Y[:90], batch=32)  # 32, 32, 26
    _fit_both(dense, ds)
    assert len(counted) == 3 * 2


@pytest.mark.parametrize("case", ["sum_reduction", "user_loss", "kernel_regularizer", "activity_regularizer",
                                  "masked_output"])
def test_a_model_whose_loss_is_not_a_mean_over_replicas_keeps_keras_s_program(counted, case):
    make, loss = dense, None
    if case == "sum_reduction":
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
    elif case == "user_loss":
        def loss(y, logits):   # the batch's sum: per replica it would be a part of it
            return keras.ops.sum(keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True))
    elif case == "kernel_regularizer":
        def make():
            return dense(kernel_regularizer=keras.regularizers.L2(0.01))
    elif case == "activity_regularizer":
        def make():
            return dense(activity_regularizer=keras.regularizers.L2(0.01))
    else:
        def make():   # the mask of the padded steps reaches the loss
            keras.utils.set_random_seed(1)
            return keras.Sequential([keras.Input((4, 6)), keras.layers.Masking(0.0),
                                     keras.layers.TimeDistributed(keras.layers.Dense(2))])
    if case == "masked_output":
        seq = np.stack([X[:, :6]] * 4, axis=1)
        seq[::3, 2:] = 0.0   # every third example: the last two steps padded
        labels = np.stack([Y] * 4, axis=1)
        ds = _pipeline(seq, labels, batch=32)
    else:
        ds = _pipeline(X, Y, batch=32)
    _fit_both(make, ds, loss)
    assert counted == []


def test_the_static_conditions_name_what_keeps_keras_s_program():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = dense()
        compile_(model)
    model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(32), epochs=1, verbose=0)
    assert replica_steps.eligible(model, strategy) == (strategy.num_replicas_in_sync > 1)
    assert not replica_steps.eligible(model, tps.MirroredStrategy(["/cpu:0"]))   # one replica
    assert replica_steps._mean_losses("mse") and replica_steps._mean_losses(keras.losses.mean_squared_error)
    assert replica_steps._mean_losses({"a": "mse", "b": keras.losses.Huber()})
    assert not replica_steps._mean_losses(None)
    assert not replica_steps._mean_losses(keras.losses.Huber(reduction="sum"))
    assert not replica_steps._mean_losses(lambda y, p: (y - p) ** 2)


@pytest.mark.devices(4)
def test_batch_norm_trains_per_replica_each_replica_keeping_its_own_statistics(counted):
    """TensorFlow's MirroredStrategy: each replica normalises with its own batch's moments and
    updates its own copy of the moving statistics (test_xray_port.py compares with TensorFlow)."""
    strategy = tps.MirroredStrategy(devices=jax.devices()[:4])
    with strategy.scope():
        model = keras.Sequential([keras.Input((6,)), keras.layers.BatchNormalization(momentum=0.5),
                                  keras.layers.Dense(2)])
        compile_(model)
    model.fit(tpsd.Dataset.from_tensor_slices((X[:32], Y[:32])).batch(32), epochs=1, verbose=0)
    assert len(counted) == 1
    bn = model.layers[0]
    copies = sorted(bn.moving_mean.value.addressable_shards, key=lambda s: s.device.id)
    for r, shard in enumerate(copies):   # 8 rows a replica, moving mean 0 -> 0.5 * local mean
        np.testing.assert_allclose(np.asarray(shard.data), 0.5 * X[8 * r:8 * (r + 1)].mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.5 * X[:8].mean(0), rtol=1e-5, atol=1e-6)   # replica 0's
    variances = [np.asarray(s.data) for s in sorted(bn.moving_variance.value.addressable_shards,
                                                    key=lambda s: s.device.id)]
    np.testing.assert_allclose(variances[3], 0.5 + 0.5 * X[24:32].var(0), rtol=1e-5, atol=1e-6)


def test_dropout_trains_per_replica(counted):
    keras.utils.set_random_seed(1)
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(16), keras.layers.Dropout(0.5),
                                  keras.layers.Dense(2)])
        compile_(model)
    history = model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(32), epochs=2, verbose=0).history
    assert len(counted) == per_replica_programs(6)
    assert np.isfinite(history["loss"]).all()
