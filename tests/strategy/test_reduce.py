"""strategy.reduce against TensorFlow's golden cases and hand-computed values."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tests.golden.cases import assert_close, case, ids

_VALUE_CASES = [
    pytest.param(i, marks=pytest.mark.devices(case(i)["input"]["num_replicas"]))
    for i in ids("strategy.reduce") if "per_replica_values" in case(i)["input"]
]


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


@pytest.mark.parametrize("case_id", _VALUE_CASES)
def test_reduce_matches_tensorflow_golden_case(case_id):
    c = case(case_id)
    inp = c["input"]
    s = _strategy(inp["num_replicas"])
    value = tps.PerReplica(
        [np.asarray(v, dtype=d) for v, d in zip(inp["per_replica_values"], inp["per_replica_dtypes"])]
    )
    if "error" in c:
        expected = {"InvalidArgumentError": ValueError}.get(c["error"]["type"], None)
        expected = expected or getattr(__builtins__, c["error"]["type"], None) or ValueError
        with pytest.raises(expected) as info:
            s.reduce(inp["reduce_op"], value, axis=inp["axis"])
        if c["error"]["type"] == "InvalidArgumentError":
            assert "[4]" in str(info.value) and "[2]" in str(info.value)
        else:
            assert c["error"]["core"] in str(info.value)
        return
    out = s.reduce(inp["reduce_op"], value, axis=inp["axis"])
    assert_close(np.asarray(out).tolist(), c["output"]["value"])
    assert list(np.shape(out)) == c["output"]["shape"]
    golden_dtype = c["output"]["dtype"]
    # DESIGN §5: integer MEAN gives JAX's default float dtype; int64 is int32 without x64.
    expected_dtype = {
        "float64": jnp.result_type(float),
        "int64": jnp.result_type(int),
    }.get(golden_dtype, np.dtype(golden_dtype))
    assert np.asarray(out).dtype == expected_dtype


@pytest.mark.devices(2)
def test_seed_example_mean_over_partial_batch_is_two_and_a_half():
    s = _strategy(2)
    value = tps.PerReplica([np.array([0.0, 1, 2, 3]), np.array([4.0, 5])])
    assert float(s.reduce(tps.ReduceOp.MEAN, value, axis=0)) == 2.5


@pytest.mark.devices(2)
def test_reduce_requires_axis_like_tensorflow_2():
    s = _strategy(2)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'axis'"):
        s.reduce("SUM", tps.PerReplica([1.0, 2.0]))


@pytest.mark.devices(2)
def test_plain_values_follow_design_rules():
    c = case("reduce_plain_tensor_non_distributed")
    s = _strategy(2)
    x = jnp.array([1.0, 2.0])
    assert_close(np.asarray(s.reduce("MEAN", x, axis=None)).tolist(), c["output"]["MEAN_axis_None"])
    assert_close(float(s.reduce("MEAN", x, axis=0)), c["output"]["MEAN_axis_0"])
    assert_close(float(s.reduce("SUM", x, axis=0)), c["output"]["SUM_axis_0"])
    # DESIGN §5: SUM of a value that is the same on every replica is R·v (TF raises).
    np.testing.assert_allclose(s.reduce("SUM", x, axis=None), [2.0, 4.0])


def test_single_replica_reduce_of_plain_tensor():
    c = case("reduce_single_replica_plain_tensor")["output"]
    s = _strategy(1)
    x = jnp.array([1.0, 2.0])
    assert_close(np.asarray(s.reduce("SUM", x, axis=None)).tolist(), c["SUM_none"])
    assert_close(float(s.reduce("SUM", x, axis=0)), c["SUM_0"])
    assert_close(float(s.reduce("MEAN", x, axis=0)), c["MEAN_0"])


@pytest.mark.devices(4)
def test_mirrored_mean_is_the_value_and_sum_is_r_times_it():
    s = _strategy(4)
    m = s.run(lambda: tps.get_replica_context().all_reduce("SUM", jnp.float32(1.0)))
    assert isinstance(m, tps.Mirrored)
    assert float(s.reduce("MEAN", m, axis=None)) == 4.0
    assert float(s.reduce("SUM", m, axis=None)) == 16.0


@pytest.mark.devices(2)
def test_nested_structures_reduce_leaf_by_leaf_with_axis_none():
    s = _strategy(2)
    value = {"a": tps.PerReplica([1.0, 2.0]), "b": (tps.PerReplica([np.ones(2), 3 * np.ones(2)]),)}
    out = s.reduce("SUM", value, axis=None)
    assert float(out["a"]) == 3.0
    np.testing.assert_allclose(out["b"][0], [4.0, 4.0])


@pytest.mark.devices(2)
def test_negative_and_tuple_axes_are_normalised():
    s = _strategy(2)
    a = np.arange(6.0).reshape(2, 3)
    value = tps.PerReplica([a, a + 10])
    np.testing.assert_allclose(s.reduce("SUM", value, axis=-1), a.sum(-1) + (a + 10).sum(-1))
    assert float(s.reduce("MEAN", value, axis=(0, 1))) == pytest.approx(np.mean([a, a + 10]))
    assert float(s.reduce("MEAN", value, axis=[0, -1])) == pytest.approx(np.mean([a, a + 10]))


@pytest.mark.devices(4)
def test_reduce_of_run_outputs_on_the_compiled_path():
    c = case("reduce_from_run_output_tf_function")
    s = _strategy(4)
    out = s.run(lambda: tps.get_replica_context().replica_id_in_sync_group.astype(jnp.float32))
    assert isinstance(out, tps.PerReplica)
    assert_close([float(s.reduce("SUM", out, axis=None)), float(s.reduce("MEAN", out, axis=None))], c["output"])


@pytest.mark.devices(4)
def test_reduce_of_stacked_values_with_axis_weights_by_elements():
    s = _strategy(4)
    out = s.run(lambda: jnp.arange(3.0) + tps.get_replica_context().replica_id_in_sync_group)
    assert float(s.reduce("MEAN", out, axis=0)) == pytest.approx(np.mean([np.arange(3.0) + r for r in range(4)]))
    assert float(s.reduce("SUM", out, axis=0)) == pytest.approx(np.sum([np.arange(3.0) + r for r in range(4)]))


@pytest.mark.devices(2)
def test_invalid_axis_type_raises_type_error():
    s = _strategy(2)
    with pytest.raises(TypeError, match="Expected `axis` to be an integer, tuple or list"):
        s.reduce("SUM", tps.PerReplica([np.ones(2), np.ones(2)]), axis="0")


@pytest.mark.devices(2)
def test_reduce_inside_replica_function_raises_cross_replica_error():
    c = case("reduce_in_replica_context_error")
    s = _strategy(2)
    with pytest.raises(RuntimeError, match="cross-replica context"):
        s.run(lambda: s.reduce("SUM", 1.0, None))
    assert c["error"]["core"].startswith("Method requires being in cross-replica context")


@pytest.mark.devices(2)
def test_reduce_results_are_jax_arrays():
    s = _strategy(2)
    out = s.reduce("SUM", tps.PerReplica([np.float32(1), np.float32(2)]), axis=None)
    assert isinstance(out, jax.Array)
