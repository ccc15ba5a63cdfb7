"""``keras.layers.BatchNormalization(synchronized=True)`` under a strategy: tf-keras's
``SyncBatchNormalization`` — each training step's moments are those of the global batch
(every replica all-reduces its sum, sum of squares and count), so 8 replicas give one device's
moving statistics and outputs on the whole batch. Keras 3 alone refuses the argument on JAX.
"""

import jax
import jax.numpy as jnp
import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.keras import replica_steps

RNG = np.random.default_rng(4)
X = (RNG.normal(size=(64, 5)) * np.arange(1, 6) + np.arange(5)).astype("float32")   # per-feature scales
Y = (X[:, 0] - X[:, 3] > 0).astype("int32")


def build(synchronized):
    keras.utils.set_random_seed(3)
    return keras.Sequential([keras.Input((5,)), keras.layers.Dense(6),
                             keras.layers.BatchNormalization(momentum=0.5, synchronized=synchronized),
                             keras.layers.Dense(2)])


def compile_(model):
    model.compile(keras.optimizers.SGD(0.05), keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def moving_statistics(model):
    bn = model.layers[1]
    return np.asarray(bn.moving_mean.numpy()), np.asarray(bn.moving_variance.numpy())


@pytest.fixture(scope="module")
def one_device():
    tps.MirroredStrategy(devices=jax.devices()[:1])   # the patches are installed (Keras alone refuses it)
    model = build(synchronized=False)
    compile_(model)
    history = model.fit(X, Y, batch_size=32, epochs=2, shuffle=False, verbose=0).history
    return model, history


@pytest.mark.devices(8)
def test_fit_on_8_replicas_gives_one_devices_moving_statistics_and_outputs(one_device):
    want_model, want_history = one_device
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build(synchronized=True)
        compile_(model)
    assert model.layers[1].synchronized and model.layers[1].get_config()["synchronized"] is True
    assert replica_steps.eligible(model, strategy)   # runs Keras's step per replica, moments all-reduced
    history = model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(32), epochs=2, verbose=0).history
    np.testing.assert_allclose(history["loss"], want_history["loss"], rtol=1e-5)
    for got, want in zip(moving_statistics(model), moving_statistics(want_model)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict(X, batch_size=32, verbose=0),
                               want_model.predict(X, batch_size=32, verbose=0), rtol=1e-5, atol=1e-5)


def test_an_unsynchronized_batch_norm_also_runs_per_replica_each_keeping_its_own_statistics():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build(synchronized=False)
        compile_(model)
    # TensorFlow's MirroredStrategy: each replica's own moments and statistics (test_xray_port.py)
    assert replica_steps.eligible(model, strategy) == (strategy.num_replicas_in_sync > 1)


def _replica_step(strategy, model):
    def step(x):
        return model(x, training=True)

    def run(batch):
        return strategy.run(step, args=(batch,))

    return run


@pytest.mark.devices(8)
@pytest.mark.parametrize("synchronized", [True, False])
def test_a_training_call_in_strategy_run_uses_the_global_batch_only_when_synchronized(synchronized, path):
    reference = build(synchronized=False)
    out_want = np.asarray(reference(X[:32], training=True))
    want = moving_statistics(reference)
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build(synchronized=synchronized)
    batch = next(iter(strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices(X).batch(32))))
    out = strategy.run(lambda x: model(x, training=True), args=(batch,))
    got_out = np.concatenate([np.asarray(o) for o in strategy.experimental_local_results(out)])
    got = moving_statistics(model)
    if synchronized:
        np.testing.assert_allclose(got_out, out_want, rtol=1e-5, atol=1e-5)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    else:   # each replica normalises by its own 4 rows (tf-keras's plain BatchNormalization)
        assert not np.allclose(got_out, out_want, rtol=1e-3, atol=1e-3)
        assert not np.allclose(got[1], want[1], rtol=1e-3)


def test_global_moments_equal_numpys_over_the_whole_batch_with_a_mask():
    from tpustrategy._src.keras.sync_batch_norm import global_moments

    x = jnp.asarray(X.reshape(8, 8, 5))
    mask = np.arange(64).reshape(8, 8) % 3 != 0
    mean, variance = global_moments(x, (0, 1), mask)
    rows = X.reshape(8, 8, 5)[mask]
    np.testing.assert_allclose(mean, rows.mean(0), rtol=1e-5)
    np.testing.assert_allclose(variance, rows.var(0), rtol=1e-4)
