"""tps.tpu.outside_compilation runs host Python code inside tps.function and strategy.run."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def test_host_code_runs_every_time_the_compiled_function_runs_with_the_real_values():
    seen = []

    @tps.function
    def step(x):
        tps.tpu.outside_compilation(lambda v: seen.append(np.asarray(v).tolist()), x)
        return x * 2

    for i in range(3):
        np.testing.assert_array_equal(step(jnp.full(2, float(i))), [2.0 * i] * 2)
    assert seen == [[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]]


def test_a_traceable_computation_returns_its_values_into_the_program():
    @tps.function
    def step(x):
        return tps.tpu.outside_compilation(lambda v, scale: jnp.sin(v) * scale, x, scale=2.0) + 1

    x = jnp.arange(3.0)
    np.testing.assert_allclose(step(x), np.sin(np.arange(3.0)) * 2 + 1, rtol=1e-6)


@pytest.mark.devices(4)
@pytest.mark.parametrize("compiled", [False, True])
def test_inside_strategy_run_it_runs_once_per_replica(compiled):
    strategy = tps.MirroredStrategy(devices=jax.devices()[:4])
    seen = []

    def replica_fn(x):
        rid = tps.get_replica_context().replica_id_in_sync_group
        tps.tpu.outside_compilation(lambda r: seen.append(int(r)), rid)
        return tps.tpu.outside_compilation(lambda v: v * 3, x)

    run = tps.function(lambda x: strategy.run(replica_fn, (x,))) if compiled else (
        lambda x: strategy.run(replica_fn, (x,)))
    out = run(tps.PerReplica([jnp.float32(i) for i in range(4)]))
    assert [float(v) for v in strategy.experimental_local_results(out)] == [0.0, 3.0, 6.0, 9.0]
    assert sorted(seen) == [0, 1, 2, 3]


def test_outside_a_trace_it_just_calls_the_function():
    assert tps.tpu.outside_compilation(lambda a, b: a + b, 2, b=3) == 5


def test_host_only_code_returning_a_value_fails_when_the_step_runs_naming_the_fix():
    @tps.function
    def step(x):
        return tps.tpu.outside_compilation(lambda v: np.asarray(v) + 1, x)

    with pytest.raises(Exception, match=r"(?s)returned a value, but it is host-only code.*Fix"):
        jax.block_until_ready(step(jnp.ones(2)))


def test_a_non_callable_is_refused():
    with pytest.raises(TypeError, match=r"computation must be callable; received int: 3"):
        tps.tpu.outside_compilation(3, 1)


@pytest.mark.devices(8)
def test_host_code_in_a_replica_split_over_cores_names_the_limit_and_the_fix():
    topology = tps.tpu.experimental.initialize_tpu_system()
    assignment = tps.tpu.experimental.DeviceAssignment.build(
        topology, num_replicas=4, computation_shape=[2, 1, 1, 1])
    strategy = tps.TPUStrategy(experimental_device_assignment=assignment)

    def step(x):
        tps.tpu.outside_compilation(lambda v: print(v), x)
        return x * 2

    x = tps.PerReplica(tuple(jnp.ones((4, 2)) * i for i in range(4)))
    with pytest.raises(tps.errors.UnimplementedError, match="splits each replica over 2 cores") as info:
        strategy.run(step, args=(x,))
    assert "Fix: return the values from the step" in str(info.value)
    # A one-core-per-replica strategy over the same devices runs the same host code.
    seen = []
    one_core = tps.TPUStrategy()
    out = one_core.run(lambda v: tps.tpu.outside_compilation(lambda h: seen.append(h.shape), v) or v * 2,
                       args=(jnp.ones(2),))
    for component in one_core.experimental_local_results(out):
        np.testing.assert_array_equal(np.asarray(component), [2.0, 2.0])
    assert seen and set(seen) == {(2,)}
