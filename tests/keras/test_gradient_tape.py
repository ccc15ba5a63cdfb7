"""tps.GradientTape: TensorFlow's tape surface over traced programs."""

import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.tape import jaxpr_slice


def _per_replica(strategy, fn):
    return strategy.experimental_distribute_values_from_function(lambda ctx: fn(ctx.replica_id_in_sync_group))


def test_the_tape_gives_each_replica_its_own_gradient_in_run_and_in_function():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        w = tps.Variable(jnp.ones((3,)))
        b = tps.Variable(2.0)

    def step(x):
        with tps.GradientTape() as tape:
            y = jnp.sum(jnp.sin(x * w)) + b * b
        return tape.gradient(y, {"w": w, "b": b})

    x = _per_replica(strategy, lambda r: jnp.full((3,), float(r + 1)))
    for grads in (strategy.run(step, (x,)), tps.function(lambda x: strategy.run(step, (x,)))(x)):
        per_replica = strategy.experimental_local_results(grads["w"])
        assert len(per_replica) == strategy.num_replicas_in_sync
        for r, g in enumerate(per_replica):
            x_r = r + 1.0
            np.testing.assert_allclose(g, x_r * np.cos(x_r * np.ones(3)), rtol=1e-6)   # d/dw sum(sin(x w)) = x cos(x w)
        for g in strategy.experimental_local_results(grads["b"]):
            np.testing.assert_allclose(g, 4.0)


def test_gradients_through_an_all_reduce_follow_tensorflow():
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        w = tps.Variable(1.0)

    def step():
        with tps.GradientTape() as tape:
            total = tps.get_replica_context().all_reduce("SUM", 3.0 * w.read_value())
        return tape.gradient(total, w)

    g = strategy.run(step)
    r = strategy.num_replicas_in_sync
    # the all-reduce's transpose: every replica's cotangent summed
    np.testing.assert_allclose([float(v) for v in strategy.experimental_local_results(g)], [3.0 * r] * r)


def test_watch_persistent_and_unconnected_sources():
    strategy = tps.MirroredStrategy(devices=jax.devices()[:2])
    with strategy.scope():
        w = tps.Variable(3.0)
        frozen = tps.Variable(1.0, trainable=False)
        unused = tps.Variable(5.0)

    def step(x):
        with tps.GradientTape(persistent=True) as tape:
            tape.watch(x)
            y = x * x * w + frozen
        gx = tape.gradient(y, x)
        gw, gf, gu = tape.gradient(y, [w, frozen, unused])
        zero = tape.gradient(y, unused, unconnected_gradients="zero")
        return gx, gw, gf is None, gu is None, zero

    gx, gw, frozen_none, unused_none, zero = strategy.run(step, (jnp.asarray(2.0),))
    local = strategy.experimental_local_results
    assert float(local(gx)[0]) == 12.0 and float(local(gw)[-1]) == 4.0
    assert frozen_none and unused_none          # not watched / not connected: None, as in TF
    assert float(local(zero)[0]) == 0.0


def test_a_non_persistent_tape_refuses_a_second_gradient():
    strategy = tps.MirroredStrategy(devices=jax.devices()[:2])
    with strategy.scope():
        w = tps.Variable(3.0)

    def step():
        with tps.GradientTape() as tape:
            y = w * w
        tape.gradient(y, w)
        tape.gradient(y, w)

    with pytest.raises(RuntimeError, match="non-persistent GradientTape"):
        strategy.run(step)


def test_a_tape_in_eager_code_records_and_differentiates():
    w = tps.Variable(2.0)
    with tps.GradientTape() as tape:
        y = w * w
    assert float(y) == 4.0                     # eager values are concrete inside and after the block
    assert float(tape.gradient(y, w)) == 4.0


def test_side_effects_inside_the_tape_happen_once():
    strategy = tps.MirroredStrategy(devices=jax.devices()[:2])
    with strategy.scope():
        w = tps.Variable(1.0)
        counter = tps.Variable(0.0, aggregation=tps.VariableAggregation.ONLY_FIRST_REPLICA)

    def step():
        with tps.GradientTape() as tape:
            counter.assign_add(1.0)
            y = w * 2.0
        return tape.gradient(y, w)

    strategy.run(step)
    assert float(counter.numpy()) == 1.0


