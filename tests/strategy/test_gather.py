"""TensorFlow's ``strategy_gather_test.py`` (GatherTest), ported by renaming.

``tf.distribute`` -> ``tps``, ``tf.function`` -> ``tps.function``. Each case is a
function of a strategy and ``pure_eager`` (TensorFlow's two modes: plain calls, or
calls wrapped in ``tps.function``); this module runs them on ``MirroredStrategy``
over the 8 fake CPU devices, and ``tests/multiprocess/worker_gather.py`` runs the
same ``CASES`` on a 2-process ``MultiWorkerMirroredStrategy``. IndexedSlices cases
are left out (there are no IndexedSlices in JAX).

Mismatched shapes or ranks raise ``tps.errors.InvalidArgumentError`` whose text
holds the phrases TensorFlow's tests match for every strategy ("Shape mismatch",
"Dimension d in both shapes must be equal", "Ranks of all input tensors should
match", "Shape must be rank r but is rank s").
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def _local_count(strategy):
    return len(strategy.experimental_local_results(strategy.experimental_distribute_values_from_function(
        lambda _: np.zeros(1))))


def _maybe_function(fn, pure_eager):
    return fn if pure_eager else tps.function(fn)


def _assert_all_equal(expected, got):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def _assert_raises_matching(fn, patterns):
    """The call raises InvalidArgumentError whose message matches every pattern (TF's regexes)."""
    with pytest.raises(tps.errors.InvalidArgumentError) as info:
        fn()
    for pattern in patterns:
        assert re.search(pattern, str(info.value)), (pattern, str(info.value))
    assert "Fix" in str(info.value)


_SHAPE_PATTERNS = [r"Shape mismatch", r"Dimension \d in both shapes must be equal"]
_RANK_PATTERNS = [r"Shape mismatch", r"Ranks of all input tensors should match", r"Shape must be rank \d but is rank \d"]


# strategy.gather ---------------------------------------------------------------------------------
def _gather_same_shape_and_verify(value_on_replica, axis, pure_eager, strategy):
    distributed_values = strategy.experimental_distribute_values_from_function(lambda _: jnp.asarray(value_on_replica))

    def run():
        return strategy.gather(distributed_values, axis=axis)

    run = _maybe_function(run, pure_eager)
    expected_result = np.concatenate([value_on_replica] * strategy.num_replicas_in_sync, axis=axis)
    _assert_all_equal(expected_result, run())


def gather_per_replica_dense_1d_0_axis(strategy, pure_eager):
    _gather_same_shape_and_verify(np.array([1, 2, 3]), 0, pure_eager, strategy)


def gather_per_replica_dense_2d_0_axis(strategy, pure_eager):
    _gather_same_shape_and_verify(np.array([[1, 2, 3]]), 0, pure_eager, strategy)


def gather_per_replica_dense_2d_1_axis(strategy, pure_eager):
    _gather_same_shape_and_verify(np.array([[1, 2, 3]]), 1, pure_eager, strategy)


def gather_per_replica_dense_3d_0_axis(strategy, pure_eager):
    _gather_same_shape_and_verify(np.array([[[1, 2], [1, 2]]]), 0, pure_eager, strategy)


def gather_per_replica_dense_3d_1_axis(strategy, pure_eager):
    _gather_same_shape_and_verify(np.array([[[1, 2], [1, 2]]]), 1, pure_eager, strategy)


def gather_per_replica_dense_3d_2_axis(strategy, pure_eager):
    _gather_same_shape_and_verify(np.array([[[1, 2], [1, 2]]]), 2, pure_eager, strategy)


def gather_diff_shape_at_axis_0(strategy, pure_eager):
    distributed_values = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.ones((ctx.replica_id_in_sync_group + 1, 1), np.int32))
    run = _maybe_function(lambda: strategy.gather(distributed_values, axis=0), pure_eager)
    _assert_all_equal(np.ones((sum(range(strategy.num_replicas_in_sync + 1)), 1)), run())


def gather_diff_shape_at_axis_1(strategy, pure_eager):
    distributed_values = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.ones((1, ctx.replica_id_in_sync_group + 1), np.int32))
    run = _maybe_function(lambda: strategy.gather(distributed_values, axis=1), pure_eager)
    _assert_all_equal(np.ones((1, sum(range(strategy.num_replicas_in_sync + 1)))), run())


def gather_raise_diff_shape_at_non_axis(strategy, pure_eager):
    distributed_values = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.ones((1, ctx.replica_id_in_sync_group + 1), np.int32))
    run = _maybe_function(lambda: strategy.gather(distributed_values, axis=0), pure_eager)
    _assert_raises_matching(run, _SHAPE_PATTERNS)


