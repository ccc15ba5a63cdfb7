"""Data-parallel training equals single-device training; both paths agree; ragged inputs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def _init(key):
    k1, k2 = jax.random.split(key)
    return {
        "w1": jax.random.normal(k1, (4, 16)) * 0.5,
        "b1": jnp.zeros(16),
        "w2": jax.random.normal(k2, (16, 1)) * 0.5,
        "b2": jnp.zeros(1),
    }


def _loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    pred = h @ params["w2"] + params["b2"]
    return jnp.mean((pred[:, 0] - y) ** 2)


def _batches(steps, global_batch, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        x = rng.normal(size=(global_batch, 4)).astype(np.float32)
        y = (x.sum(axis=1) + 0.1 * rng.normal(size=global_batch)).astype(np.float32)
        yield x, y


def _split(x, n):
    return tps.PerReplica(list(np.split(x, n)))


@pytest.mark.devices(8)
def test_ten_steps_of_data_parallel_sgd_equal_single_device_sgd():
    n, lr = 8, 0.1
    s = _strategy(n)
    params0 = _init(jax.random.PRNGKey(0))

    def replica_step(params, x, y):
        ctx = tps.get_replica_context()
        loss, grads = jax.value_and_grad(_loss)(params, x, y)
        grads = ctx.all_reduce("MEAN", grads)
        new = jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads)
        return new, ctx.all_reduce("MEAN", loss)

    params = params0
    ref = params0
    for x, y in _batches(10, 64):
        params, loss = s.run(replica_step, (params, _split(x, n), _split(y, n)))
        assert isinstance(params["w1"], tps.Mirrored)
        ref_loss, g = jax.value_and_grad(_loss)(ref, x, y)
        ref = jax.tree_util.tree_map(lambda p, g: p - lr * g, ref, g)
        assert float(loss.values[0]) == pytest.approx(float(ref_loss), rel=1e-5)
    for k in ref:
        np.testing.assert_allclose(np.asarray(params[k].values[0]), ref[k], rtol=1e-5, atol=1e-6)


@pytest.mark.devices(4)
def test_broadcast_inputs_give_per_replica_gradients():
    s = _strategy(4)
    w = jnp.float32(2.0)

    def fn(w, x):
        return jax.grad(lambda w: w * x)(w)

    x = tps.PerReplica([np.float32(i) for i in range(4)])
    g = s.run(fn, (w, x))
    assert [float(v) for v in g.values] == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.devices(4)
def test_compiled_and_eager_paths_agree_on_a_training_step():
    n = 4
    s = _strategy(n)
    params = _init(jax.random.PRNGKey(1))
    x, y = next(_batches(1, 32, seed=3))

    def step(params, x, y):
        ctx = tps.get_replica_context()
        loss, grads = jax.value_and_grad(_loss)(params, x, y)
        grads = ctx.all_reduce("SUM", grads)
        return grads, loss, ctx.all_gather(x[:1], axis=0)

    compiled = s.run(step, (params, _split(x, n), _split(y, n)))
    tps.config.run_functions_eagerly(True)
    try:
        eager = s.run(step, (params, _split(x, n), _split(y, n)))
    finally:
        tps.config.run_functions_eagerly(False)
    for a, b in zip(jax.tree_util.tree_leaves(s.experimental_local_results(compiled)),
                    jax.tree_util.tree_leaves(s.experimental_local_results(eager))):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


@pytest.mark.devices(4)
def test_ragged_per_replica_inputs_take_the_eager_path_and_match_hand_computed_values():
    s = _strategy(4)
    x = tps.PerReplica([np.arange(4.0), np.arange(4.0, 6.0), np.zeros(0), np.array([9.0])])
    w = jnp.float32(3.0)

    def fn(w, x):
        ctx = tps.get_replica_context()
        total, grad = jax.value_and_grad(lambda w: ctx.all_reduce("SUM", jnp.sum(w * x)))(w)
        return total, grad, x.shape[0]

    total, grad, count = s.run(fn, (w, x))
    expected_total = 3.0 * (np.arange(6.0).sum() + 9.0)
    assert [float(v) for v in total.values] == [expected_total] * 4
    # d/dw of replica r's own term is sum(x_r); the all-reduce's gradient sums the
    # replicas' upstream gradients (4 ones), so each replica's gradient is 4·sum(x_r).
    assert [float(v) for v in grad.values] == [4 * 6.0, 4 * 9.0, 0.0, 4 * 9.0]
    assert list(count.values) == [4, 2, 0, 1]
    assert float(s.reduce("MEAN", x, axis=0)) == pytest.approx((15.0 + 9.0) / 7)


@pytest.mark.devices(3)
def test_eager_path_runs_each_replica_on_its_own_device():
    s = _strategy(3)
    tps.config.run_functions_eagerly(True)
    try:
        out = s.run(lambda x: x + 1, (tps.PerReplica([np.ones(2)] * 3),))
    finally:
        tps.config.run_functions_eagerly(False)
    assert [next(iter(v.devices())) for v in out.values] == list(jax.devices()[:3])


def test_run_functions_eagerly_rejects_non_bools():
    with pytest.raises(TypeError, match="expects a bool"):
        tps.config.run_functions_eagerly(1)


@pytest.mark.devices(8)
@pytest.mark.timeout(240)
def test_two_thousand_consecutive_runs_with_an_all_reduce_do_not_deadlock():
    s = _strategy(8)

    def fn(x):
        return tps.get_replica_context().all_reduce("SUM", x)

    x = tps.PerReplica([np.float32(i) for i in range(8)])
    out = None
    for _ in range(2000):
        out = s.run(fn, (x,))
    assert float(out.values[0]) == 28.0


@pytest.mark.devices(8)
@pytest.mark.timeout(240)
def test_a_thousand_runs_each_followed_by_a_reduce_do_not_deadlock():
    s = _strategy(8)
    x = tps.PerReplica([np.float32(i) for i in range(8)])
    total = None

    def double(x):
        return x * 2.0

    for _ in range(1000):
        out = s.run(double, (x,))
        total = s.reduce("SUM", out, axis=None)
    assert float(total) == 56.0
