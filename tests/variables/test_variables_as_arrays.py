"""A ``tps.Variable`` is an array to JAX: jnp / jax.nn / jax.lax functions and transformations.

The expectation for every call is the same function applied to the variable's value as a
NumPy-backed array; inside ``strategy.run`` and ``tps.function`` the variable is changed
between calls, so a value baked into a cached program would show as a stale result.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

W0 = np.arange(9, dtype=np.float32).reshape(3, 3) / 10.0
X = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)

CASES = {
    "jnp.matmul": lambda w: jnp.matmul(X, w),
    "jnp.dot": lambda w: jnp.dot(X, w),
    "jnp.sum": lambda w: jnp.sum(w),
    "jnp.tanh": lambda w: jnp.tanh(w),
    "jnp.einsum": lambda w: jnp.einsum("ij,jk->ik", X, w),
    "jnp.where": lambda w: jnp.where(w > 0.3, w, -w),
    "jnp.concatenate": lambda w: jnp.concatenate([w, w]),
    "jnp.linalg.norm": lambda w: jnp.linalg.norm(w),
    "jax.nn.relu": lambda w: jax.nn.relu(w - 0.4),
    "jax.nn.softmax": lambda w: jax.nn.softmax(w),
    "jax.lax.add": lambda w: jax.lax.add(w, w),
    "jax.lax.dot_general": lambda w: jax.lax.dot_general(X, w, (((1,), (0,)), ((), ()))),
    "jax.lax.broadcast": lambda w: jax.lax.broadcast(w, (2,)),
    "jax.lax.exp": lambda w: jax.lax.exp(w),
    "jax.lax.fori_loop": lambda w: jax.lax.fori_loop(0, 3, lambda i, c: c + w, jnp.zeros((3, 3))),
    "jax.lax.scan carry": lambda w: jax.lax.scan(lambda c, _: (c * 2, None), w, None, length=2)[0],
    "jax.lax.cond": lambda w: jax.lax.cond(True, lambda a: a * 3, lambda a: a, w),
    "jax.jit argument": lambda w: jax.jit(lambda a: a * 2 + 1)(w),
    "jax.grad": lambda w: jax.grad(lambda a: jnp.sum(jnp.tanh(a) ** 2))(w),
    "jax.vmap": lambda w: jax.vmap(lambda row: row @ X.T)(w),
    "jax.checkpoint": lambda w: jax.checkpoint(lambda a: jnp.sin(a))(w),
    "operator @": lambda w: X @ w,
    "w.T": lambda w: w.T,
}


def _reference(case, value):
    return np.asarray(CASES[case](jnp.asarray(value)))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_plain_variable_is_accepted_as_an_array(case):
    w = tps.Variable(W0)
    np.testing.assert_allclose(np.asarray(CASES[case](w)), _reference(case, W0), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_mirrored_variable_reads_its_current_value_inside_run_and_function(case):
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    with strategy.scope():
        w = tps.Variable(W0)
    np.testing.assert_allclose(np.asarray(CASES[case](w)), _reference(case, W0), rtol=1e-6, atol=1e-6)

    def replica_fn():
        return jnp.asarray(CASES[case](w))

    step = tps.function(lambda: strategy.run(replica_fn))
    for scale in (1.0, 2.0, -3.0):  # the cached programs must see every new value
        w.assign(W0 * scale)
        expected = _reference(case, W0 * scale)
        for got in (strategy.run(replica_fn), step()):
            for part in strategy.experimental_local_results(got):
                np.testing.assert_allclose(np.asarray(part), expected, rtol=1e-5, atol=1e-5)


def test_jax_grad_of_a_variable_inside_run_is_the_replica_gradient():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    with strategy.scope():
        w = tps.Variable(np.ones((3,), np.float32))
    xs = strategy.experimental_distribute_values_from_function(
        lambda ctx: jnp.full((3,), ctx.replica_id_in_sync_group + 1.0))

    def replica_fn(x):
        return jax.grad(lambda v: jnp.sum(jnp.dot(x, v) ** 2))(w)

    grads = strategy.experimental_local_results(strategy.run(replica_fn, args=(xs,)))
    for r, g in enumerate(grads):  # d/dv (x.v)^2 = 2 (x.v) x with x = (r+1) * ones
        x = np.full((3,), r + 1.0)
        np.testing.assert_allclose(np.asarray(g), 2 * x.dot(np.ones(3)) * x, rtol=1e-6)
        assert isinstance(g, jax.Array)


def test_variables_stay_leaves_of_jax_trees_so_tree_map_can_assign_them():
    params = {"a": tps.Variable(np.zeros(2, np.float32)), "b": tps.Variable(np.ones(3, np.float32))}
    assert jax.tree.leaves(params) == [params["a"], params["b"]]
    jax.tree.map(lambda v, u: v.assign(u), params, {"a": np.full(2, 5.0), "b": np.full(3, 7.0)})
    np.testing.assert_array_equal(params["a"].numpy(), [5.0, 5.0])
    grads = jax.grad(lambda p: jnp.sum(p["a"] * 2) + jnp.sum(p["b"] ** 2))(params)
    np.testing.assert_array_equal(np.asarray(grads["a"]), [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(grads["b"]), [14.0, 14.0, 14.0])


@pytest.mark.devices(4)
def test_sgd_with_jnp_matmul_in_a_function_equals_numpy_sgd():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    with strategy.scope():
        w = tps.Variable(np.zeros((3, 1), np.float32), aggregation=tps.VariableAggregation.MEAN)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    y = x @ np.array([[1.0], [-2.0], [0.5]], np.float32)
    xs = strategy.experimental_distribute_values_from_function(
        lambda ctx: x[2 * ctx.replica_id_in_sync_group: 2 * ctx.replica_id_in_sync_group + 2])
    ys = strategy.experimental_distribute_values_from_function(
        lambda ctx: y[2 * ctx.replica_id_in_sync_group: 2 * ctx.replica_id_in_sync_group + 2])

    def replica_step(xb, yb):
        grad = jax.grad(lambda v: jnp.mean((jnp.matmul(xb, v) - yb) ** 2))(w)
        w.assign_sub(0.1 * grad)

    step = tps.function(lambda a, b: strategy.run(replica_step, args=(a, b)))
    ref = np.zeros((3, 1), np.float32)
    for _ in range(5):
        step(xs, ys)
        grads = [2 * x[i:i + 2].T @ (x[i:i + 2] @ ref - y[i:i + 2]) / 2 for i in range(0, 8, 2)]
        ref = ref - 0.1 * np.mean(grads, axis=0)
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-5, atol=1e-6)


def test_invalid_synchronization_and_aggregation_use_tensorflows_text():
    with pytest.raises(ValueError, match=r"^Invalid variable synchronization mode: Invalid for variable: v\n"):
        tps.Variable(1.0, name="v", synchronization="Invalid")
    with pytest.raises(ValueError, match=r"^Invalid variable aggregation mode: Invalid for variable: v\n"):
        tps.Variable(1.0, name="v", aggregation="Invalid")
    assert tps.Variable(1.0, synchronization=3).synchronization is tps.VariableSynchronization.ON_READ
    assert tps.Variable(1.0, aggregation=2).aggregation is tps.VariableAggregation.MEAN


def test_a_constraint_is_applied_after_each_optimizer_step():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with strategy.scope():
        w = tps.Variable(np.array([0.5, -0.5], np.float32), constraint=lambda v: jnp.clip(v, 0.0, 1.0))
        opt = tps.optimizers.SGD(learning_rate=1.0)
    assert w.constraint is not None
    opt.apply_gradients([(np.array([-2.0, 0.25], np.float32), w)])  # 2.5, -0.75 before the clip
    np.testing.assert_allclose(w.numpy(), [1.0, 0.0])
    with pytest.raises(ValueError, match="`constraint` argument must be a callable"):
        tps.Variable(1.0, constraint=3)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        tps.Variable(1.0, regularizer=None)
    tps.Variable(1.0, validate_shape=True)  # TensorFlow's graph-mode options are accepted
