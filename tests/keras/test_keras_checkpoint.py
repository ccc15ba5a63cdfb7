"""tps.train.Checkpoint holds Keras models, optimizers and metrics by their variables."""

import jax
import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

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
    # Each replica of the 8 trained its own batch-norm statistics (TensorFlow's rule); the checkpoint
    # holds replica 0's, as TensorFlow's does. Once set_weights gives every replica those, the two agree.
    model.set_weights(model.get_weights())
    np.testing.assert_allclose(model2.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5, atol=1e-6)


GLOBAL_BATCH = 16
X = np.random.default_rng(3).normal(size=(96, 4)).astype("float32")
Y = np.random.default_rng(4).integers(0, 3, size=96).astype("int32")


def dataset():
    return tpsd.Dataset.from_tensor_slices((X, Y)).shuffle(96, seed=7).repeat().batch(GLOBAL_BATCH)


def custom_loop(strategy, seed):
    """TensorFlow's custom-training loop with a Keras model, Adam and a metric; (objects, step)."""
    with strategy.scope():
        keras.utils.set_random_seed(seed)
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(3)])
        optimizer = keras.optimizers.Adam(0.01)
        optimizer.build(model.trainable_variables)
        accuracy = keras.metrics.SparseCategoricalAccuracy()
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    iterator = iter(strategy.experimental_distribute_dataset(dataset()))

    def train_step(inputs):
        x, y = inputs
        with tps.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tps.nn.compute_average_loss(loss_object(y, logits), global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        accuracy.update_state(y, logits)
        return loss

    @tps.function
    def step(it):
        return strategy.reduce(tps.ReduceOp.SUM, strategy.run(train_step, args=(next(it),)), axis=None)

    objects = {"model": model, "optimizer": optimizer, "iterator": iterator, "accuracy": accuracy}
    return objects, lambda: float(step(iterator))


def test_a_keras_custom_loop_resumes_from_a_checkpoint_with_bit_identical_losses(tmp_path):
    strategy = tps.MirroredStrategy()
    objects, step = custom_loop(strategy, seed=0)
    for _ in range(3):
        step()
    path = tps.train.Checkpoint(**objects).save(str(tmp_path / "ck"))
    want = [step() for _ in range(4)]
    want_accuracy = float(objects["accuracy"].result())
    objects["iterator"].close()

    restored, resumed = custom_loop(strategy, seed=1)   # other initial weights: the checkpoint must win
    tps.train.Checkpoint(**restored).restore(path).assert_consumed()
    assert int(restored["optimizer"].iterations.numpy()) == 3
    got = [resumed() for _ in range(4)]
    assert got == want                                   # bit-identical
    assert float(restored["accuracy"].result()) == want_accuracy
    restored["iterator"].close()

    # onto 4 replicas, and with no strategy (the default one: one device)
    for strategy in (tps.MirroredStrategy(devices=jax.devices()[:4]), tps.get_strategy()):
        fewer, resumed = custom_loop(strategy, seed=1)
        tps.train.Checkpoint(**fewer).restore(path).assert_consumed()
        np.testing.assert_allclose([resumed() for _ in range(4)], want, rtol=1e-5)
        np.testing.assert_allclose(float(fewer["accuracy"].result()), want_accuracy, rtol=1e-6)
        fewer["iterator"].close()