def gather_raise_different_rank(strategy, pure_eager):
    distributed_values = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.ones(tuple(range(1, ctx.replica_id_in_sync_group + 2)), np.float32))
    run = _maybe_function(lambda: strategy.gather(distributed_values, axis=0), pure_eager)
    _assert_raises_matching(run, _RANK_PATTERNS)


# ReplicaContext.all_gather -----------------------------------------------------------------------
def _all_gather_same_shape_and_verify(value_on_replica, axis, pure_eager, strategy):
    per_replica_value = strategy.experimental_distribute_values_from_function(lambda _: jnp.asarray(value_on_replica))

    def replica_fn(per_replica_value):
        ctx = tps.get_replica_context()
        return ctx.all_gather(jnp.asarray(per_replica_value), axis=axis)

    result = strategy.experimental_local_results(
        strategy.run(_maybe_function(replica_fn, pure_eager), args=(per_replica_value,)))
    expect = np.concatenate([value_on_replica] * strategy.num_replicas_in_sync, axis=axis)
    np.testing.assert_allclose(np.asarray([np.asarray(r) for r in result]), [expect] * _local_count(strategy))


def all_gather_per_replica_dense_1d_0_axis(strategy, pure_eager):
    _all_gather_same_shape_and_verify(np.array([1.0, 2.0, 3.0], np.float32), 0, pure_eager, strategy)


def all_gather_per_replica_dense_2d_0_axis(strategy, pure_eager):
    _all_gather_same_shape_and_verify(np.array([[1, 2, 3]]), 0, pure_eager, strategy)


def all_gather_per_replica_dense_2d_1_axis(strategy, pure_eager):
    _all_gather_same_shape_and_verify(np.array([[1, 2, 3]]), 1, pure_eager, strategy)


def all_gather_per_replica_dense_3d_0_axis(strategy, pure_eager):
    _all_gather_same_shape_and_verify(np.array([[[1, 2], [1, 2]]]), 0, pure_eager, strategy)


def all_gather_per_replica_dense_3d_1_axis(strategy, pure_eager):
    _all_gather_same_shape_and_verify(np.array([[[1, 2], [1, 2]]]), 1, pure_eager, strategy)


def all_gather_per_replica_dense_3d_2_axis(strategy, pure_eager):
    _all_gather_same_shape_and_verify(np.array([[[1, 2], [1, 2]]]), 2, pure_eager, strategy)


def _all_gather_diff_shape(strategy, pure_eager, axis):
    def value_fn(ctx):
        shape = (ctx.replica_id_in_sync_group + 1, 1) if axis == 0 else (1, ctx.replica_id_in_sync_group + 1)
        return np.ones(shape, np.int32)

    per_replica_value = strategy.experimental_distribute_values_from_function(value_fn)
    total = sum(range(strategy.num_replicas_in_sync + 1))
    expect = np.ones((total, 1) if axis == 0 else (1, total))

    def run(value):
        return tps.get_replica_context().all_gather(jnp.asarray(value), axis=axis)

    result = strategy.experimental_local_results(
        strategy.run(_maybe_function(run, pure_eager), args=(per_replica_value,)))
    _assert_all_equal([expect] * _local_count(strategy), [np.asarray(r) for r in result])


def all_gather_diff_shape_at_axis_0(strategy, pure_eager):
    _all_gather_diff_shape(strategy, pure_eager, 0)


def all_gather_diff_shape_at_axis_1(strategy, pure_eager):
    _all_gather_diff_shape(strategy, pure_eager, 1)


def all_gather_nest(strategy, pure_eager):
    axis = 1
    per_replica_value = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.ones((1, ctx.replica_id_in_sync_group + 1), np.int32))
    expect_1 = np.ones((1, sum(range(strategy.num_replicas_in_sync + 1))))
    value_2 = np.array([[[1, 2], [1, 2]]])
    expect_2 = np.concatenate([value_2] * strategy.num_replicas_in_sync, axis=axis)

    def run(value):
        return tps.get_replica_context().all_gather([jnp.asarray(value), jnp.asarray(value_2)], axis=axis)

    result = strategy.run(_maybe_function(run, pure_eager), args=(per_replica_value,))
    n = _local_count(strategy)
    _assert_all_equal([expect_1] * n, [np.asarray(r) for r in strategy.experimental_local_results(result[0])])
    _assert_all_equal([expect_2] * n, [np.asarray(r) for r in strategy.experimental_local_results(result[1])])


