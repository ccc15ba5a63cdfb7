"""Keras callbacks in ``fit`` under a strategy, and Keras's own saving, behave as in single-device Keras.

ModelCheckpoint, BackupAndRestore (an interrupted ``fit`` resumes exactly),
LearningRateScheduler and TensorBoard (when TensorFlow is installed, which its
writer needs); ``save_weights``/``load_weights``, ``model.save`` and
``keras.models.load_model`` inside and outside the scope.
"""

import jax
import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

X = np.random.default_rng(0).normal(size=(60, 6)).astype("float32")
Y = (X[:, 0] - X[:, 2] > 0).astype("int32")


def build(seed=1):
    keras.utils.set_random_seed(seed)
    return keras.Sequential([keras.Input((6,)), keras.layers.Dense(12, activation="relu"),
                             keras.layers.Dense(2)])


def compiled(strategy=None, seed=1):
    def make():
        model = build(seed)
        model.compile(optimizer=keras.optimizers.Adam(0.01),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=[keras.metrics.SparseCategoricalAccuracy()])
        return model

    if strategy is None:
        return make()
    with strategy.scope():
        return make()


def dataset():
    return tpsd.Dataset.from_tensor_slices((X, Y)).batch(16)   # 3 full batches and one of 12


def assert_history(got, want, epochs=None):
    for key in want:
        expected = want[key] if epochs is None else [want[key][e] for e in epochs]
        np.testing.assert_allclose(got[key], expected, rtol=1e-5, atol=1e-6, err_msg=key)


def assert_same_weights(a, b, rtol=1e-6):
    for x, y in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=1e-7)


class Interrupt(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            raise RuntimeError("preempted")


def test_backup_and_restore_resumes_an_interrupted_fit_exactly(tmp_path):
    strategy = tps.MirroredStrategy()
    whole = compiled(strategy)
    want = whole.fit(dataset(), epochs=4, verbose=0).history

    interrupted = compiled(strategy)
    backup = str(tmp_path / "backup")
    with pytest.raises(RuntimeError, match="preempted"):
        interrupted.fit(dataset(), epochs=4, verbose=0,
                        callbacks=[keras.callbacks.BackupAndRestore(backup), Interrupt()])
    resumed = compiled(strategy, seed=2)          # other initial weights: the backup must win
    got = resumed.fit(dataset(), epochs=4, verbose=0, callbacks=[keras.callbacks.BackupAndRestore(backup)])
    assert got.epoch == [2, 3]
    assert_history(got.history, want, epochs=[2, 3])
    assert_same_weights(resumed, whole)
    assert int(resumed.optimizer.iterations.numpy()) == int(whole.optimizer.iterations.numpy()) == 16
    assert resumed.layers[0].kernel.__dict__["_tps_state"] is not None


def test_model_checkpoint_and_learning_rate_scheduler_equal_single_device_keras(tmp_path):
    def callbacks(directory):
        return [keras.callbacks.ModelCheckpoint(str(directory / "e{epoch}.weights.h5"), save_weights_only=True),
                keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.02 * 0.5 ** epoch)]

    single = compiled()
    want = single.fit(X, Y, batch_size=16, epochs=3, shuffle=False, verbose=0,
                      callbacks=callbacks(tmp_path / "one")).history
    strategy = tps.MirroredStrategy()
    model = compiled(strategy)
    got = model.fit(dataset(), epochs=3, verbose=0, callbacks=callbacks(tmp_path)).history
    assert_history(got, want)
    np.testing.assert_allclose(got["learning_rate"], [0.02, 0.01, 0.005], rtol=1e-6)
    assert sorted(p.name for p in tmp_path.glob("*.weights.h5")) == ["e1.weights.h5", "e2.weights.h5", "e3.weights.h5"]
    plain = compiled()                             # no strategy: one device
    plain.optimizer.build(plain.trainable_variables)   # its slots must exist to be loaded (Keras's rule)
    plain.load_weights(str(tmp_path / "e3.weights.h5"))
    assert_same_weights(plain, model)
    for a, b in zip(plain.optimizer.variables, model.optimizer.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_tensorboard_writes_its_logs_under_a_strategy(tmp_path):
    pytest.importorskip("tensorflow")   # Keras's TensorBoard writer is tf.summary
    model = compiled(tps.MirroredStrategy())
    model.fit(dataset(), epochs=2, verbose=0, callbacks=[keras.callbacks.TensorBoard(str(tmp_path))])
    assert list((tmp_path / "train").glob("events.out.tfevents.*"))


def test_save_weights_and_load_weights_cross_between_a_strategy_and_one_device(tmp_path):
    strategy = tps.MirroredStrategy()
    model = compiled(strategy)
    model.fit(dataset(), epochs=2, verbose=0)
    model.save_weights(str(tmp_path / "s.weights.h5"))
    plain = compiled(seed=3)
    plain.load_weights(str(tmp_path / "s.weights.h5"))
    assert_same_weights(plain, model)
    plain.save_weights(str(tmp_path / "p.weights.h5"))
    again = compiled(strategy, seed=4)
    again.load_weights(str(tmp_path / "p.weights.h5"))
    assert_same_weights(again, model)
    kernel = again.layers[0].kernel.value
    assert len(kernel.sharding.device_set) == jax.device_count() and kernel.sharding.is_fully_replicated


def test_a_saved_model_loaded_inside_the_scope_is_distributed_and_outside_runs_on_one_device(tmp_path):
    strategy = tps.MirroredStrategy()
    model = compiled(strategy)
    model.fit(dataset(), epochs=2, verbose=0)
    path = str(tmp_path / "model.keras")
    model.save(path)
    want = model.predict(X, verbose=0)

    outside = keras.models.load_model(path)
    assert outside.layers[0].kernel.__dict__["_tps_state"]._strategy is tps.get_strategy()   # the default one
    assert len(outside.layers[0].kernel.value.sharding.device_set) == 1
    np.testing.assert_allclose(outside.predict(X, verbose=0), want, rtol=1e-5, atol=1e-6)

    with strategy.scope():
        inside = keras.models.load_model(path)
    kernel = inside.layers[0].kernel
    assert kernel.__dict__["_tps_state"]._strategy is strategy   # not the default one, as outside
    assert len(kernel.value.sharding.device_set) == jax.device_count()
    assert all(v.__dict__.get("_tps_state") is not None for v in inside.optimizer.variables)
    np.testing.assert_allclose(inside.predict(dataset(), verbose=0), want, rtol=1e-5, atol=1e-6)
    # both go on training alike: the distributed one over the tpsd pipeline, the other one on one device
    got = inside.fit(dataset(), epochs=1, verbose=0).history
    expected = outside.fit(X, Y, batch_size=16, shuffle=False, epochs=1, verbose=0).history
    assert_history(got, expected)
    assert_same_weights(inside, outside, rtol=1e-5)
