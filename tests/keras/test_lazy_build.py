"""Keras models built lazily under a strategy equal the same lazily built model on one device.

TensorFlow's custom-training tutorial builds its model at the first call inside the
distributed step; a model created (and compiled) in ``strategy.scope()`` may be built later by
``fit`` / ``predict`` / a first call outside the scope. Weights created in a traced step are the
strategy's variables, initialised once (TensorFlow lifts a ``tf.function``'s initializers).
"""

import jax
import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

GLOBAL_BATCH = 16
X = np.random.default_rng(1).normal(size=(64, 8)).astype("float32")
Y = (np.abs(X[:, :3]).argmax(1)).astype("int32")


def sequential():
    keras.utils.set_random_seed(3)
    return keras.Sequential([keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])


class Subclassed(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = keras.layers.Dense(16, activation="relu")
        self.out = keras.layers.Dense(3)

    def call(self, x, training=False):
        return self.out(self.hidden(x))


def subclassed():
    keras.utils.set_random_seed(3)
    return Subclassed()


def assert_the_strategys(variable, strategy):
    """Built under ``strategy``: its variable (not the default strategy's), replicated on its devices."""
    assert variable.__dict__["_tps_state"]._strategy is strategy
    sharding = variable.value.sharding
    assert len(sharding.device_set) == strategy.num_replicas_in_sync == jax.device_count()
    assert sharding.is_fully_replicated


def one_device(make, steps):
    """The same model built at its first eager call on one device, trained by Keras stateless calls."""
    model = make()
    model(X[:1])
    initial = model.get_weights()
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    tv, ntv = [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables]
    ov = [v.value for v in optimizer.variables]
    losses = []
    for i in range(steps):
        x, y = X[(i * GLOBAL_BATCH) % 64:][:GLOBAL_BATCH], Y[(i * GLOBAL_BATCH) % 64:][:GLOBAL_BATCH]

        def loss(tv, ntv, x=x, y=y):
            out, ntv = model.stateless_call(tv, ntv, x, training=True)
            return loss_fn(y, out), ntv

        (value, ntv), grads = jax.value_and_grad(loss, has_aux=True)(tv, ntv)
        tv, ov = optimizer.stateless_apply(ov, grads, tv)
        losses.append(float(value))
    return initial, losses, [np.asarray(v) for v in tv]


def tutorial_loop(strategy, model, steps):
    with strategy.scope():
        optimizer = keras.optimizers.SGD(0.1)
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def train_step(inputs):
        images, labels = inputs
        with tps.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = tps.nn.compute_average_loss(loss_object(labels, predictions), global_batch_size=GLOBAL_BATCH)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss

    @tps.function
    def distributed_train_step(dataset_inputs):
        per_replica_losses = strategy.run(train_step, args=(dataset_inputs,))
        return strategy.reduce(tps.ReduceOp.SUM, per_replica_losses, axis=None)

    ds = tpsd.Dataset.from_tensor_slices((X, Y)).repeat().batch(GLOBAL_BATCH)
    it = iter(strategy.experimental_distribute_dataset(ds))
    return [float(distributed_train_step(next(it))) for _ in range(steps)], optimizer


@pytest.mark.parametrize("make", [sequential, subclassed], ids=["sequential", "subclassed"])
def test_a_model_built_at_its_first_call_in_the_distributed_step_equals_one_device(make):
    _, want, want_trainable = one_device(make, 4)
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = make()
    assert not model.built
    got, optimizer = tutorial_loop(strategy, model, 4)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for v, w in zip(model.trainable_variables, want_trainable):
        np.testing.assert_allclose(v.numpy(), w, rtol=1e-5, atol=1e-6)
        assert_the_strategys(v, strategy)
    assert int(optimizer.iterations.numpy()) == 4


def test_a_module_style_wrapper_creating_a_variable_from_a_traced_value_is_initialised_once():
    strategy = tps.MirroredStrategy()

    class Linear:   # tf.Module style: the weight is made at the first call, from the input's shape
        def __init__(self):
            self.w = None

        def __call__(self, x):
            if self.w is None:
                self.w = keras.Variable(keras.ops.ones((x.shape[-1], 3)) * 0.5, name="w")
            return keras.ops.matmul(x, self.w)

    layer = Linear()

    def step(x):
        return layer(x)

    @tps.function
    def run(x):
        return strategy.run(step, args=(x,))

    ds = tpsd.Dataset.from_tensor_slices(X).batch(GLOBAL_BATCH)
    it = iter(strategy.experimental_distribute_dataset(ds))
    first = strategy.gather(run(next(it)), axis=0)
    np.testing.assert_allclose(np.asarray(first), X[:16] @ np.full((8, 3), 0.5, np.float32), rtol=1e-5)
    np.testing.assert_allclose(layer.w.numpy(), np.full((8, 3), 0.5), rtol=0)
    assert_the_strategys(layer.w, strategy)
    second = strategy.gather(run(next(it)), axis=0)   # the same variable, not made again
    np.testing.assert_allclose(np.asarray(second), X[16:32] @ np.full((8, 3), 0.5, np.float32), rtol=1e-5)


def _compiled_lazy(strategy=None):
    def make():
        model = sequential()
        model.compile(optimizer=keras.optimizers.SGD(0.1),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    if strategy is None:
        return make()
    with strategy.scope():
        return make()


def test_a_model_compiled_in_the_scope_and_built_by_fit_outside_it_is_built_under_its_strategy():
    want = _compiled_lazy().fit(X, Y, batch_size=16, epochs=2, shuffle=False, verbose=0).history
    strategy = tps.MirroredStrategy()
    model = _compiled_lazy(strategy)
    got = model.fit(tpsd.Dataset.from_tensor_slices((X, Y)).batch(16), epochs=2, verbose=0).history
    np.testing.assert_allclose(got["loss"], want["loss"], rtol=1e-5, atol=1e-6)
    assert_the_strategys(model.layers[0].kernel, strategy)


def test_a_model_created_in_the_scope_and_first_called_outside_it_is_the_strategys():
    reference = sequential()
    want = np.asarray(reference(X[:4]))
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = sequential()
    np.testing.assert_allclose(np.asarray(model(X[:4])), want, rtol=1e-6)
    predicted = model.predict(X, batch_size=16, verbose=0)
    np.testing.assert_allclose(predicted, np.asarray(reference(X)), rtol=1e-5, atol=1e-6)
    for v in model.weights:
        assert_the_strategys(v, strategy)