def all_gather_nest_1d_0_axis(strategy, pure_eager):
    single_value = np.array([1, 2, 3])

    def run():
        value_identity = jnp.asarray(single_value)
        return tps.get_replica_context().all_gather([value_identity, value_identity], axis=0)

    expect = np.concatenate([single_value] * strategy.num_replicas_in_sync, axis=0)
    result = strategy.run(_maybe_function(run, pure_eager))
    for gathered_result in result:
        _assert_all_equal([expect] * _local_count(strategy),
                          [np.asarray(r) for r in strategy.experimental_local_results(gathered_result)])


def all_gather_raise_diff_shape_at_non_axis(strategy, pure_eager):
    per_replica_value = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.ones((1, ctx.replica_id_in_sync_group + 1), np.int32))

    def run(value):
        return tps.get_replica_context().all_gather(jnp.asarray(value), axis=0)

    _assert_raises_matching(lambda: strategy.run(_maybe_function(run, pure_eager), args=(per_replica_value,)),
                            _SHAPE_PATTERNS)


def all_gather_raise_different_rank(strategy, pure_eager):
    per_replica_value = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.ones(tuple(range(1, ctx.replica_id_in_sync_group + 2)), np.float32))

    def run(value):
        return tps.get_replica_context().all_gather(jnp.asarray(value), axis=0)

    _assert_raises_matching(lambda: strategy.run(_maybe_function(run, pure_eager), args=(per_replica_value,)),
                            _RANK_PATTERNS)


def _gradient_of_all_gather(strategy, pure_eager, nested):
    if pure_eager:
        return  # TensorFlow skips it: tf.gradients needs a tf.function

    gradient_comp = sum(range(1, strategy.num_replicas_in_sync + 1))
    grads_for_all_replicas = [[[gradient_comp], [gradient_comp]]] * _local_count(strategy)

    @tps.function
    def step(c):
        x = jnp.asarray([[3.0], [5.0]])
        y = jnp.asarray([[2.0], [4.0]])

        def loss(x):
            values = [x, y] if nested else x
            mid = tps.get_replica_context().all_gather(values, 1)
            mid = mid[0] if nested else mid
            return jnp.sum(mid * c)

        return jax.grad(loss)(x)

    per_replica_value = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.array([[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0][ctx.replica_id_in_sync_group]], np.float32))
    result = strategy.experimental_local_results(strategy.run(step, args=(per_replica_value,)))
    _assert_all_equal(grads_for_all_replicas, [np.asarray(r) for r in result])


def all_gather_gradient(strategy, pure_eager):
    _gradient_of_all_gather(strategy, pure_eager, nested=False)


def all_gather_gradient_nest(strategy, pure_eager):
    _gradient_of_all_gather(strategy, pure_eager, nested=True)


CASES = {name: fn for name, fn in dict(globals()).items()
         if name.startswith(("gather_", "all_gather_")) and callable(fn)}


# Replicas whose values differ in shape or rank: one replica has nothing to mismatch.
_MISMATCH_CASES = {"gather_raise_diff_shape_at_non_axis", "gather_raise_different_rank",
                   "all_gather_raise_diff_shape_at_non_axis", "all_gather_raise_different_rank"}


@pytest.mark.parametrize("pure_eager", [True, False], ids=["pure_eager", "tps.function"])
@pytest.mark.parametrize("case", [
    pytest.param(name, marks=pytest.mark.devices(2)) if name in _MISMATCH_CASES else name
    for name in sorted(CASES)])
def test_tensorflow_gather_case_passes_on_mirrored_strategy(case, pure_eager):
    CASES[case](tps.MirroredStrategy(), pure_eager)


@pytest.mark.devices(2)
def test_the_eager_path_raises_the_same_error_for_mismatched_all_gather_shapes():
    tps.config.run_functions_eagerly(True)
    try:
        all_gather_raise_diff_shape_at_non_axis(tps.MirroredStrategy(devices=jax.devices()[:4]), True)
        all_gather_raise_different_rank(tps.MirroredStrategy(devices=jax.devices()[:4]), True)
    finally:
        tps.config.run_functions_eagerly(False)


def test_a_gather_error_names_the_replicas_and_their_shapes():
    s = tps.MirroredStrategy(devices=jax.devices()[:2])
    values = tps.PerReplica([np.ones((1, 1)), np.ones((1, 2))])
    with pytest.raises(tps.errors.InvalidArgumentError) as info:
        s.gather(values, axis=0)
    message = str(info.value)
    assert "strategy.gather" in message
    assert "[1, 1]" in message and "[1, 2]" in message
    assert "axis 0" in message
    assert isinstance(info.value, ValueError)  # what tpustrategy raised before, still caught
