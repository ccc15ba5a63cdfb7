"""TensorFlow's ``tensorflow/python/distribute/distribute_lib_test.py``, ported.

TensorFlow's file tests the base ``Strategy`` through a test-only subclass
(``_TestStrategy``) whose replica function runs once and whose variable creator
returns a dict. We have no pluggable ``StrategyExtended`` base to subclass, so each
case runs on a real one-replica strategy (``OneDeviceStrategy``) and on
``MirroredStrategy`` over two devices where the case means something with several
replicas; the asserted contexts, reductions, merge results and error texts are
TensorFlow's. Graph-mode, AutoGraph and TF1 cases (``testUpdateAutoGraph``,
``testScopeVarScopeNestingError``, ``testV1``, ``make_input_fn_iterator``,
``experimental_run_steps_on_iterator``) have no meaning here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


def _assert_in_default_state():
    default = tps.get_strategy()
    assert not tps.has_strategy()
    assert not tps.in_cross_replica_context()
    assert tps.get_replica_context() is not None
    assert tps.get_replica_context().strategy is default
    assert tps.get_replica_context().replica_id_in_sync_group == 0


def _one_device():
    return tps.OneDeviceStrategy(jax.devices()[0])


def test_call_for_each_replica_sees_a_replica_context_of_its_strategy():
    _assert_in_default_state()
    dist = _one_device()
    seen = []

    def make_run_fn():
        # A new function each time: a compiled replica function's Python body runs when it is
        # traced, and a second call of the same function reuses its program.
        def run_fn():
            ctx = tps.get_replica_context()
            seen.append((ctx is not None, tps.in_cross_replica_context(), tps.has_strategy(),
                         tps.get_strategy() is dist, ctx.merge_call(lambda _, s: s, args=("foo",))))
        return run_fn

    dist.extended.call_for_each_replica(make_run_fn())
    with dist.scope():
        dist.extended.call_for_each_replica(make_run_fn())
    assert seen == [(True, False, True, True, "foo")] * 2
    _assert_in_default_state()


def test_scope_is_a_cross_replica_context_and_variables_keep_their_settings():
    _assert_in_default_state()
    dist = _one_device()
    with dist.scope():
        assert tps.get_replica_context() is None
        assert tps.in_cross_replica_context()
        assert tps.has_strategy()
        assert tps.get_strategy() is dist
        v = tps.Variable(1.0, name="baz")
        w = tps.Variable(1.0, name="baz", synchronization=tps.VariableSynchronization.ON_WRITE,
                         aggregation=tps.VariableAggregation.MEAN)
    assert v.name.startswith("baz") and w.name.startswith("baz")
    assert v.synchronization in (tps.VariableSynchronization.AUTO, tps.VariableSynchronization.ON_WRITE)
    assert v.aggregation == tps.VariableAggregation.NONE
    assert w.synchronization == tps.VariableSynchronization.ON_WRITE
    assert w.aggregation == tps.VariableAggregation.MEAN
    _assert_in_default_state()


def test_experimental_set_strategy_sets_and_clears_the_current_strategy():
    _assert_in_default_state()
    dist, dist2 = _one_device(), _one_device()
    tps.experimental_set_strategy(dist)
    try:
        assert tps.get_replica_context() is None
        assert tps.in_cross_replica_context()
        assert tps.has_strategy()
        assert tps.get_strategy() is dist
        tps.experimental_set_strategy(dist2)
        assert tps.get_strategy() is dist2
    finally:
        tps.experimental_set_strategy(None)
    _assert_in_default_state()


@pytest.mark.parametrize("which", ["other", "same", "none"])
def test_experimental_set_strategy_inside_a_scope_is_refused(which):
    dist = _one_device()
    with dist.scope():
        target = {"other": _one_device(), "same": dist, "none": None}[which]
        with pytest.raises(RuntimeError, match="Must not be called inside a `tf.distribute.Strategy` scope"):
            tps.experimental_set_strategy(target)
    _assert_in_default_state()


def test_the_same_scope_nests_and_another_strategy_inside_is_refused():
    _assert_in_default_state()
    dist = _one_device()
    scope_a = dist.scope()
    with scope_a:
        assert tps.get_strategy() is dist
        scope_b = dist.scope()
        with scope_b:
            assert tps.get_strategy() is dist
            with scope_a:
                assert tps.get_strategy() is dist
            assert tps.get_strategy() is dist
        assert tps.get_strategy() is dist
        with pytest.raises(RuntimeError, match="Mixing different tf.distribute.Strategy objects"):
            with _one_device().scope():
                pass
    _assert_in_default_state()
    with scope_b:
        assert tps.get_strategy() is dist
    _assert_in_default_state()


def _in_and_out_of_scope(case):
    """TensorFlow's ``_run_in_and_out_of_scope``: a case passes in the default context and in
    its strategy's scope, and fails with the mixing error under another strategy's scope."""
    dist = _one_device()
    _assert_in_default_state()
    case(dist)
    with dist.scope():
        case(dist)
    _assert_in_default_state()
    with pytest.raises(RuntimeError, match="Mixing different .*Strategy objects"):
        with _one_device().scope():
            case(dist)


def test_reduce_of_a_plain_value_is_the_value():
    def case(dist):
        assert float(dist.reduce(tps.ReduceOp.MEAN, jnp.asarray(1.0), axis=None)) == 1.0
    _in_and_out_of_scope(case)


@pytest.mark.parametrize("op", ["mean", "MEAN", "sum", "SUM"])
def test_reductions_accept_string_ops(op):
    dist = _one_device()
    x, y = jnp.asarray(1.0), jnp.asarray(1.0)
    assert float(dist.reduce(op, x, axis=None)) == 1.0
    assert float(dist.extended.reduce_to(op, x, "/CPU:0")) == 1.0
    x_r, y_r = dist.extended.batch_reduce_to(op, ((x, "/CPU:0"), (y, "/CPU:0")))
    assert (float(x_r), float(y_r)) == (1.0, 1.0)


def test_reduce_to_and_batch_reduce_to_of_plain_values():
    def case(dist):
        x, y = jnp.asarray(1.0), jnp.asarray(1.0)
        assert float(dist.extended.reduce_to(tps.ReduceOp.MEAN, x, "/CPU:0")) == 1.0
        x_r, y_r = dist.extended.batch_reduce_to(tps.ReduceOp.MEAN, ((x, "/CPU:0"), (y, "/CPU:0")))
        assert (float(x_r), float(y_r)) == (1.0, 1.0)
    _in_and_out_of_scope(case)


def test_experimental_make_numpy_dataset_sums_to_ten():
    def case(dist):
        dataset = dist.experimental_make_numpy_dataset(np.ones([10], dtype=np.float32))
        assert float(dataset.reduce(0.0, lambda a, b: a + b)) == 10.0
    _in_and_out_of_scope(case)


def test_update_passes_the_variable_and_arguments_themselves():
    dist = _one_device()
    with dist.scope():
        v = tps.Variable(1.0)
    t = jnp.asarray(2.0)
    calls = []

    def assign_fn(vv, tt):
        calls.append((vv is v, tt is t))

    for scope in (None, dist):
        if scope is None:
            dist.extended.update(v, assign_fn, (t,))
        else:
            with scope.scope():
                dist.extended.update(v, assign_fn, (t,))
    assert calls == [(True, True)] * 2


def test_update_non_slot_calls_the_function_once():
    def case(dist):
        calls = []
        dist.extended.update_non_slot(jnp.asarray(2.0), lambda: calls.append(1))
        assert calls == [1]
    _in_and_out_of_scope(case)


def test_cluster_resolver_of_a_local_strategy_is_none():
    assert _one_device().cluster_resolver is None
    assert tps.MirroredStrategy(jax.devices()[:2]).cluster_resolver is None


def test_default_strategy_merge_call_runs_in_its_cross_replica_context():
    _assert_in_default_state()
    default = tps.get_strategy()
    seen = {}

    def merge_fn(dist, s):
        seen.update(dist=dist is default, replica=tps.get_replica_context(),
                    cross=tps.in_cross_replica_context(), strategy=tps.get_strategy() is dist,
                    has=tps.has_strategy())
        return "foo_" + s

    assert tps.get_replica_context().merge_call(merge_fn, args=("bar",)) == "foo_bar"
    assert seen == {"dist": True, "replica": None, "cross": True, "strategy": True, "has": False}
    _assert_in_default_state()


def test_the_default_scope_is_mostly_a_no_op_and_refuses_another_strategy_for_variables():
    _assert_in_default_state()
    test_strategy = _one_device()
    with test_strategy.scope():
        tps.Variable(1.0, name="before")
    default_scope = tps.get_strategy().scope()
    with default_scope:
        _assert_in_default_state()
        with pytest.raises(RuntimeError, match="Mixing different tf.distribute.Strategy objects"):
            with test_strategy.scope():
                tps.Variable(1.0, name="error")
        with default_scope:
            _assert_in_default_state()
        _assert_in_default_state()
    _assert_in_default_state()
    with test_strategy.scope():
        tps.Variable(1.0, name="after")


def test_default_strategy_runs_a_step_on_a_dataset_element_twice():
    default = tps.get_strategy()
    element = next(iter(default.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(2))))
    for _ in range(2):
        np.testing.assert_array_equal(np.asarray(default.run(lambda x: x, args=(element,))), [0, 1])


def test_default_strategy_distributes_datasets_and_datasets_from_function():
    default = tps.get_strategy()
    dist = default.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(2))
    np.testing.assert_array_equal(np.asarray(next(iter(dist))), [0, 1])
    dist_fn = default.experimental_distribute_datasets_from_function(
        lambda _: tpsd.Dataset.range(10).batch(2))
    np.testing.assert_array_equal(np.asarray(next(iter(dist_fn))), [0, 1])


def test_the_default_strategy_is_a_strategy():
    assert isinstance(tps.get_strategy(), tps.Strategy)


def test_input_context_properties_batch_size_and_str():
    ctx = tps.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=6)
    assert (ctx.num_replicas_in_sync, ctx.input_pipeline_id, ctx.num_input_pipelines) == (6, 1, 2)
    assert ctx.get_per_replica_batch_size(12) == 2
    with pytest.raises(ValueError):
        ctx.get_per_replica_batch_size(13)
    assert str(tps.InputContext(num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=42)) == (
        "tf.distribute.InputContext(input pipeline id 0, total: 1)")
    assert str(tps.InputContext(num_input_pipelines=3, input_pipeline_id=1, num_replicas_in_sync=42)) == (
        "tf.distribute.InputContext(input pipeline id 1, total: 3)")
