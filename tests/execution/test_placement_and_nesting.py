"""One placement for every result; nested functions; variables written and created in traced steps."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def _strategy(n):
    return tps.MirroredStrategy(devices=jax.devices()[:n])


def _per_replica(s, shapes_equal=True):
    n = s.num_replicas_in_sync
    if shapes_equal:
        return tps.PerReplica([np.full(2, float(i)) for i in range(n)])
    return tps.PerReplica([np.full(i + 1, float(i)) for i in range(n)])


@pytest.mark.devices(4)
def test_results_of_every_path_combine_with_each_other():
    s = _strategy(4)

    def fn(x):
        return tps.get_replica_context().all_reduce("SUM", jnp.sum(x))

    def total(x):
        return s.reduce("SUM", s.run(fn, (x,)), axis=None)

    compiled = total(_per_replica(s))
    ragged = total(_per_replica(s, shapes_equal=False))
    function = tps.function(total)(_per_replica(s))
    tps.config.run_functions_eagerly(True)
    try:
        eager = total(_per_replica(s))
    finally:
        tps.config.run_functions_eagerly(False)
    expected = 4 * 2 * 6.0
    assert float(compiled + ragged + function + eager) == pytest.approx(3 * expected + 4 * 20.0)
    assert float(compiled + eager) == pytest.approx(2 * expected)
    assert compiled.sharding.device_set == eager.sharding.device_set == ragged.sharding.device_set


@pytest.mark.devices(3)
def test_per_replica_results_of_every_path_have_each_component_on_its_replicas_device():
    s = _strategy(3)
    x = _per_replica(s)
    outs = [s.run(lambda v: v + 1, (x,))]
    tps.config.run_functions_eagerly(True)
    try:
        outs.append(s.run(lambda v: v + 1, (x,)))
    finally:
        tps.config.run_functions_eagerly(False)
    outs.append(tps.function(lambda v: s.run(lambda w: w + 1, (v,)))(x))
    for out in outs:
        parts = s.experimental_local_results(out)
        assert [next(iter(p.devices())) for p in parts] == list(jax.devices()[:3])
        np.testing.assert_array_equal(np.asarray(parts[1]), [2.0, 2.0])


@pytest.mark.devices(4)
def test_run_of_a_tps_function_that_writes_a_variable_equals_the_plain_form():
    results = []
    for wrap in (False, True):
        s = _strategy(4)
        with s.scope():
            v = tps.Variable(1.0, aggregation=tps.VariableAggregation.SUM)

        def step(x, v=v):
            v.assign_add(jnp.sum(x))
            return v.read_value() * 2

        fn = tps.function(step) if wrap else step
        out = s.run(fn, (_per_replica(s),))
        out = s.run(fn, (_per_replica(s),))
        results.append((float(v.read_value()), [float(o) for o in s.experimental_local_results(out)]))
    assert results[0] == results[1]
    assert results[0][0] == 1.0 + 2 * 12.0


def test_a_tps_function_nested_in_a_tps_function_runs_inline():
    s = _strategy(2)
    with s.scope():
        v = tps.Variable(0.0)

    @tps.function
    def inner(x):
        v.assign_add(x)
        return v.read_value()

    @tps.function
    def outer(x):
        inner(x)
        return inner(x * 10)

    assert float(outer(jnp.float32(1.0))) == 11.0
    assert float(outer(jnp.float32(1.0))) == 22.0
    assert float(v.read_value()) == 22.0


@pytest.mark.devices(4)
def test_a_variable_created_in_a_replica_function_from_a_replica_value_takes_replica_0s_value():
    s = _strategy(4)
    made = []

    def fn():
        rid = tps.get_replica_context().replica_id_in_sync_group
        if not made:
            made.append(tps.Variable(jnp.float32(10.0) + rid.astype(jnp.float32)))
        return made[0].read_value()

    out = s.run(fn)
    assert [float(o) for o in s.experimental_local_results(out)] == [10.0] * 4
    assert float(made[0].read_value()) == 10.0
    assert isinstance(made[0].read_value(), jax.Array)


def test_jax_jit_around_a_run_that_writes_variables_names_tps_function():
    s = _strategy(2)
    with s.scope():
        v = tps.Variable(0.0)

    def step(x):
        v.assign_add(1.0)
        return x

    with pytest.raises(TypeError, match="tps.function"):
        jax.jit(lambda x: s.run(step, (x,)))(jnp.float32(1.0))
    assert float(v.read_value()) == 0.0


@pytest.mark.devices(2)
def test_the_eager_path_bounds_a_replica_stuck_in_its_own_code(monkeypatch):
    import time

    from tpustrategy._src import config

    monkeypatch.setattr(config, "EAGER_TIMEOUT", 1.0)
    s = _strategy(2)

    def fn():
        ctx = tps.get_replica_context()
        if int(ctx.replica_id_in_sync_group) == 1:
            time.sleep(6)  # never reaches the all-reduce in time
        return ctx.all_reduce("SUM", 1.0)

    tps.config.run_functions_eagerly(True)
    try:
        start = time.monotonic()
        with pytest.raises(tps.errors.DeadlineExceededError, match=r"replicas \[1\]"):
            s.run(fn)
        assert time.monotonic() - start < 4.0
    finally:
        tps.config.run_functions_eagerly(False)
