"""Ragged steps (per-replica inputs of different shapes) run compiled, inside and outside tps.function."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.execution import eager


def _strategy(n):
    return tps.MirroredStrategy(devices=jax.devices()[:n])


@pytest.fixture
def no_eager(monkeypatch):
    """Fails the test if anything falls back to the eager (thread) path."""

    def refuse(*args, **kwargs):
        raise AssertionError("the eager path was used")

    monkeypatch.setattr(eager, "run_eagerly", refuse)


def _grad_step(w, x):
    ctx = tps.get_replica_context()
    total, grad = jax.value_and_grad(lambda w: ctx.all_reduce("SUM", jnp.sum(w * x)))(w)
    return total, grad, x.shape[0]


@pytest.mark.devices(4)
def test_a_ragged_step_runs_compiled_with_tensorflows_gradient_through_all_reduce(no_eager):
    s = _strategy(4)
    x = tps.PerReplica([np.arange(4.0), np.arange(4.0, 6.0), np.zeros(0), np.array([9.0])])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total, grad, count = s.run(_grad_step, (jnp.float32(3.0), x))
    expected_total = 3.0 * (np.arange(6.0).sum() + 9.0)
    assert isinstance(total, tps.Mirrored)
    assert [float(v) for v in total.values] == [expected_total] * 4
    # Each replica's gradient: sum(x_r) times the 4 replicas' upstream ones (the
    # gradient of an all-reduce is the all-reduce of the upstream gradients).
    assert [float(v) for v in grad.values] == [4 * 6.0, 4 * 9.0, 0.0, 4 * 9.0]
    assert list(count.values) == [4, 2, 0, 1]


@pytest.mark.devices(3)
def test_ragged_per_replica_results_keep_each_replicas_true_shape_on_its_device(no_eager):
    s = _strategy(3)
    x = tps.PerReplica([np.ones((3, 2)), np.ones((1, 2)) * 2, np.ones((2, 2)) * 3])
    out = s.run(lambda x: x * 10 + tps.get_replica_context().replica_id_in_sync_group, (x,))
    parts = s.experimental_local_results(out)
    assert [p.shape for p in parts] == [(3, 2), (1, 2), (2, 2)]
    assert [next(iter(p.devices())) for p in parts] == list(jax.devices()[:3])
    np.testing.assert_array_equal(np.asarray(parts[2]), np.full((2, 2), 32.0))
    assert float(s.reduce("SUM", out, axis=0).sum()) == pytest.approx(3 * 2 * 10 + 2 * 21 + 4 * 32)


@pytest.mark.devices(2)
def test_a_ragged_step_is_compiled_once_and_reused(no_eager):
    s = _strategy(2)
    traces = []

    def fn(x):
        traces.append(x.shape)
        return tps.get_replica_context().all_reduce("SUM", jnp.sum(x))

    for _ in range(3):
        out = s.run(fn, (tps.PerReplica([np.ones(3), np.ones(1)]),))
    assert float(out.values[0]) == 4.0
    assert sorted(traces) == [(1,), (3,)]  # one trace per class of replica shapes


@pytest.mark.devices(2)
def test_all_reduce_of_differently_shaped_values_names_the_shapes():
    s = _strategy(2)
    x = tps.PerReplica([np.ones(3), np.ones(2)])
    with pytest.warns(UserWarning, match="differ in shape"):
        with pytest.raises(ValueError, match=r"all_reduce.*\[3\].*\[2\]"):
            s.run(lambda x: tps.get_replica_context().all_reduce("SUM", x), (x,))


def _linear_data(n=26, d=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.3).astype(np.float32)
    return x, y


def _reference_losses(x, y, batch, lr, epochs):
    """Single-device SGD on the mean squared error of each global batch."""
    w, losses = np.zeros(3, np.float32), []
    for _ in range(epochs):
        for i in range(0, len(x), batch):
            xb, yb = jnp.asarray(x[i:i + batch]), jnp.asarray(y[i:i + batch])
            loss, g = jax.value_and_grad(lambda w, xb=xb, yb=yb: jnp.mean((xb @ w - yb) ** 2))(jnp.asarray(w))
            w = np.asarray(w - lr * g)
            losses.append(float(loss))
    return losses, w


def _train(strategy, x, y, batch, lr, epochs, compiled):
    with strategy.scope():
        w = tps.Variable(np.zeros(3, np.float32))

    def step(xb, yb):
        def loss_fn(w):
            per_example = (xb @ w - yb) ** 2
            return tps.nn.compute_average_loss(per_example, global_batch_size=batch_size[0])

        loss, g = jax.value_and_grad(loss_fn)(w.read_value())
        w.assign_sub(lr * tps.get_replica_context().all_reduce("SUM", g))
        return loss

    batch_size = [batch]

    def one(xb, yb):
        return strategy.reduce("SUM", strategy.run(step, (xb, yb)), axis=None)

    fn = tps.function(one) if compiled else one
    losses = []
    dist = strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices((x, y)).batch(batch))
    for _ in range(epochs):
        for xb, yb in dist:
            batch_size[0] = int(sum(np.shape(v)[0] for v in strategy.experimental_local_results(xb)))
            losses.append(float(fn(xb, yb)))
    return losses, np.asarray(w.read_value())


def test_a_training_loop_with_a_partial_last_batch_inside_tps_function_matches_single_device_sgd():
    x, y = _linear_data()
    s = _strategy(4)
    ref_losses, ref_w = _reference_losses(x, y, batch=8, lr=0.1, epochs=2)
    losses, w = _train(s, x, y, batch=8, lr=0.1, epochs=2, compiled=True)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w, ref_w, rtol=1e-5, atol=1e-6)


def test_the_ragged_compiled_path_agrees_with_the_eager_path():
    x, y = _linear_data(n=19)
    compiled, w_compiled = _train(_strategy(4), x, y, batch=8, lr=0.05, epochs=1, compiled=True)
    tps.config.run_functions_eagerly(True)
    try:
        eager_losses, w_eager = _train(_strategy(4), x, y, batch=8, lr=0.05, epochs=1, compiled=False)
    finally:
        tps.config.run_functions_eagerly(False)
    np.testing.assert_allclose(compiled, eager_losses, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w_compiled, w_eager, rtol=1e-5, atol=1e-6)


@pytest.mark.devices(8)
def test_a_global_batch_smaller_than_the_replica_count_runs_with_empty_pieces(no_eager):
    s = _strategy(8)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(3).map(lambda v: np.float32(v)).batch(3))

    @tps.function
    def total(it):
        x = next(it)
        return s.reduce("SUM", s.run(lambda x: tps.get_replica_context().all_reduce("SUM", jnp.sum(x)), (x,)),
                        axis=None) / 8

    assert float(total(iter(dist))) == 3.0


def test_ragged_steps_inside_tps_function_retrace_once_for_the_last_batch():
    s = _strategy(4)
    traces = []

    @tps.function
    def step(x):
        traces.append(1)
        return s.reduce("SUM", s.run(lambda v: jnp.sum(v), (x,)), axis=None)

    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4))
    totals = []
    for _ in range(2):
        for batch in dist:
            totals.append(int(step(batch)))
    assert totals == [6, 22, 17] * 2
    assert len(traces) == 2  # one for the full batches, one for the partial one
