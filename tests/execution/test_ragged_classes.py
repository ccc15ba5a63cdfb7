"""Ragged steps whose replica classes trace to different programs between their collectives.

A 7-row last batch over 4 replicas gives pieces 2/2/2/1: the 1-row replica's
trace of shape-dependent code (``jnp.broadcast_to(w, x.shape)``, ``jnp.squeeze``,
Python on ``x.shape[0]``) has other equations than the 2-row replicas'. Only the
collectives must agree; everything here runs compiled (the eager path refuses).
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.execution import eager

ROWS = np.arange(21, dtype=np.float32).reshape(7, 3) / 4.0
PIECES = [ROWS[0:2], ROWS[2:4], ROWS[4:6], ROWS[6:7]]


def _async_all_reduce_of_an_unsharded_trace():
    """Whether JAX makes ``psum_start`` a future outside a shard_map (JAX 0.10; from 0.11 only
    a value varying over a shard_map axis gets one, and steps are analysed before that)."""
    from jax._src.lax import parallel  # JAX's async collectives have no public name yet

    try:
        jax.make_jaxpr(lambda x: parallel.psum_start(x, "replica").done(),
                       axis_env=[("replica", 2)])(jnp.ones(2))
    except AttributeError:
        return False
    return True


def _strategy(n=4):
    return tps.MirroredStrategy(devices=jax.devices()[:n])


@pytest.fixture
def no_eager(monkeypatch):
    """Fails the test if anything falls back to the eager (thread) path, or warns."""

    def refuse(*args, **kwargs):
        raise AssertionError("the eager path was used")

    monkeypatch.setattr(eager, "run_eagerly", refuse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def _shape_dependent(w, x):
    """Per replica: code whose equations depend on the piece's shape, one all-reduce."""
    ctx = tps.get_replica_context()
    rows = x.shape[0]
    wb = jnp.broadcast_to(w, x.shape)
    first_column = jnp.squeeze(x[:, :1])  # (2,) on 2-row replicas, () on the 1-row one
    if rows > 1:  # Python on a static shape
        spread = jnp.sum(x[1:] - x[:-1])
    else:
        spread = jnp.float32(0.0)
    local = jnp.sum(wb * x) + 2.0 * jnp.sum(first_column) + spread
    total = ctx.all_reduce("SUM", local)
    return total, local, x * rows + total


def _reference(w, pieces):
    local = []
    for x in pieces:
        spread = np.sum(x[1:] - x[:-1]) if len(x) > 1 else 0.0
        local.append(np.sum(w * x) + 2.0 * np.sum(x[:, 0]) + spread)
    total = sum(local)
    return total, local, [x * len(x) + total for x in pieces]


def _check(strategy, out, w, pieces):
    total, local, scaled = out
    want_total, want_local, want_scaled = _reference(w, pieces)
    assert isinstance(total, tps.Mirrored)
    np.testing.assert_allclose([float(v) for v in strategy.experimental_local_results(total)],
                               [want_total] * len(pieces), rtol=1e-6)
    np.testing.assert_allclose([float(v) for v in strategy.experimental_local_results(local)], want_local,
                               rtol=1e-6)
    parts = strategy.experimental_local_results(scaled)
    assert [p.shape for p in parts] == [x.shape for x in pieces]
    for got, want in zip(parts, want_scaled):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


def test_the_classes_really_trace_to_different_equations():
    w = jnp.ones(3)
    counts = {len(jax.make_jaxpr(lambda x: _shape_dependent(w, x)[1], axis_env=[("replica", 4)])(x).eqns)
              for x in (PIECES[0], PIECES[3])}
    assert len(counts) == 2  # so the back end must not match the classes equation by equation


@pytest.mark.devices(4)
def test_shape_dependent_code_on_pieces_2_2_2_1_runs_compiled_and_matches_numpy(no_eager):
    s = _strategy()
    w = np.array([0.5, -1.0, 2.0], np.float32)
    _check(s, s.run(_shape_dependent, (jnp.asarray(w), tps.PerReplica(PIECES))), w, PIECES)


