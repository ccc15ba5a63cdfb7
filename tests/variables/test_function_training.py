"""Training through ``tps.function``: equal to single-device SGD; tracing, steps per call, outputs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tests.golden.cases import assert_close, case, render

LR = 0.1


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def _split(x: np.ndarray, n: int) -> tps.PerReplica:
    return tps.PerReplica(list(np.split(x, n)))


def _init() -> dict[str, jax.Array]:
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    return {"w1": jax.random.normal(k1, (4, 16)) * 0.5, "b1": jnp.zeros(16),
            "w2": jax.random.normal(k2, (16, 1)) * 0.5, "b2": jnp.zeros(1)}


def _loss(params, x, y):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return jnp.mean(((h @ params["w2"] + params["b2"])[:, 0] - y) ** 2)


def _batches(steps: int, global_batch: int = 64):
    rng = np.random.default_rng(0)
    for _ in range(steps):
        x = rng.normal(size=(global_batch, 4)).astype(np.float32)
        yield x, (np.sin(x.sum(axis=1)) + 0.1 * rng.normal(size=global_batch)).astype(np.float32)


def _single_device_losses(steps: int) -> tuple[list[float], dict[str, jax.Array]]:
    params, losses = _init(), []
    for x, y in _batches(steps):
        loss, grads = jax.value_and_grad(_loss)(params, x, y)
        params = jax.tree.map(lambda p, g: p - LR * g, params, grads)
        losses.append(float(loss))
    return losses, params


def _sgd_replica_step(params, x, y):
    ctx = tps.get_replica_context()
    loss, grads = jax.value_and_grad(_loss)(params, x, y)
    new = jax.tree.map(lambda p, g: p - LR * g, params, ctx.all_reduce("MEAN", grads))
    return new, loss


@pytest.mark.devices(8)
def test_twenty_steps_of_variable_style_sgd_in_a_function_equal_single_device_sgd():
    n = 8
    s = _strategy(n)
    with s.scope():
        params = jax.tree.map(tps.Variable, _init())

    def replica_step(x, y):
        new, loss = _sgd_replica_step(jax.tree.map(lambda v: v.read_value(), params), x, y)
        jax.tree.map(lambda v, p: v.assign(p), params, new)
        return loss

    @tps.function
    def train_step(x, y):
        return s.reduce("MEAN", s.run(replica_step, (x, y)), axis=None)

    losses = [float(train_step(_split(x, n), _split(y, n))) for x, y in _batches(20)]
    expected, ref = _single_device_losses(20)
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    assert losses[-1] < 0.5 * losses[0]
    for k in ref:
        np.testing.assert_allclose(np.asarray(params[k].read_value()), ref[k], rtol=1e-5, atol=1e-6)


@pytest.mark.devices(8)
@pytest.mark.parametrize("inside_function", [False, True], ids=["run", "tps_function"])
def test_twenty_steps_of_functional_sgd_equal_single_device_sgd(inside_function):
    n = 8
    s = _strategy(n)

    def train_step(params, x, y):
        params, loss = s.run(_sgd_replica_step, (params, x, y))
        return params, s.reduce("MEAN", loss, axis=None)

    if inside_function:
        train_step = tps.function(train_step)
    params, losses = _init(), []
    for x, y in _batches(20):
        params, loss = train_step(params, _split(x, n), _split(y, n))
        assert all(isinstance(p, tps.Mirrored) for p in params.values())
        losses.append(float(loss))
    expected, ref = _single_device_losses(20)
    np.testing.assert_allclose(losses, expected, rtol=1e-5)
    for k in ref:
        np.testing.assert_allclose(np.asarray(params[k]), ref[k], rtol=1e-5, atol=1e-6)


def _ranks(n: int, width: int = 3) -> tps.PerReplica:
    return tps.PerReplica([np.full(width, i, np.float32) for i in range(n)])


@pytest.mark.devices(4)
def test_a_function_is_traced_once_for_repeated_calls_and_again_for_a_new_shape():
    s = _strategy(4)
    traces = []

    @tps.function
    def f(x):
        traces.append(1)
        return s.reduce("SUM", s.run(lambda x: x * 2, (x,)), axis=None)

    for _ in range(3):
        np.testing.assert_allclose(f(_ranks(4)), [12.0] * 3)
    assert len(traces) == 1
    np.testing.assert_allclose(f(_ranks(4, width=5)), [12.0] * 5)
    assert len(traces) == 2
    f(_ranks(4))
    assert len(traces) == 2


@pytest.mark.devices(4)
def test_a_function_that_meets_variables_stops_tracing_after_its_first_call():
    s = _strategy(4)
    with s.scope():
        v = tps.Variable(0.0)
    traces = []

    def step(x):
        v.assign_add(tps.get_replica_context().all_reduce("SUM", jnp.sum(x)))

    @tps.function
    def f(x):
        traces.append(1)
        s.run(step, (x,))
        return v.read_value()

    f(_ranks(4, width=1))
    first = len(traces)  # like tf.function, a trace that meets new variables traces again
    assert first <= 2
    for _ in range(3):
        f(_ranks(4, width=1))
    assert len(traces) == first
    f(_ranks(4, width=2))  # the variables are known by now: one trace for the new shape
    assert len(traces) == first + 1
    assert float(v.read_value()) == 4 * 6.0 + 2 * 6.0


def _train_in_calls(batches: list[tps.PerReplica], steps_per_call: int) -> tuple[np.ndarray, int]:
    s = _strategy(4)
    with s.scope():
        w = tps.Variable(jnp.ones(3))
    traces = []

    def step(x):
        g = jnp.mean(x * jnp.tanh(x @ w.read_value())[:, None], axis=0)
        w.assign_sub(0.1 * tps.get_replica_context().all_reduce("MEAN", g))

    @tps.function
    def train(xs):
        traces.append(1)
        for x in xs:  # a Python loop: len(xs) steps in one program
            s.run(step, (x,))

    for i in range(0, len(batches), steps_per_call):
        train(batches[i:i + steps_per_call])
    return np.asarray(w.read_value()), len(traces)


@pytest.mark.devices(4)
def test_k_steps_in_one_call_equal_k_calls_of_one_step():
    rng = np.random.default_rng(0)
    batches = [_split(rng.normal(size=(8, 3)).astype(np.float32), 4) for _ in range(5)]
    five_per_call, _ = _train_in_calls(batches, steps_per_call=5)
    one_per_call, traces = _train_in_calls(batches, steps_per_call=1)
    np.testing.assert_allclose(five_per_call, one_per_call, rtol=1e-6)
    assert not np.allclose(five_per_call, 1.0)
    assert traces <= 2  # five calls of the one-step function reuse its program


@pytest.mark.devices(2)
def test_variables_created_outside_and_updated_inside_persist_across_calls():
    s = _strategy(2)
    with s.scope():
        counter = tps.Variable(0.0, aggregation="SUM")
        total = tps.Variable(10.0)

    @tps.function
    def f():
        s.run(lambda: counter.assign_add(1.0))
        total.assign_add(counter.read_value())  # cross-replica update
        return counter.read_value()

    assert [float(f()) for _ in range(3)] == [2.0, 4.0, 6.0]
    assert float(counter.read_value()) == 6.0
    assert float(total.read_value()) == 10.0 + 2.0 + 4.0 + 6.0
    assert [float(c) for c in s.experimental_local_results(counter)] == [6.0, 6.0]
    assert [float(c) for c in s.experimental_local_results(total)] == [22.0, 22.0]


def test_a_plain_variable_updated_inside_a_function_persists_across_calls():
    plain = tps.Variable(10.0)  # outside any scope

    @tps.function
    def f():
        plain.assign_add(1.0)
        return plain.read_value()

    assert [float(f()) for _ in range(3)] == [11.0, 12.0, 13.0]
    assert float(plain.read_value()) == 13.0


@pytest.mark.devices(2)
def test_a_plain_variable_and_a_mirrored_one_can_meet_in_one_function():
    s = _strategy(2)
    with s.scope():
        a = tps.Variable(1.0)
    plain = tps.Variable(10.0)

    @tps.function
    def f():
        plain.assign_add(a.read_value())

    f()
    assert float(plain.read_value()) == 11.0


@pytest.mark.devices(4)
@pytest.mark.parametrize("op", ["SUM", "MEAN"])
@pytest.mark.parametrize("axis", [None, 0])
def test_reduce_inside_a_function_returns_an_array_equal_to_the_eager_reduce(op, axis):
    s = _strategy(4)
    values = [np.arange(6, dtype=np.float32).reshape(2, 3) * (i + 1) for i in range(4)]

    @tps.function
    def f(x):
        return s.reduce(op, s.run(lambda x: x + 1.0, (x,)), axis=axis)

    inside = f(tps.PerReplica(values))
    eager = s.reduce(op, s.run(lambda x: x + 1.0, (tps.PerReplica(values),)), axis=axis)
    assert isinstance(inside, jax.Array)
    np.testing.assert_allclose(inside, eager, rtol=1e-6)


@pytest.mark.devices(4)
def test_run_outputs_inside_a_function_come_back_as_mirrored_and_per_replica():
    s = _strategy(4)

    def fn(x):
        ctx = tps.get_replica_context()
        return x * 2, ctx.all_reduce("SUM", x), 7

    @tps.function
    def f(x):
        return s.run(fn, (x,))

    per_replica, mirrored, static = f(_ranks(4))
    assert isinstance(per_replica, tps.PerReplica) and isinstance(mirrored, tps.Mirrored)
    assert static == 7
    assert [np.asarray(v).tolist() for v in per_replica.values] == [[2.0 * i] * 3 for i in range(4)]
    assert [np.asarray(v).tolist() for v in mirrored.values] == [[6.0] * 3] * 4


@pytest.mark.parametrize("method,agg", [
    ("assign_add", "SUM"), ("assign_sub", "SUM"), ("assign_add", "MEAN"),
    ("assign_add", "ONLY_FIRST_REPLICA"), ("assign", "ONLY_FIRST_REPLICA"),
])
@pytest.mark.devices(4)
def test_replica_updates_inside_a_function_match_tensorflow(method, agg):
    out = case(f"var_replica_{method}_{agg}_R4_tf_function")["output"]
    s = _strategy(4)
    with s.scope():
        v = tps.Variable(1.0, aggregation=agg)

    def fn():
        rid = tps.get_replica_context().replica_id_in_sync_group
        getattr(v, method)(rid.astype(jnp.float32) + 1.0)
        return v.read_value()

    @tps.function
    def f():
        return s.run(fn)

    assert_close(render(f()), out["per_replica_read_after_update"])
    assert_close([float(c) for c in s.experimental_local_results(v)], out["component_values_after"])
    assert_close(float(v.read_value()), out["cross_replica_read"])


@pytest.mark.devices(2)
def test_compute_average_loss_inside_a_function_matches_tensorflow():
    out = case("e2e_compute_average_loss_R2")["output"]
    s = _strategy(2)
    losses = case("e2e_compute_average_loss_R2")["input"]["per_replica_losses"]

    def fn(per_example):
        global_batch = per_example.shape[0] * tps.get_replica_context().num_replicas_in_sync
        return jnp.sum(per_example) / global_batch, jnp.sum(per_example) / 10

    @tps.function
    def f(x):
        per_replica = s.run(fn, (x,))
        return per_replica, [s.reduce("SUM", v, axis=None) for v in per_replica]

    per_replica, summed = f(tps.PerReplica([np.asarray(v, np.float32) for v in losses]))
    assert_close(render(list(per_replica)), out["per_replica"])
    assert_close([float(v) for v in summed], out["sum_over_replicas"])


@pytest.mark.devices(2)
def test_steps_per_call_continue_across_calls_like_tensorflow():
    # loop_steps_in_tf_function: range(16).batch(4) on 2 replicas, 2 steps per call,
    # v.assign_add(sum(x)) with SUM aggregation; batches given as PerReplica pieces.
    out = case("loop_steps_in_tf_function")["output"]
    s = _strategy(2)
    with s.scope():
        v = tps.Variable(0, aggregation="SUM")
    pieces = [tps.PerReplica([np.arange(b, b + 2), np.arange(b + 2, b + 4)]) for b in range(0, 16, 4)]

    def step(x):
        v.assign_add(jnp.sum(x).astype(v.dtype))
        return jnp.sum(x)

    @tps.function
    def train(batches):
        for x in batches:
            last = s.run(step, (x,))
        return s.reduce("SUM", last, axis=None)

    assert int(train(pieces[:2])) == out["call1_last_step_sum"]
    assert [int(c) for c in s.experimental_local_results(v)] == out["var_after_call1"]
    assert int(train(pieces[2:])) == out["call2_last_step_sum"]
    assert [int(c) for c in s.experimental_local_results(v)] == out["var_after_call2"]


@pytest.mark.devices(4)
def test_none_aggregation_with_differing_values_inside_a_function_asks_for_an_aggregation():
    # DESIGN §5: TF silently diverges the copies (var_replica_assign_NONE_R4_tf_function); we raise.
    golden = case("var_replica_assign_NONE_R4_tf_function")["output"]
    assert golden["component_values_after"] == [1.0, 2.0, 3.0, 4.0]
    s = _strategy(4)
    with s.scope():
        v = tps.Variable(1.0)

    @tps.function
    def f():
        s.run(lambda: v.assign(tps.get_replica_context().replica_id_in_sync_group.astype(jnp.float32)))

    with pytest.raises(ValueError, match="aggregation"):
        f()
    assert [float(c) for c in s.experimental_local_results(v)] == [1.0] * 4


@pytest.mark.devices(2)
def test_a_per_replica_passed_to_a_function_can_then_be_passed_to_run():
    s = _strategy(2)
    x = tps.PerReplica([np.float32(1.0), np.float32(2.0)])
    tps.function(lambda x: s.run(lambda x: x + 1.0, (x,)))(x)
    out = s.run(lambda x: x + 1.0, (x,))
    assert [float(v) for v in out.values] == [2.0, 3.0]
