"""TensorFlow's ``tensorflow/python/distribute/zero_batch_test.py`` (eager cases), ported.

TensorFlow's file trains the TF1 ``tf.layers`` BatchNormalization, which TensorFlow 2.21
no longer exports; its Keras 3 layer is what TF 2 programs use, so the port trains
``keras.layers.BatchNormalization`` with ``tps.GradientTape`` and a Keras SGD optimizer.
On an empty batch TensorFlow 2.21 with Keras 3 gives exactly what we give (the same step run
under ``tf.distribute.OneDeviceStrategy`` with TensorFlow 2.21):
the loss is 0.0 every step, the moving statistics and ``gamma`` become NaN (Keras 3's
moments of an empty batch), ``beta`` stays 0, and inference returns an empty
``(0, 4, 4, 3)`` array. (The TF1 layer's fused kernel left its statistics unchanged.)
``testBNWithZeroBatchInputGraph`` is graph mode and has no meaning here.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402

keras = pytest.importorskip("keras")


def _bn_and_optimizer(strategy, shape=(None, 4, 4, 3), axis=3):
    with strategy.scope():
        bn = keras.layers.BatchNormalization(axis=axis, epsilon=1e-3, momentum=0.9)
        bn.build(shape)
        optimizer = keras.optimizers.SGD(0.01)
    return bn, optimizer


def _train_step_fn(bn, optimizer):
    def step_fn(inputs, targets):
        with tps.GradientTape() as tape:
            outputs = bn(inputs, training=True)
            loss = keras.losses.MeanSquaredError()(targets, outputs)
        grads = tape.gradient(loss, bn.trainable_variables)
        optimizer.apply_gradients(zip(grads, bn.trainable_variables))
        return loss
    return step_fn


def test_batch_norm_on_an_empty_batch_has_zero_loss_and_empty_inference():
    strategy = tps.OneDeviceStrategy(jax.devices()[0])
    rng = np.random.default_rng(0)
    inputs = rng.random((0, 4, 4, 3), dtype=np.float32) + 100
    targets = rng.random((0, 4, 4, 3), dtype=np.float32)
    bn, optimizer = _bn_and_optimizer(strategy)
    step_fn = _train_step_fn(bn, optimizer)

    @tps.function
    def train_step():
        return strategy.run(step_fn, args=(inputs, targets))

    for _ in range(5):
        assert float(np.asarray(train_step())) == 0.0
    # TensorFlow 2.21 + Keras 3, the same step: NaN statistics and gamma, beta unchanged.
    assert np.isnan(bn.moving_mean.numpy()).all()
    assert np.isnan(bn.moving_variance.numpy()).all()
    assert np.isnan(bn.gamma.numpy()).all()
    np.testing.assert_array_equal(bn.beta.numpy(), [0, 0, 0])

    @tps.function
    def test_step():
        return strategy.run(lambda x: bn(x, training=False), args=(inputs,))

    out = np.asarray(test_step())
    assert out.shape == (0, 4, 4, 3) and out.dtype == np.float32


def test_batch_norm_with_a_dynamic_last_batch_updates_its_statistics():
    # TensorFlow runs this case on one device only: with several replicas the 1-example last
    # batch leaves some replicas an empty piece, whose Keras 3 moments are NaN (as above).
    strategy = tps.OneDeviceStrategy(jax.devices()[0])
    rng = np.random.default_rng(1)
    inputs = rng.random((11, 4, 4, 3), dtype=np.float32) + 100
    targets = rng.random((11, 4, 4, 3), dtype=np.float32)
    dataset = tpsd.Dataset.from_tensor_slices((inputs, targets)).batch(10, drop_remainder=False).repeat()
    iterator = iter(strategy.experimental_distribute_dataset(dataset))
    bn, optimizer = _bn_and_optimizer(strategy, axis=-1)
    step_fn = _train_step_fn(bn, optimizer)

    @tps.function
    def train_step(it):
        return strategy.run(lambda batch: step_fn(*batch), args=(next(it),))

    for _ in range(6):  # three epochs of a 10-example and a 1-example batch
        train_step(iterator)
    for value, initial in ((bn.moving_mean, 0.0), (bn.moving_variance, 1.0), (bn.gamma, 1.0), (bn.beta, 0.0)):
        got = value.numpy()
        assert np.isfinite(got).all()
        assert not np.allclose(got, initial)


def test_batch_norm_dynamic_batch_on_one_device_equals_keras_without_a_strategy():
    rng = np.random.default_rng(2)
    inputs = rng.random((11, 4, 4, 3), dtype=np.float32) + 100
    targets = rng.random((11, 4, 4, 3), dtype=np.float32)
    batches = [(inputs[:10], targets[:10]), (inputs[10:], targets[10:])] * 2

    keras.utils.set_random_seed(0)
    ref = keras.layers.BatchNormalization(axis=-1, epsilon=1e-3, momentum=0.9)
    ref.build((None, 4, 4, 3))
    ref_opt = keras.optimizers.SGD(0.01)
    for x, y in batches:
        def loss_fn(trainable, non_trainable, x=x, y=y):
            out, non_trainable = ref.stateless_call(trainable, non_trainable, x, training=True)
            return keras.losses.MeanSquaredError()(y, out), non_trainable
        trainable = [v.value for v in ref.trainable_variables]
        non_trainable = [v.value for v in ref.non_trainable_variables]
        (_, non_trainable), grads = jax.value_and_grad(loss_fn, has_aux=True)(trainable, non_trainable)
        ref_opt.apply_gradients(zip(grads, ref.trainable_variables))
        for v, new in zip(ref.non_trainable_variables, non_trainable):
            v.assign(new)

    strategy = tps.OneDeviceStrategy(jax.devices()[0])
    bn, optimizer = _bn_and_optimizer(strategy, axis=-1)
    step_fn = _train_step_fn(bn, optimizer)
    for x, y in batches:
        strategy.run(step_fn, args=(x, y))
    for ours, theirs in zip(bn.weights, ref.weights):
        np.testing.assert_allclose(np.asarray(ours.numpy()), np.asarray(theirs.numpy()), rtol=1e-5, atol=1e-6)