@pytest.mark.devices(4)
def test_shape_dependent_code_inside_tps_function_over_a_partial_last_batch_matches_numpy(no_eager):
    s = _strategy()
    w = np.array([0.5, -1.0, 2.0], np.float32)
    step = tps.function(lambda w, x: s.run(_shape_dependent, (w, x)))
    dist = s.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices(ROWS).batch(7))
    x = next(iter(dist))
    assert [p.shape[0] for p in s.experimental_local_results(x)] == [2, 2, 2, 1]
    _check(s, step(jnp.asarray(w), x), w, PIECES)


def _global_mean(x):
    """TensorFlow's idiom: the global batch size from an all-reduce of each replica's row count."""
    ctx = tps.get_replica_context()
    count = ctx.all_reduce("SUM", jnp.float32(x.shape[0]))
    return ctx.all_reduce("SUM", jnp.sum(x, axis=0)) / count, count


@pytest.mark.devices(4)
def test_the_global_mean_idiom_all_reduces_each_replicas_row_count(no_eager):
    s = _strategy()
    mean, count = s.run(_global_mean, (tps.PerReplica(PIECES),))
    assert isinstance(mean, tps.Mirrored) and isinstance(count, tps.Mirrored)
    assert [float(c) for c in s.experimental_local_results(count)] == [7.0] * 4
    for m in s.experimental_local_results(mean):
        np.testing.assert_allclose(np.asarray(m), ROWS.mean(axis=0), rtol=1e-6)


def test_the_global_mean_idiom_inside_tps_function_over_every_batch_of_a_dataset(no_eager):
    s = _strategy()
    data = np.arange(30, dtype=np.float32).reshape(10, 3)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices(data).batch(6))

    @tps.function
    def step(x):
        mean, _ = s.run(_global_mean, (x,))
        return s.reduce("MEAN", mean, axis=None)

    got = [np.asarray(step(x)) for x in dist]  # 6 rows as 2/2/1/1, then 4 rows as 1/1/1/1
    np.testing.assert_allclose(got, [data[:6].mean(axis=0), data[6:].mean(axis=0)], rtol=1e-6)


@pytest.mark.devices(4)
def test_gradients_through_all_reduce_of_shape_dependent_code_follow_tensorflows_rule(no_eager):
    s = _strategy()

    def step(w, x):
        ctx = tps.get_replica_context()
        return jax.grad(lambda w: ctx.all_reduce("SUM", jnp.sum(jnp.broadcast_to(w, x.shape) * x)))(w)

    grads = s.run(step, (jnp.ones(3), tps.PerReplica(PIECES)))
    # d/dw of the all-reduce: the all-reduce of every replica's upstream ones (4) times sum(x_r).
    for got, x in zip(s.experimental_local_results(grads), PIECES):
        np.testing.assert_allclose(np.asarray(got), 4 * x.sum(axis=0), rtol=1e-6)


def test_a_training_step_with_the_global_mean_idiom_matches_single_device_sgd(no_eager):
    s = _strategy()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(15, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32)).astype(np.float32)
    with s.scope():
        w = tps.Variable(np.zeros(3, np.float32))

    def replica_step(xb, yb):
        ctx = tps.get_replica_context()
        count = ctx.all_reduce("SUM", jnp.float32(xb.shape[0]))
        loss, g = jax.value_and_grad(lambda v: jnp.sum((xb @ v - yb) ** 2) / count)(w.read_value())
        w.assign_sub(0.1 * ctx.all_reduce("SUM", g))
        return loss

    step = tps.function(lambda xb, yb: s.reduce("SUM", s.run(replica_step, (xb, yb)), axis=None))
    dist = s.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices((x, y)).batch(8))
    losses = [float(step(xb, yb)) for xb, yb in dist]  # 8 rows, then 7 rows as 2/2/2/1
    ref_w, ref_losses = np.zeros(3, np.float32), []
    for i in (0, 8):
        xb, yb = jnp.asarray(x[i:i + 8]), jnp.asarray(y[i:i + 8])
        loss, g = jax.value_and_grad(lambda v, xb=xb, yb=yb: jnp.mean((xb @ v - yb) ** 2))(jnp.asarray(ref_w))
        ref_w, ref_losses = np.asarray(ref_w - 0.1 * g), ref_losses + [float(loss)]
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(w.read_value()), ref_w, rtol=1e-5, atol=1e-6)


