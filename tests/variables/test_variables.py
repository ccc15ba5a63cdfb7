"""tps.Variable semantics against TensorFlow's golden cases (and DESIGN §5 where we differ)."""

from __future__ import annotations

import json

import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tests.golden.cases import assert_close, case, ids, render


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def _components(s, v):
    return [float(np.asarray(c)) for c in s.experimental_local_results(v)]


_UPDATE_CASES = [
    pytest.param(i, marks=pytest.mark.devices(case(i)["input"]["num_replicas"])) for i in ids("variables")
    if i.startswith("var_replica_") and case(i)["input"].get("aggregation") in ("SUM", "MEAN", "ONLY_FIRST_REPLICA")
    and "method" in case(i)["input"]
]


@pytest.mark.parametrize("case_id", _UPDATE_CASES)
def test_replica_context_updates_match_tensorflow(case_id, path):
    c = case(case_id)
    inp, out = c["input"], c["output"]
    s = _strategy(inp["num_replicas"])
    with s.scope():
        v = tps.Variable(inp["initial_value"], aggregation=inp["aggregation"])

    def fn():
        rid = tps.get_replica_context().replica_id_in_sync_group
        getattr(v, inp["method"])(rid.astype(jnp.float32) + 1.0)
        return v.read_value()

    reads = s.run(fn)
    assert_close(render(reads), out["per_replica_read_after_update"])
    assert_close(_components(s, v), out["component_values_after"])
    assert_close(float(v.read_value()), out["cross_replica_read"])


@pytest.mark.devices(4)
def test_mean_update_with_a_python_float_passes_it_through(path):
    out = case("var_replica_assign_add_MEAN_python_float")["output"]
    s = _strategy(4)
    with s.scope():
        v = tps.Variable(1.0, aggregation="MEAN")
    s.run(lambda: v.assign_add(1.0))
    assert_close(_components(s, v), out["component_values_after"])


@pytest.mark.devices(4)
def test_sum_update_with_a_replica_invariant_value_adds_r_times_it(path):
    # DESIGN §5: TF raises "A non-DistributedValues value 1.0 cannot be reduced ..."; we give R·v.
    s = _strategy(4)
    with s.scope():
        v = tps.Variable(1.0, aggregation=tps.VariableAggregation.SUM)
    s.run(lambda: v.assign_add(1.0))
    assert _components(s, v) == [5.0] * 4


@pytest.mark.devices(4)
def test_none_aggregation_with_differing_values_asks_for_an_aggregation(path):
    # DESIGN §5: TF silently diverges the copies (var_replica_assign_NONE_R4); we raise.
    assert case("var_replica_assign_NONE_R4")["output"]["component_values_after"] == [1.0, 2.0, 3.0, 4.0]
    s = _strategy(4)
    with s.scope():
        v = tps.Variable(1.0)
    with pytest.raises(ValueError, match="aggregation") as info:
        s.run(lambda: v.assign(tps.get_replica_context().replica_id_in_sync_group.astype(jnp.float32)))
    assert "Fix:" in str(info.value)
    assert _components(s, v) == [1.0] * 4


@pytest.mark.devices(3)
def test_none_aggregation_with_a_replica_invariant_value_is_allowed(path):
    s = _strategy(3)
    with s.scope():
        v = tps.Variable(1.0)
    s.run(lambda: v.assign(5.0))
    assert _components(s, v) == [5.0] * 3


@pytest.mark.devices(3)
def test_integer_sum_variable(path):
    s = _strategy(3)
    with s.scope():
        v = tps.Variable(0, aggregation="SUM")
    s.run(lambda: v.assign_add(tps.get_replica_context().replica_id_in_sync_group))
    assert _components(s, v) == [3.0] * 3
    assert np.asarray(v.read_value()).dtype == np.int32


@pytest.mark.devices(3)
def test_cross_replica_assign_applies_the_value_to_every_copy():
    out = case("var_cross_replica_assign")["output"]
    for agg in ("NONE", "SUM", "MEAN"):
        s = _strategy(3)
        with s.scope():
            v = tps.Variable(1.0, aggregation=agg)
            v.assign(5.0)
            assert _components(s, v) == out[agg]["after_assign_5"]
            v.assign_add(2.0)
            assert _components(s, v) == out[agg]["after_assign_add_2"]
        v.assign_add(1.0)
        assert _components(s, v) == out[agg]["after_assign_add_1_outside_scope"]


@pytest.mark.devices(4)
@pytest.mark.parametrize("agg", ["SUM", "MEAN", "ONLY_FIRST_REPLICA"])
def test_sync_on_read_variables_aggregate_on_read(agg, path):
    c = ids("variables")
    golden_id = f"var_sync_on_read_{agg}_R4"
    golden = case(golden_id)["output"] if golden_id in c else None
    s = _strategy(4)
    with s.scope():
        v = tps.Variable(0.0, synchronization=tps.VariableSynchronization.ON_READ, aggregation=agg)
    reads = s.run(lambda: (v.assign_add(tps.get_replica_context().replica_id_in_sync_group.astype(jnp.float32) + 1.0),
                           v.read_value())[1])
    assert _components(s, v) == [1.0, 2.0, 3.0, 4.0]
    assert [float(x) for x in reads.values] == [1.0, 2.0, 3.0, 4.0]
    expected = {"SUM": 10.0, "MEAN": 2.5, "ONLY_FIRST_REPLICA": 1.0}[agg]
    assert float(v.read_value()) == expected
    if golden is not None:
        assert golden["cross_replica_read_value"] == expected
    with s.scope():
        v.assign(8.0)
    assert _components(s, v) == ([2.0] * 4 if agg == "SUM" else [8.0] * 4)
    if agg == "SUM":
        with pytest.raises(ValueError, match="does not support `assign_add` in cross-replica context"):
            with s.scope():
                v.assign_add(1.0)
    else:
        with s.scope():
            v.assign_add(1.0)
        assert _components(s, v) == [9.0] * 4


