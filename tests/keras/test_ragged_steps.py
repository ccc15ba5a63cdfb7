"""tps.GradientTape on ragged steps: a partial last batch inside strategy.run and tps.function.

20 examples in global batches of 8 give two full steps and one of 4, which
leaves some replicas with no examples. The reference is one device computing
the same loss (TensorFlow's ``compute_average_loss`` rule: the per-example
losses summed and divided by the *global* batch size, also on the last step).
"""

import jax
import jax.numpy as jnp
import keras
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

GLOBAL_BATCH = 8
X = np.random.default_rng(0).normal(size=(20, 4)).astype("float32")
Y = np.random.default_rng(1).integers(0, 3, size=20).astype("int32")
T = (X @ np.array([1.0, -2.0, 0.5, 3.0], "float32") + 1.0).astype("float32")


def batches(n=20):
    return [(X[i:i + GLOBAL_BATCH], Y[i:i + GLOBAL_BATCH], T[i:i + GLOBAL_BATCH]) for i in range(0, n, GLOBAL_BATCH)]


def linear_reference(lr=0.1):
    """Float64 NumPy: SGD on sum((x w + b - t)^2) / GLOBAL_BATCH, the same batches."""
    w, b, losses = np.zeros(4), 0.0, []
    for x, _, t in batches():
        err = x.astype(np.float64) @ w + b - t
        losses.append(float((err ** 2).sum() / GLOBAL_BATCH))
        w = w - lr * 2 * x.T @ err / GLOBAL_BATCH
        b = b - lr * 2 * err.sum() / GLOBAL_BATCH
    return losses, w, b


@pytest.mark.parametrize("where", ["run", "function"])
def test_the_tape_on_a_partial_last_batch_of_tps_variables_equals_one_device(where):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        w = tps.Variable(jnp.zeros((4,)))
        b = tps.Variable(0.0)

    def step(x, y, t):
        del y
        with tps.GradientTape() as tape:
            per_example = (x @ w.read_value() + b.read_value() - t) ** 2
            loss = tps.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
        gw, gb = tape.gradient(loss, [w, b])
        ctx = tps.get_replica_context()
        w.assign_sub(0.1 * ctx.all_reduce("SUM", gw))
        b.assign_sub(0.1 * ctx.all_reduce("SUM", gb))
        return loss

    def distributed(inputs):
        return strategy.reduce(tps.ReduceOp.SUM, strategy.run(step, args=inputs), axis=None)

    if where == "function":
        distributed = tps.function(distributed)
    ds = tpsd.Dataset.from_tensor_slices((X, Y, T)).batch(GLOBAL_BATCH)
    dist = strategy.experimental_distribute_dataset(ds)
    steps = list(dist)
    assert [int(sum(np.shape(v)[0] for v in strategy.experimental_local_results(s[0]))) for s in steps] == [8, 8, 4]
    got = [float(distributed(s)) for s in steps]
    want, want_w, want_b = linear_reference()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(w.numpy(), want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(float(b.numpy()), want_b, rtol=1e-5, atol=1e-6)


def create_model():
    keras.utils.set_random_seed(5)
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(6, activation="tanh"), keras.layers.Dense(3)])


def keras_reference(weights):
    model = create_model()
    model.set_weights(weights)
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)
    per_example = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
    ov = [v.value for v in optimizer.variables]
    losses = []
    for x, y, _ in batches():
        def loss_fn(tv, x=x, y=y):
            logits, _ = model.stateless_call(tv, ntv, x, training=True)
            return jnp.sum(per_example(y, logits)) / GLOBAL_BATCH

        value, grads = jax.value_and_grad(loss_fn)(tv)
        tv, ov = optimizer.stateless_apply(ov, grads, tv)
        losses.append(float(value))
    return losses, [np.asarray(v) for v in tv]


@pytest.mark.parametrize("where", ["run", "function"])
def test_a_keras_model_trained_with_the_tape_on_a_partial_last_batch_equals_one_device(where):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = create_model()
        optimizer = keras.optimizers.SGD(0.1)
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        accuracy = keras.metrics.SparseCategoricalAccuracy()
    weights = [w.numpy() for w in model.weights]

    def train_step(inputs):
        images, labels, _ = inputs
        with tps.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = tps.nn.compute_average_loss(loss_object(labels, predictions), global_batch_size=GLOBAL_BATCH)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        accuracy.update_state(labels, predictions)
        return loss

    def distributed(inputs):
        return strategy.reduce(tps.ReduceOp.SUM, strategy.run(train_step, args=(inputs,)), axis=None)

    if where == "function":
        distributed = tps.function(distributed)
    ds = tpsd.Dataset.from_tensor_slices((X, Y, T)).batch(GLOBAL_BATCH)
    got = [float(distributed(s)) for s in strategy.experimental_distribute_dataset(ds)]
    want, want_weights = keras_reference(weights)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for v, w in zip(model.trainable_variables, want_weights):
        np.testing.assert_allclose(v.numpy(), w, rtol=1e-5, atol=1e-6, err_msg=v.path)
    assert int(optimizer.iterations.numpy()) == 3
    assert float(accuracy.count.numpy()) == 20      # every example counted once, none padded in