@pytest.mark.devices(8)
def test_a_global_batch_smaller_than_the_replica_count_leaves_empty_pieces_and_matches_numpy(no_eager):
    s = _strategy(8)
    data = np.array([[1.0, 2.0], [3.0, 5.0], [7.0, 11.0]], np.float32)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices(data).batch(3))

    def replica_fn(w, x):
        mean, count = _global_mean(x)
        return mean, jnp.sum(jnp.broadcast_to(w, x.shape) * x, axis=1), count

    @tps.function
    def step(w, x):
        return s.run(replica_fn, (w, x))

    x = next(iter(dist))
    mean, rowsums, count = step(jnp.asarray([1.0, 10.0]), x)
    assert [p.shape[0] for p in s.experimental_local_results(x)] == [1, 1, 1, 0, 0, 0, 0, 0]
    assert [float(c) for c in s.experimental_local_results(count)] == [3.0] * 8
    np.testing.assert_allclose(np.asarray(s.experimental_local_results(mean)[5]), data.mean(axis=0))
    parts = s.experimental_local_results(rowsums)
    assert [p.shape for p in parts] == [(1,)] * 3 + [(0,)] * 5
    np.testing.assert_allclose(np.concatenate([np.asarray(p) for p in parts]), data @ np.array([1.0, 10.0]))


@pytest.mark.devices(4)
def test_an_all_reduce_inside_fori_loop_the_same_on_every_class_runs_compiled(no_eager):
    s = _strategy()

    def step(x):
        ctx = tps.get_replica_context()
        local = jnp.sum(jnp.squeeze(x[:, :1]))  # shape-dependent before the loop

        def body(i, carry):
            return carry + ctx.all_reduce("SUM", local) * (i + 1)

        return jax.lax.fori_loop(0, 3, body, jnp.float32(0.0))

    out = s.run(step, (tps.PerReplica(PIECES),))
    assert isinstance(out, tps.Mirrored)
    want = ROWS[:, 0].sum() * (1 + 2 + 3)
    np.testing.assert_allclose([float(v) for v in s.experimental_local_results(out)], [want] * 4, rtol=1e-6)


@pytest.mark.devices(4)
def test_a_mirrored_variable_updated_through_custom_derivative_functions_after_the_all_reduce_stays_mirrored(
        no_eager):
    s = _strategy()
    with s.scope():
        w = tps.Variable(np.array([1.0, -1.0, 0.5], np.float32))

    def step(x):
        ctx = tps.get_replica_context()
        g = ctx.all_reduce("SUM", jnp.sum(jnp.broadcast_to(w.read_value(), x.shape) * x, axis=0))
        w.assign(jax.nn.relu(w.read_value() - 0.01 * g) + jax.nn.softplus(g) * 0)  # custom_jvp functions
        return w.read_value()

    out = s.run(step, (tps.PerReplica(PIECES),))
    w0 = np.array([1.0, -1.0, 0.5], np.float32)
    want = np.maximum(w0 - 0.01 * (ROWS * w0).sum(axis=0), 0)
    assert isinstance(out, tps.Mirrored)
    np.testing.assert_allclose(np.asarray(w.read_value()), want, rtol=1e-6)


