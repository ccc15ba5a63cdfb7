"""ReplicaContext collectives and merge_call on both paths (golden cases)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tests.golden.cases import assert_close, case, render


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def _rid():
    return tps.get_replica_context().replica_id_in_sync_group


@pytest.mark.devices(4)
def test_all_reduce_sum_and_mean_of_floats(path):
    golden = case("allreduce_sum_mean_float_R4")["output"]["eager"]
    s = _strategy(4)
    out = s.run(lambda: tuple(tps.get_replica_context().all_reduce(op, (_rid() + 1).astype(jnp.float32))
                              for op in ("SUM", "MEAN")))
    assert_close(render(out), golden)


@pytest.mark.devices(3)
def test_all_reduce_of_vectors_is_elementwise(path):
    golden = case("allreduce_vector_R3")["output"]["eager"]
    s = _strategy(3)
    out = s.run(lambda: tps.get_replica_context().all_reduce(
        "SUM", jnp.stack([_rid(), 2 * _rid(), 3 * _rid()]).astype(jnp.float32)))
    assert_close(render(out), golden)


@pytest.mark.devices(4)
def test_integer_mean_gives_the_default_float_dtype(path):
    golden = case("allreduce_int32_mean_R4")["output"]["eager"]
    s = _strategy(4)
    out = s.run(lambda: tps.get_replica_context().all_reduce("MEAN", _rid()))
    assert_close(render(out), golden)
    assert all(np.asarray(v).dtype == jnp.result_type(float) for v in out.values)
    total = s.run(lambda: tps.get_replica_context().all_reduce("SUM", _rid()))
    assert [int(v) for v in total.values] == [6] * 4
    assert all(np.asarray(v).dtype == np.int32 for v in total.values)


@pytest.mark.devices(2)
def test_invalid_reduce_op_is_a_value_error_naming_the_op(path):
    golden = case("allreduce_invalid_op")["error"]
    s = _strategy(2)
    with pytest.raises(ValueError) as info:
        s.run(lambda: tps.get_replica_context().all_reduce("MAX", 1.0))
    assert golden["core"] in str(info.value)
    assert "ReduceOp.SUM" in str(info.value)


@pytest.mark.devices(2)
def test_all_reduce_of_nested_structures(path):
    s = _strategy(2)

    def fn():
        r = _rid().astype(jnp.float32)
        return tps.get_replica_context().all_reduce("SUM", {"a": r, "b": (r * 2, jnp.ones(2) * r)})

    out = s.run(fn)
    assert [float(v) for v in out["a"].values] == [1.0, 1.0]
    assert [float(v) for v in out["b"][0].values] == [2.0, 2.0]
    np.testing.assert_allclose(out["b"][1].values[1], [1.0, 1.0])


@pytest.mark.devices(4)
def test_gradient_of_all_reduce_is_the_same_all_reduce(path):
    # TF: y = sum_i 3·x_i, dy/dx_i = 3·R.
    s = _strategy(4)

    def fn(x):
        ctx = tps.get_replica_context()
        value, grad = jax.value_and_grad(lambda v: ctx.all_reduce("SUM", 3.0 * v))(x)
        mean_grad = jax.grad(lambda v: ctx.all_reduce("MEAN", 3.0 * v))(x)
        return value, grad, mean_grad

    x = tps.PerReplica([np.float32(i + 1) for i in range(4)])
    value, grad, mean_grad = s.run(fn, (x,))
    assert [float(v) for v in value.values] == [30.0] * 4
    assert [float(v) for v in grad.values] == [12.0] * 4
    assert [float(v) for v in mean_grad.values] == [3.0] * 4


@pytest.mark.devices(3)
def test_all_gather_concatenates_in_replica_order(path):
    s = _strategy(3)
    out = s.run(lambda: tps.get_replica_context().all_gather(
        jnp.stack([_rid(), _rid() + 10]), axis=0))
    for v in out.values:
        assert np.asarray(v).tolist() == [0, 10, 1, 11, 2, 12]


@pytest.mark.devices(3)
def test_merge_call_groups_per_replica_args_and_hands_back_components(path):
    golden = case("merge_call_grouping_R3")["output"]
    s = _strategy(3)
    saw = []

    def merge_fn(strategy, x, k):
        saw.append((type(x).__name__, k, tps.in_cross_replica_context(), strategy is s))
        total = strategy.reduce("SUM", x, axis=None)
        return total, tps.PerReplica([v + 1 for v in x.values])

    def fn(x):
        return tps.get_replica_context().merge_call(merge_fn, args=(x,), kwargs={"k": 7})

    x = s.experimental_distribute_values_from_function(
        lambda c: np.int32(c.replica_id_in_sync_group * 10))
    a, b = s.run(fn, (x,))
    assert saw == [("PerReplica", golden["merge_fn_saw"][0]["kwarg_value"], True, True)]
    assert len(saw) == golden["merge_fn_calls"]
    for v in s.experimental_local_results(a):
        assert int(v) == golden["result"][0]
    assert_close(render(b), golden["result"][1])


@pytest.mark.devices(2)
def test_merge_call_count_mismatch_raises_tensorflows_error():
    golden = case("merge_call_count_mismatch_error")["error"]
    tps.config.run_functions_eagerly(True)
    try:
        s = _strategy(2)

        def fn():
            ctx = tps.get_replica_context()
            if int(ctx.replica_id_in_sync_group) == 0:
                ctx.merge_call(lambda strategy: None)
            return 1

        with pytest.raises(RuntimeError) as info:
            s.run(fn)
        assert str(info.value).startswith(golden["message"])
    finally:
        tps.config.run_functions_eagerly(False)


@pytest.mark.devices(2)
def test_merge_call_outside_run_raises():
    s = _strategy(2)
    captured = []
    s.run(lambda: captured.append(tps.get_replica_context()))
    with pytest.raises(RuntimeError, match="Need to be inside `call_for_each_replica"):
        captured[0].merge_call(lambda strategy: None)


def test_merge_call_in_the_default_context_calls_merge_fn_directly():
    out = tps.get_replica_context().merge_call(lambda strategy, x: (strategy, x * 2), args=(3,))
    assert out[0] is tps.get_strategy() and out[1] == 6


@pytest.mark.devices(3)
def test_local_results_of_various_values():
    golden = case("local_results_various")["output"]
    s = _strategy(3)
    pr = s.experimental_distribute_values_from_function(lambda c: np.int32(c.replica_id_in_sync_group))
    assert render(list(s.experimental_local_results(pr))) == golden["PerReplica"]["value"]
    assert render(list(s.experimental_local_results(jnp.array([1, 2])))) == golden["plain_tensor"]["value"]
    assert list(s.experimental_local_results(5)) == golden["python_int"]["value"]
    assert list(s.experimental_local_results(None)) == golden["None"]["value"]
    nested = s.experimental_local_results((pr, jnp.int32(9)))
    assert render(list(nested)) == golden["nested_tuple"]["value"]
    nested_dict = s.experimental_local_results({"a": pr, "b": 1})
    assert render(list(nested_dict)) == golden["nested_dict"]["value"]


@pytest.mark.devices(4)
def test_values_from_function_passes_value_contexts():
    golden = case("dff_values_from_function")["output"]
    s = _strategy(4)
    seen = []

    def value_fn(ctx):
        seen.append([ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync, str(ctx)])
        return ctx.replica_id_in_sync_group * 10

    value = s.experimental_distribute_values_from_function(value_fn)
    assert seen == golden["contexts"]
    assert isinstance(value, tps.PerReplica)
    assert list(value.values) == golden["value"]["values"]


@pytest.mark.devices(2)
def test_gather_concatenates_components_along_an_axis():
    s = _strategy(2)
    pr = tps.PerReplica([np.array([[1, 2]]), np.array([[3, 4], [5, 6]])])
    np.testing.assert_array_equal(s.gather(pr, axis=0), [[1, 2], [3, 4], [5, 6]])
    out = s.run(lambda: jnp.stack([_rid(), _rid()]))
    np.testing.assert_array_equal(s.gather(out, axis=0), [0, 0, 1, 1])


@pytest.mark.devices(3)
def test_all_reduce_results_are_mirrored_on_both_paths(path):
    s = _strategy(3)
    out, own = s.run(lambda: (tps.get_replica_context().all_reduce("SUM", _rid()), _rid()))
    assert isinstance(out, tps.Mirrored) and isinstance(own, tps.PerReplica)
    assert [int(v) for v in out.values] == [3, 3, 3]