@pytest.mark.devices(2)
def test_sync_on_read_none_raises_on_cross_replica_read():
    s = _strategy(2)
    with s.scope():
        v = tps.Variable(0.0, synchronization="ON_READ")
    with pytest.raises(ValueError, match="Could not convert from `tf.VariableAggregation`"):
        v.read_value()


@pytest.mark.devices(2)
def test_creation_errors_match_tensorflow():
    s = _strategy(2)
    golden = case("var_sync_none_error")["error"]["message"]
    with s.scope():
        with pytest.raises(ValueError) as info:
            tps.Variable(1.0, synchronization=tps.VariableSynchronization.NONE, name="vnone")
        assert str(info.value) == golden
        with pytest.raises(ValueError) as info:
            tps.Variable(1, aggregation="MEAN")
        assert str(info.value).startswith(case("var_MEAN_int_variable_creation_error")["error"]["message"])
        with pytest.raises(ValueError, match="Invalid variable aggregation mode"):
            tps.Variable(1.0, aggregation="MAX")


@pytest.mark.devices(2)
def test_creation_types_and_attributes():
    golden = case("var_creation_types")["output"]
    s = _strategy(2)
    plain = tps.Variable(1.0)
    assert not plain._tps_distributed_variable
    with s.scope():
        v = tps.Variable(1.0)
        r = tps.Variable(0.0, synchronization="ON_READ", aggregation="MEAN")
        t = tps.Variable(0.0, synchronization="ON_READ", trainable=True)
    assert v.name == golden["default"]["name"]
    assert v.trainable is golden["default"]["trainable"]
    assert str(v.synchronization) == golden["default"]["synchronization"]
    assert _components(s, v) == golden["default"]["component_values"]
    assert r.trainable is golden["ON_READ_MEAN"]["trainable"]
    assert t.trainable is True
    assert len(s.experimental_local_results(r)) == golden["ON_READ_MEAN"]["num_components"]


@pytest.mark.devices(4)
def test_plain_variable_updated_in_run_gets_every_replicas_update(path):
    out = case("var_outside_scope_used_in_run")["output"]
    s = _strategy(4)
    v = tps.Variable(0.0)
    s.run(lambda: v.assign_add(tps.get_replica_context().replica_id_in_sync_group.astype(jnp.float32) + 1.0))
    assert float(v.read_value()) == out["final_value"]


@pytest.mark.devices(3)
def test_variable_from_another_strategy_raises_the_mixing_error(path):
    golden = case("e2e_variable_from_other_strategy")["error"]["core"]
    a, b = _strategy(2), _strategy(3)
    with a.scope():
        v = tps.Variable(0.0)
    with pytest.raises(RuntimeError) as info:
        b.run(lambda: v.assign_add(1.0))
    assert str(info.value).startswith(golden.split(":")[0])


@pytest.mark.devices(2)
def test_variable_created_inside_run_is_shared_and_mirrored(path):
    s = _strategy(2)
    made = []

    def fn():
        if not made:
            made.append(tps.Variable(3.0))
        return made[0].read_value()

    out = s.run(fn)
    assert isinstance(made[0], tps.Variable) and made[0]._tps_distributed_variable
    assert [float(x) for x in s.experimental_local_results(out)] == [3.0, 3.0]


@pytest.mark.devices(2)
def test_scatter_update_on_sum_variable_is_not_supported():
    golden = case("var_scatter_update_SUM_error")["error"]["message"]
    s = _strategy(2)
    with s.scope():
        v = tps.Variable(jnp.zeros(3), aggregation="SUM")
    with pytest.raises(NotImplementedError) as info:
        v.scatter_update(([0], [1.0]))
    assert str(info.value).startswith(golden.split(", got")[0])


def test_variables_support_arithmetic_and_numpy():
    v = tps.Variable(jnp.array([1.0, 2.0]))
    np.testing.assert_allclose(v + 1, [2.0, 3.0])
    np.testing.assert_allclose(2 * v, [2.0, 4.0])
    np.testing.assert_allclose(jnp.sum(jnp.asarray(v)), 3.0)
    assert v.numpy().tolist() == [1.0, 2.0]
    assert json.dumps(v.numpy().tolist())


def test_unique_id_names_one_variable_and_a_deepcopy_gets_its_own():
    import copy

    a, b = tps.Variable(1.0), tps.Variable(2.0)
    assert a.unique_id != b.unique_id
    c = copy.deepcopy(a)
    assert c.unique_id not in (a.unique_id, b.unique_id)
    assert a.ref() == a.ref() and hash(a.ref()) == hash(a.ref())
    assert a.ref() != c.ref()