@pytest.mark.devices(4)
def test_a_prng_key_live_across_the_all_reduce_is_carried_between_segments(no_eager):
    s = _strategy()

    def step(seed, x):
        key, sub = jax.random.split(jax.random.key(seed))
        noise = jax.random.normal(sub, x.shape)  # shape-dependent draws before the collective
        total = tps.get_replica_context().all_reduce("SUM", jnp.sum(x))
        return jax.random.uniform(key, ()) + total * 0, jnp.sum(noise * 0) + total

    first, second = s.run(step, (jnp.int32(3), tps.PerReplica(PIECES)))
    want_first = float(jax.random.uniform(jax.random.split(jax.random.key(3))[0], ()))
    np.testing.assert_allclose([float(v) for v in s.experimental_local_results(first)], [want_first] * 4,
                               rtol=1e-6)
    assert [float(v) for v in s.experimental_local_results(second)] == [float(ROWS.sum())] * 4


@pytest.mark.devices(4)
@pytest.mark.skipif(not _async_all_reduce_of_an_unsharded_trace(),
                    reason="this JAX makes an async all-reduce only inside a shard_map")
def test_an_async_all_reduce_with_shape_dependent_work_in_flight_runs_compiled(no_eager):
    from jax._src.lax import parallel  # JAX's async collectives have no public name yet

    s = _strategy()

    def step(x):
        pending = parallel.psum_start(jnp.sum(x, axis=0), "replica")
        work = jnp.sum(jnp.broadcast_to(jnp.arange(3.0), x.shape) * x)  # while the all-reduce is in flight
        return pending.done() + work

    out = s.run(step, (tps.PerReplica(PIECES),))
    for got, x in zip(s.experimental_local_results(out), PIECES):
        np.testing.assert_allclose(np.asarray(got), ROWS.sum(axis=0) + (np.arange(3.0) * x).sum(), rtol=1e-6)


@pytest.mark.devices(4)
def test_an_all_reduce_inside_fori_loop_over_each_replicas_piece_runs_compiled_unrolled(no_eager):
    s = _strategy()

    def step(x):
        ctx = tps.get_replica_context()

        def body(i, carry):  # the body reads the piece: it differs per class, its collectives do not
            return carry + ctx.all_reduce("SUM", jnp.sum(x, axis=0)) * (i + 1)

        return jax.lax.fori_loop(0, 3, body, jnp.zeros(3, jnp.float32))

    out = s.run(step, (tps.PerReplica(PIECES),))
    assert isinstance(out, tps.Mirrored)
    for got in s.experimental_local_results(out):
        np.testing.assert_allclose(np.asarray(got), ROWS.sum(axis=0) * 6, rtol=1e-6)

    @tps.function
    def in_function(x):
        return s.run(step, (x,))

    for got in s.experimental_local_results(in_function(tps.PerReplica(PIECES))):
        np.testing.assert_allclose(np.asarray(got), ROWS.sum(axis=0) * 6, rtol=1e-6)


@pytest.mark.devices(4)
def test_a_scan_with_per_iteration_inputs_and_outputs_around_an_all_reduce_unrolls_exactly(no_eager):
    s = _strategy()

    def step(x):
        ctx = tps.get_replica_context()

        def body(carry, k):
            total = ctx.all_reduce("SUM", jnp.sum(x) * k)
            return carry + total, total * x.shape[0]

        return jax.lax.scan(body, jnp.float32(0.0), jnp.arange(1.0, 4.0), reverse=True)

    final, per_step = s.run(step, (tps.PerReplica(PIECES),))
    total = ROWS.sum()
    np.testing.assert_allclose([float(v) for v in s.experimental_local_results(final)], [total * 6] * 4,
                               rtol=1e-6)
    for got, x in zip(s.experimental_local_results(per_step), PIECES):
        np.testing.assert_allclose(np.asarray(got), total * np.arange(1.0, 4.0) * len(x), rtol=1e-6)
