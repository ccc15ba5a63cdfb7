"""tps.optimizers on every device's replica take the same steps as plain optax on one device.

A linear model (two variables) is trained for several steps: each replica
scales its per-example losses with ``compute_average_loss`` and
``apply_gradients`` sums the replicas' gradients, which is the gradient of the
mean loss over the global batch that the single-device reference uses.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import tpustrategy as tps

RNG = np.random.default_rng(0)
W0 = RNG.normal(size=(4, 3)).astype(np.float32)
B0 = RNG.normal(size=(3,)).astype(np.float32)
X = RNG.normal(size=(6, 64, 4)).astype(np.float32)  # 6 steps of a global batch of 64
Y = RNG.normal(size=(6, 64, 3)).astype(np.float32)
STEPS = 6

CASES = {
    "sgd": (lambda: tps.optimizers.SGD(0.1), lambda: optax.sgd(0.1)),
    "momentum": (lambda: tps.optimizers.SGD(0.1, momentum=0.9), lambda: optax.sgd(0.1, momentum=0.9)),
    "nesterov": (lambda: tps.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
                 lambda: optax.sgd(0.1, momentum=0.9, nesterov=True)),
    "adam": (lambda: tps.optimizers.Adam(0.05), lambda: optax.adam(0.05, b1=0.9, b2=0.999, eps=1e-7)),
    "amsgrad": (lambda: tps.optimizers.Adam(0.05, amsgrad=True), lambda: optax.amsgrad(0.05, eps=1e-7)),
    "adamw": (lambda: tps.optimizers.AdamW(0.05),
              lambda: optax.adamw(0.05, b1=0.9, b2=0.999, eps=1e-7, weight_decay=0.004)),
    "adam_schedule": (lambda: tps.optimizers.Adam(optax.exponential_decay(0.1, 2, 0.5)),
                      lambda: optax.adam(optax.exponential_decay(0.1, 2, 0.5), eps=1e-7)),
    "optax_rmsprop": (lambda: tps.optimizers.Optimizer(optax.rmsprop(0.01)), lambda: optax.rmsprop(0.01)),
}


def per_example_loss(params, x, y):
    w, b = params
    return jnp.sum(jnp.square(x @ w + b - y), axis=-1)


def reference(make_tx, steps=STEPS):
    tx = make_tx()
    params = [jnp.asarray(W0), jnp.asarray(B0)]
    state = tx.init(params)
    for i in range(steps):
        grads = jax.grad(lambda p, i=i: jnp.mean(per_example_loss(p, X[i], Y[i])))(params)
        updates, state = tx.update(grads, state, params)
        params = optax.apply_updates(params, updates)
    return [np.asarray(p) for p in params]


def _model(strategy, make_optimizer):
    with strategy.scope():
        w, b = tps.Variable(W0, name="w"), tps.Variable(B0, name="b")
        optimizer = make_optimizer()
    return [w, b], optimizer


def _replica_step(variables, optimizer):
    def step(x, y):
        def loss_fn(values):
            return tps.nn.compute_average_loss(per_example_loss(values, x, y))

        loss, grads = jax.value_and_grad(loss_fn)([v.read_value() for v in variables])
        optimizer.apply_gradients(zip(grads, variables))
        return loss

    return step


def _split(strategy, a):
    """The global batch ``a`` split into one PerReplica component per replica (8, or 1 on --devices 1)."""
    return tps.PerReplica(list(np.split(a, strategy.num_replicas_in_sync)))


def _assert_matches(variables, expected):
    for v, e in zip(variables, expected):
        np.testing.assert_allclose(np.asarray(v.read_value()), e, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("case", list(CASES))
def test_steps_inside_run_equal_single_device_optax(case, path):
    make_optimizer, make_tx = CASES[case]
    strategy = tps.MirroredStrategy()
    variables, optimizer = _model(strategy, make_optimizer)
    step = _replica_step(variables, optimizer)
    for i in range(STEPS):
        strategy.run(step, args=(_split(strategy, X[i]), _split(strategy, Y[i])))
    _assert_matches(variables, reference(make_tx))
    assert int(optimizer.iterations) == STEPS


@pytest.mark.parametrize("case", list(CASES))
def test_steps_inside_tps_function_equal_single_device_optax(case):
    make_optimizer, make_tx = CASES[case]
    strategy = tps.MirroredStrategy()
    variables, optimizer = _model(strategy, make_optimizer)
    step = _replica_step(variables, optimizer)

    @tps.function
    def train_step(x, y):
        return strategy.reduce("SUM", strategy.run(step, args=(x, y)), axis=None)

    for i in range(STEPS):
        train_step(_split(strategy, X[i]), _split(strategy, Y[i]))
    _assert_matches(variables, reference(make_tx))
    assert int(optimizer.iterations) == STEPS


def test_several_steps_inside_one_tps_function_equal_single_device_optax():
    make_optimizer, make_tx = CASES["adam"]
    strategy = tps.MirroredStrategy()
    variables, optimizer = _model(strategy, make_optimizer)
    step = _replica_step(variables, optimizer)

    @tps.function
    def three_steps(xs, ys):
        for k in range(3):
            strategy.run(step, args=(xs[k], ys[k]))

    three_steps([_split(strategy, X[k]) for k in range(3)], [_split(strategy, Y[k]) for k in range(3)])
    three_steps([_split(strategy, X[k]) for k in range(3, 6)], [_split(strategy, Y[k]) for k in range(3, 6)])
    _assert_matches(variables, reference(make_tx))
    assert int(optimizer.iterations) == 6


def test_summed_replica_gradients_give_exactly_the_optax_update(path):
    # Small integer gradients: their sum over replicas is exact, so the updates must be equal.
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        v = tps.Variable(np.ones(4, np.float32))
        optimizer = tps.optimizers.SGD(0.5, momentum=0.5)
    grads = [np.arange(4, dtype=np.float32) * (r - 3) for r in range(strategy.num_replicas_in_sync)]
    for _ in range(3):
        strategy.run(lambda g: optimizer.apply_gradients([(g, v)]), args=(tps.PerReplica(grads),))
    tx, p = optax.sgd(0.5, momentum=0.5), jnp.ones(4)
    state = tx.init(p)
    for _ in range(3):
        updates, state = tx.update(jnp.asarray(sum(grads)), state, p)
        p = optax.apply_updates(p, updates)
    np.testing.assert_array_equal(np.asarray(v.read_value()), np.asarray(p))


def test_cross_replica_apply_gradients_applies_global_gradients_as_given():
    strategy = tps.MirroredStrategy()
    variables, optimizer = _model(strategy, CASES["adam"][0])
    for i in range(STEPS):
        grads = jax.grad(lambda p, i=i: jnp.mean(per_example_loss(p, X[i], Y[i])))(
            [v.read_value() for v in variables])
        with strategy.scope():
            optimizer.apply_gradients(zip(grads, variables))
    _assert_matches(variables, reference(CASES["adam"][1]))


def test_without_a_strategy_the_optimizer_is_plain_optax_eagerly_and_in_tps_function():
    variables, optimizer = [tps.Variable(W0), tps.Variable(B0)], tps.optimizers.Adam(0.05)

    def step(x, y):
        grads = jax.grad(lambda p: jnp.mean(per_example_loss(p, x, y)))([v.read_value() for v in variables])
        optimizer.apply_gradients(zip(grads, variables))

    compiled = tps.function(step)
    for i in range(STEPS):
        (compiled if i % 2 else step)(X[i], Y[i])
    _assert_matches(variables, reference(CASES["adam"][1]))
    assert all(v.strategy is None for v in optimizer.variables)


@pytest.mark.parametrize("make", [
    pytest.param(lambda: tps.OneDeviceStrategy("/cpu:0"), id="OneDeviceStrategy"),
    pytest.param(lambda: tps.MirroredStrategy(jax.devices()[:1]), id="Mirrored_one_device"),
])
def test_one_replica_strategies_equal_single_device_optax(make):
    strategy = make()
    variables, optimizer = _model(strategy, CASES["momentum"][0])
    step = _replica_step(variables, optimizer)

    @tps.function
    def train_step(x, y):
        return strategy.run(step, args=(x, y))

    for i in range(STEPS):
        if i % 2:
            train_step(X[i], Y[i])
        else:
            strategy.run(step, args=(X[i], Y[i]))
    _assert_matches(variables, reference(CASES["momentum"][1]))


@pytest.mark.parametrize("aggregation", ["SUM", "MEAN", "ONLY_FIRST_REPLICA"])
def test_variables_with_any_aggregation_get_the_same_update(aggregation, path):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        w = tps.Variable(W0, aggregation=aggregation)
        b = tps.Variable(B0, aggregation=aggregation)
        optimizer = tps.optimizers.SGD(0.1, momentum=0.9)
    step = _replica_step([w, b], optimizer)
    for i in range(STEPS):
        strategy.run(step, args=(_split(strategy, X[i]), _split(strategy, Y[i])))
    _assert_matches([w, b], reference(CASES["momentum"][1]))
    assert len({np.asarray(c).tobytes() for c in strategy.experimental_local_results(w)}) == 1
