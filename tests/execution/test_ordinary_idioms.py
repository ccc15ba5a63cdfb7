"""Ordinary TensorFlow idioms that used to crash the core (issue 16, item 5)."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


def _halves():
    return tps.MirroredStrategy(jax.devices()[:4]), tps.MirroredStrategy(jax.devices()[4:8])


@pytest.mark.devices(8)
def test_two_strategies_over_different_devices_in_one_function_run_with_one_warning():
    s1, s2 = _halves()

    @tps.function
    def step(x):
        a = s1.run(lambda v: v * 2.0, (x,))
        b = s2.run(lambda v: v + 1.0, (x,))
        return s1.reduce("SUM", a, axis=None), s2.reduce("SUM", b, axis=None)

    with pytest.warns(UserWarning, match="strategies over different devices"):
        first = step(jnp.float32(1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = step(jnp.float32(2.0))
    assert [float(v) for v in first] == [8.0, 8.0]
    assert [float(v) for v in second] == [16.0, 12.0]


@pytest.mark.devices(8)
def test_a_mirrored_variable_of_one_strategy_is_read_in_another_strategys_run():
    s1, s2 = _halves()
    with s1.scope():
        v = tps.Variable(3.0)
    results = s2.experimental_local_results(s2.run(lambda: v * 2.0))
    assert [float(r) for r in results] == [6.0] * 4
    assert [r.devices() for r in results] == [{d} for d in jax.devices()[4:8]]
    v.assign(5.0)
    assert [float(r) for r in s2.experimental_local_results(s2.run(lambda: v * 2.0))] == [10.0] * 4


@pytest.mark.devices(8)
def test_writing_a_variable_of_another_strategy_keeps_tensorflows_mixing_error():
    s1, s2 = _halves()
    with s1.scope():
        v = tps.Variable(3.0, aggregation="sum")
    with pytest.raises(RuntimeError, match="Mixing different tf.distribute.Strategy objects"):
        s2.run(lambda: v.assign_add(1.0))


def test_a_scalar_array_step_count_works_as_a_python_loop_count_like_the_tpu_guide():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    with strategy.scope():
        total = tps.Variable(0.0, aggregation=tps.VariableAggregation.SUM)
    it = iter(strategy.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(4).repeat()))

    @tps.function
    def train_multiple_steps(iterator, steps):
        for _ in range(steps):
            strategy.run(lambda x: total.assign_add(jnp.sum(x).astype(jnp.float32)), (next(iterator),))

    with pytest.warns(UserWarning, match=r"range\(steps\)"):
        train_multiple_steps(it, jnp.asarray(3))  # batches 0-3, 4-7, 0-3
    assert float(total.numpy()) == 6 + 22 + 6
    train_multiple_steps(it, np.int32(1))  # batch 4-7
    assert float(total.numpy()) == 6 + 22 + 6 + 22


def test_a_dynamic_shape_op_in_a_function_names_the_op_and_the_fix():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with pytest.raises(ValueError, match=r"jnp.nonzero[\s\S]*static shapes[\s\S]*Fix: give the size"):
        tps.function(lambda x: jnp.argwhere(x > 1))(jnp.arange(4))
    with pytest.raises(ValueError, match=r"strategy.run[\s\S]*jnp.nonzero[\s\S]*Fix: give the size"):
        tps.function(lambda x: strategy.run(lambda y: jnp.argwhere(y > 1), (x,)))(jnp.arange(4))
    fixed = tps.function(lambda x: jnp.argwhere(x > 1, size=2, fill_value=-1))(jnp.arange(4))
    np.testing.assert_array_equal(np.asarray(fixed), [[2], [3]])


@pytest.mark.devices(4)
def test_per_replica_python_strings_pass_through_run_like_tensorflow():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    names = tps.PerReplica(["a", "b", "c", "d"])
    with pytest.warns(UserWarning, match="Python values"):
        out = strategy.run(lambda s: s.upper() + "!", (names,))
    assert strategy.experimental_local_results(out) == ("A!", "B!", "C!", "D!")


@pytest.mark.devices(4)
@pytest.mark.parametrize("eager", [False, True])
def test_merge_fn_writes_variables_with_cross_replica_semantics(eager):
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    with strategy.scope():
        total = tps.Variable(0.0, aggregation="sum")
        counts = tps.Variable(0.0, synchronization="ON_READ", aggregation="sum")

    def merge_fn(s, x):
        total.assign(s.reduce("SUM", x, axis=None))  # 1 + 2 + 3 + 4
        counts.assign(8.0)  # a cross-replica SUM assign: 2.0 per replica
        return 1

    def fn():
        x = jnp.float32(tps.get_replica_context().replica_id_in_sync_group + 1)
        return tps.get_replica_context().merge_call(merge_fn, args=(x,))

    tps.config.run_functions_eagerly(eager)
    try:
        assert strategy.run(fn) == 1
    finally:
        tps.config.run_functions_eagerly(False)
    assert float(total.numpy()) == 10.0
    assert [float(c) for c in counts.values] == [2.0] * 4 and float(counts.numpy()) == 8.0
