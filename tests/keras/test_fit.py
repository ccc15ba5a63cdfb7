"""model.fit / evaluate / predict under a strategy equal single-device Keras 3."""

import jax
import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

X = np.random.default_rng(0).normal(size=(100, 6)).astype("float32")
Y = (X[:, 0] + X[:, 1] > 0).astype("int32")


def build(seed=1):
    # Synchronized: the global batch's moments, so any number of replicas equals one device (an
    # unsynchronized layer keeps each replica's own statistics, as TensorFlow does: test_xray_port.py).
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(16, activation="relu"),
                             keras.layers.BatchNormalization(synchronized=True), keras.layers.Dense(2)])


def compile_(model, steps_per_execution=1):
    model.compile(optimizer=keras.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=[keras.metrics.SparseCategoricalAccuracy()], steps_per_execution=steps_per_execution)


@pytest.fixture(scope="module")
def reference():
    with tps.MirroredStrategy(devices=jax.devices()[:1]).scope():
        pass   # a scope installs the Keras patches (Keras alone refuses synchronized=True on JAX)
    model = build()
    weights = [w.numpy() for w in model.weights]
    compile_(model)
    history = model.fit(X, Y, batch_size=16, epochs=3, shuffle=False, verbose=0).history
    return weights, history, model.evaluate(X, Y, batch_size=16, verbose=0), model.predict(X, batch_size=16, verbose=0)


def _assert_history(got, want):
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_fit_on_a_tpsd_dataset_with_a_partial_last_batch_equals_single_device_keras(reference, steps_per_execution):
    weights, history, evaluated, predicted = reference
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build()
        model.set_weights(weights)
        compile_(model, steps_per_execution)
    ds = tpsd.Dataset.from_tensor_slices((X, Y)).batch(16)   # 6 full batches and one of 4
    got = model.fit(ds, epochs=3, verbose=0).history          # outside the scope, as in TF's guide
    _assert_history(got, history)
    np.testing.assert_allclose(model.evaluate(ds, verbose=0), evaluated, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict(ds, verbose=0), predicted, rtol=1e-5, atol=1e-5)
    kernel = model.layers[0].kernel
    assert len(kernel.value.sharding.device_set) == jax.device_count() and kernel.value.sharding.is_fully_replicated


def test_fit_accepts_a_distributed_dataset_and_validation_data(reference):
    weights, history, _, _ = reference
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build()
        model.set_weights(weights)
        compile_(model)
    dist = strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices((X, Y)).batch(16))
    # tf-keras needs steps_per_epoch with a distributed dataset (test_fit_steps_rules).
    got = model.fit(dist, epochs=3, steps_per_epoch=7, verbose=0,
                    validation_data=tpsd.Dataset.from_tensor_slices((X, Y)).batch(32))
    _assert_history({k: v for k, v in got.history.items() if not k.startswith("val_")}, history)
    assert len(got.history["val_loss"]) == 3


def test_steps_per_execution_runs_one_program_per_n_steps_and_never_past_steps_per_epoch():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build()
        compile_(model, steps_per_execution=4)
    ds = tpsd.Dataset.from_tensor_slices((X, Y)).repeat().batch(16)
    model.fit(ds, epochs=2, steps_per_epoch=6, verbose=0)
    assert int(model.optimizer.iterations.numpy()) == 12       # 4 + 2 per epoch, not 8


def test_compile_refuses_tps_optimizers_and_metrics_naming_the_keras_class():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build()
        with pytest.raises(TypeError, match=r"keras\.optimizers\.Adam"):
            model.compile(optimizer=tps.optimizers.Adam(1e-3), loss="mse")
        with pytest.raises(TypeError, match=r"keras\.metrics\.Mean"):
            model.compile(optimizer="sgd", loss="mse", metrics=[tps.metrics.Mean()])


def test_a_tpsd_dataset_with_y_names_the_argument():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build()
        compile_(model)
    with pytest.raises(ValueError, match="`y` cannot be given"):
        model.fit(tpsd.Dataset.from_tensor_slices(X).batch(16), Y, verbose=0)


@pytest.mark.devices(8)  # a 4x2 device assignment
def test_fit_on_four_replicas_of_two_cores_equals_one_device(reference):
    weights, history, _, _ = reference
    grid = np.array(jax.devices()[:8]).reshape(4, 2)
    strategy = tps.TPUStrategy(device_assignment=tps.tpu.DeviceAssignment.from_devices(grid))
    with strategy.scope():
        model = build()
        model.set_weights(weights)
        compile_(model)
    got = model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(16), epochs=3, verbose=0).history
    _assert_history(got, history)


@pytest.mark.devices(8)  # a 4x2 device assignment
def test_kernels_split_over_the_cores_of_a_4x2_assignment_train_like_one_device(reference):
    weights, history, evaluated, _ = reference
    grid = np.array(jax.devices()[:8]).reshape(4, 2)
    strategy = tps.TPUStrategy(device_assignment=tps.tpu.DeviceAssignment.from_devices(grid))
    with strategy.scope():
        model = build()
        model.set_weights(weights)
        first, _, last = model.layers
        assert strategy.experimental_split_to_logical_devices(first.kernel, [1, 2]) is first.kernel
        strategy.experimental_split_to_logical_devices(last.kernel, [2, 1])
        compile_(model)
    ds = tpsd.Dataset.from_tensor_slices((X, Y)).batch(16)
    got = model.fit(ds, epochs=3, verbose=0).history
    _assert_history(got, history)
    np.testing.assert_allclose(model.evaluate(ds, verbose=0), evaluated, rtol=1e-5, atol=1e-6)
    # each device keeps half of each split kernel, and so do the Adam slots Keras copied from it
    assert {s.data.shape for s in first.kernel.value.addressable_shards} == {(6, 8)}
    assert {s.data.shape for s in last.kernel.value.addressable_shards} == {(8, 2)}
    slots = [v for v in model.optimizer.variables if tuple(v.shape) == (6, 16)]
    assert len(slots) == 2 and all({s.data.shape for s in v.value.addressable_shards} == {(6, 8)} for v in slots)
    assert first.bias.value.sharding.is_fully_replicated


def test_fit_evaluate_predict_on_arrays_with_a_partial_last_batch_equal_single_device_keras(reference):
    weights, history, evaluated, predicted = reference
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build()
        model.set_weights(weights)
        compile_(model)
    # 100 rows in batches of 16: the last batch of 4 is not divisible by 8 replicas (Keras's own
    # DataParallel raises IndivisibleError here); it is given whole to every device instead
    got = model.fit(X, Y, batch_size=16, epochs=3, shuffle=False, verbose=0).history
    _assert_history(got, history)
    np.testing.assert_allclose(model.evaluate(X, Y, batch_size=16, verbose=0), evaluated, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.predict(X, batch_size=16, verbose=0), predicted, rtol=1e-5, atol=1e-5)


def test_an_unbatched_tpsd_dataset_names_the_fix():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = build()
        compile_(model)
    with pytest.raises(ValueError, match=r"unbatched elements.*\n.*\.batch\(global_batch_size\)"):
        model.fit(tpsd.Dataset.from_tensor_slices((X[:, 0], Y)), verbose=0)