def test_the_jax_internals_slice_a_traced_graph():
    def f(a, b):
        c = jnp.sin(a) * b
        fn, connected = jaxpr_slice.slice_function([c], [a])
        assert connected == [True]
        _, vjp = jax.vjp(fn, a)
        return vjp([jnp.ones_like(c)])[0]

    out = jax.make_jaxpr(f)(0.5, 3.0)
    assert jax.core.eval_jaxpr(out.jaxpr, out.consts, 0.5, 3.0)[0] == pytest.approx(3.0 * np.cos(0.5))


def test_import_tpustrategy_and_a_plain_run_do_not_import_keras():
    code = ("import os; os.environ['XLA_FLAGS']='--xla_force_host_platform_device_count=2'\n"
            "import sys, jax.numpy as jnp, tpustrategy as tps\n"
            "s = tps.MirroredStrategy()\n"
            "with s.scope(): v = tps.Variable(1.0)\n"
            "s.run(lambda: v.read_value() * 2)\n"
            "with tps.GradientTape(): pass\n"
            "print('keras' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "False", out.stderr


def _reference_grads(params, x, y):
    def loss(ps):
        w1, b1, w2, b2 = ps
        logits = jnp.tanh(x @ w1 + b1) @ w2 + b2
        return jnp.mean(-jax.nn.log_softmax(logits)[jnp.arange(len(y)), y])

    return jax.grad(loss)([jnp.asarray(p) for p in params])


@pytest.mark.parametrize("where", ["mirrored", "default"])
def test_an_eager_tape_over_a_keras_model_equals_jax_grad(where):
    """TensorFlow's eager pattern: loss_fn(model(x)) under the tape, outside tps.function / strategy.run."""
    keras = pytest.importorskip("keras")
    strategy = tps.MirroredStrategy(devices=jax.devices()[:2]) if where == "mirrored" else tps.get_strategy()
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                                  keras.layers.Dense(2)])
    x = jnp.asarray(np.arange(12, dtype=np.float32).reshape(4, 3) / 7)
    y = np.array([0, 1, 1, 0])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tps.GradientTape() as tape:
        loss = loss_fn(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    want = _reference_grads([v.numpy() for v in model.trainable_variables], x, y)
    assert len(grads) == 4
    for got, expected in zip(grads, want):
        assert float(jnp.abs(expected).max()) > 1e-4            # every weight has a real gradient
        np.testing.assert_allclose(np.asarray(got), np.asarray(expected), rtol=1e-5, atol=1e-6)

    # The step TensorFlow's eager loops take next: the weights move by exactly -lr * grad.
    before = [np.asarray(v.numpy()) for v in model.trainable_variables]
    with strategy.scope():
        optimizer = keras.optimizers.SGD(0.5)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    for v, b, g in zip(model.trainable_variables, before, want):
        np.testing.assert_allclose(np.asarray(v.numpy()), b - 0.5 * np.asarray(g), rtol=1e-5, atol=1e-6)


def test_an_eager_tape_over_a_keras_model_takes_numpy_inputs():
    # jnp.asarray of a NumPy batch inside the tape is a device array, as outside it (not a JAX
    # literal, which Keras refuses as a positional input); tpsd batches are NumPy.
    import keras

    x = np.linspace(-1, 1, 12, dtype="float32").reshape(4, 3)
    with tps.GradientTape():
        lifted = jnp.asarray(x)
    assert isinstance(lifted, jax.Array)
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    with tps.GradientTape() as tape:
        loss = jnp.sum(model(x) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    w, b = (np.asarray(v.value) for v in model.trainable_variables)
    want = jax.grad(lambda w, b: jnp.sum((x @ w + b) ** 2), argnums=(0, 1))(w, b)
    for g, r in zip(grads, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-6, atol=1e-6)


def test_an_eager_tape_gives_none_for_a_keras_weight_not_read_under_it():
    # TensorFlow: a variable the target does not depend on is unconnected (None, or zeros
    # with unconnected_gradients=ZERO).
    import keras

    strategy = tps.MirroredStrategy()
    with strategy.scope():
        keras.utils.set_random_seed(0)
        used = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        unused = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    x = np.ones((2, 3), "float32")
    with tps.GradientTape(persistent=True) as tape:
        loss = jnp.sum(used(x))
    grads = tape.gradient(loss, unused.trainable_variables)
    assert grads == [None, None]
    zeros = tape.gradient(loss, unused.trainable_variables, unconnected_gradients=tps.UnconnectedGradients.ZERO)
    assert [np.asarray(z).tolist() for z in zeros] == [[[0.0, 0.0]] * 3, [0.0, 0.0]]
    assert tape.gradient(loss, used.trainable_variables)[1].tolist() == [2.0, 2.0]
