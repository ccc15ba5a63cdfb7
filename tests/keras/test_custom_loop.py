"""Keras models in strategy.run / tps.function with tps.GradientTape, Keras optimizers and metrics.

The loop is TensorFlow's custom-training tutorial ("Custom training with
tf.distribute.Strategy"), renamed; the reference is one device with jax.grad.
"""

import jax
import jax.numpy as jnp
import keras
import numpy as np

import tpustrategy as tps
import tpustrategy.data as tpsd

GLOBAL_BATCH = 16
X = np.random.default_rng(1).normal(size=(64, 8)).astype("float32")
Y = (np.abs(X[:, :3]).argmax(1)).astype("int32")


def create_model():
    keras.utils.set_random_seed(3)
    # the tutorial's model shape (no BatchNorm: per-replica batch statistics differ from one device's)
    return keras.Sequential([keras.Input((8,)), keras.layers.Dense(32, activation="relu"),
                             keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)])


def reference_losses(weights, steps):
    """One device: the same model, the same global batches, plain Keras stateless calls and jax.grad."""
    model = create_model()
    model.set_weights(weights)
    optimizer = keras.optimizers.SGD(0.1)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]
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
    return losses, tv


def test_the_custom_training_tutorial_with_a_keras_model_equals_one_device():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = create_model()
        optimizer = keras.optimizers.SGD(0.1)
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)
        train_accuracy = keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")

    def compute_loss(labels, predictions):
        per_example_loss = loss_object(labels, predictions)
        return tps.nn.compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH)

    def train_step(inputs):
        images, labels = inputs
        with tps.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = compute_loss(labels, predictions)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        train_accuracy.update_state(labels, predictions)
        return loss

    @tps.function
    def distributed_train_step(dataset_inputs):
        per_replica_losses = strategy.run(train_step, args=(dataset_inputs,))
        return strategy.reduce(tps.ReduceOp.SUM, per_replica_losses, axis=None)

    weights = [w.numpy() for w in model.weights]
    want, want_trainable = reference_losses(weights, 8)
    ds = tpsd.Dataset.from_tensor_slices((X, Y)).repeat().batch(GLOBAL_BATCH)
    it = iter(strategy.experimental_distribute_dataset(ds))
    got = [float(distributed_train_step(next(it))) for _ in range(8)]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for v, w in zip(model.trainable_variables, want_trainable):
        np.testing.assert_allclose(v.numpy(), np.asarray(w), rtol=1e-5, atol=1e-6)
    assert int(optimizer.iterations.numpy()) == 8
    assert 0.0 <= float(train_accuracy.result()) <= 1.0
    # the metric saw every example of the 8 steps exactly once
    assert float(train_accuracy.count.numpy()) == 8 * GLOBAL_BATCH


def test_a_keras_model_in_strategy_run_sees_the_current_weights_every_call():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        layer = keras.layers.Dense(2)
        layer.build((None, 3))
    x = np.ones((8, 3), "float32")
    dist = next(iter(strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensors(x))))
    first = strategy.run(lambda v: layer(v), args=(dist,))
    layer.kernel.assign(np.zeros((3, 2), "float32"))
    layer.bias.assign(np.full((2,), 5.0, "float32"))
    second = strategy.run(lambda v: layer(v), args=(dist,))
    local = strategy.experimental_local_results
    assert not np.allclose(np.concatenate(local(first)), 5.0)
    np.testing.assert_array_equal(np.concatenate(local(second)), np.full((8, 2), 5.0))


def test_batchnorm_moving_statistics_are_the_mean_over_replicas():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        bn = keras.layers.BatchNormalization(momentum=0.5)
        bn.build((None, 2))
    x = np.arange(32, dtype="float32").reshape(16, 2)
    dist = next(iter(strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensors(x))))
    strategy.run(lambda v: bn(v, training=True), args=(dist,))
    # each replica's batch mean, averaged over replicas: the global mean (equal piece sizes)
    np.testing.assert_allclose(bn.moving_mean.numpy(), 0.5 * x.mean(0), rtol=1e-6)
    assert bn.moving_mean.__dict__["_tps_state"].aggregation is tps.VariableAggregation.MEAN


def test_keras_metrics_updated_in_replicas_give_the_global_result():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        mean = keras.metrics.Mean()
    x = np.arange(16, dtype="float32")
    dist = next(iter(strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensors(x))))
    strategy.run(lambda v: mean.update_state(v), args=(dist,))
    assert float(mean.result()) == x.mean()
    assert mean.total.__dict__["_tps_state"]._kind == "sync_on_read"
    mean.reset_state()
    assert float(mean.result()) == 0.0


def test_an_optimizer_first_built_inside_the_replica_function_all_reduces_gradients():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        w = keras.Variable(np.zeros((2,), "float32"))
        optimizer = keras.optimizers.SGD(1.0)

    def step(g):
        optimizer.apply_gradients([(g, w)])

    grads = strategy.experimental_distribute_values_from_function(
        lambda ctx: jnp.full((2,), float(ctx.replica_id_in_sync_group + 1)))
    strategy.run(step, args=(grads,))
    r = strategy.num_replicas_in_sync
    np.testing.assert_allclose(w.numpy(), -np.full(2, r * (r + 1) / 2))   # the SUM of the replicas' gradients 1..r


def test_adam_slots_built_in_fit_or_in_a_replica_function_are_the_strategys():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        model = create_model()
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    model.fit(X, np.zeros((64, 3), "float32"), batch_size=16, verbose=0)
    for v in model.optimizer.variables:
        assert v.__dict__.get("_tps_state") is not None and len(v.value.sharding.device_set) == jax.device_count()


def test_keras_support_fails_loudly_when_a_keras_seam_moves():
    from tpustrategy._src.keras import patches

    patches.check_seams()


def test_keras_objects_made_outside_any_scope_work_in_tps_function_on_one_device():
    with tps.MirroredStrategy().scope():
        pass                                   # a scope installs the Keras support once
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
    accuracy = keras.metrics.SparseCategoricalAccuracy()
    x, y = np.ones((5, 4), "float32"), np.ones(5, "int32")

    @tps.function
    def eval_step(images, labels):
        predictions = model(images, training=False)
        accuracy.update_state(labels, predictions)
        return predictions

    first = np.asarray(eval_step(x, y))
    eval_step(x, y)
    assert float(accuracy.count.numpy()) == 10.0          # updated every call, no leaked tracer
    right_at_first = 5 * int(first[0].argmax() == 1)
    model.layers[0].kernel.assign(np.zeros((4, 3), "float32"))
    model.layers[0].bias.assign(np.array([0.0, 7.0, 0.0], "float32"))
    np.testing.assert_array_equal(np.asarray(eval_step(x, y)), np.tile([0.0, 7.0, 0.0], (5, 1)))  # not stale
    assert float(accuracy.count.numpy()) == 15.0
    np.testing.assert_allclose(float(accuracy.result()), (2 * right_at_first + 5) / 15, rtol=1e-6)
    assert len(model.layers[0].kernel.value.sharding.device_set) == 1
