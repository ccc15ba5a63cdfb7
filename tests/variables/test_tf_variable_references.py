"""Sparse updates of aggregated mirrored variables, and save / restore of sync-on-read variables,
against TensorFlow 2.21's values.

``fixtures/tf_variable_references.json`` and ``fixtures/sum_on_read/`` are written by
``tools/make_tf_variable_references.py`` with TensorFlow 2.21 on ``MirroredStrategy`` over
logical CPU devices. The scatter cases include TensorFlow's own
``mirrored_variable_test.testScatterDiv`` (SUM, int32: ``[[0, 2, 1], [0, 2, 1]]``) and
``testScatterMul`` (MEAN: ``[[2, 1.5, 1], [2, 1.5, 1]]``).
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
with open(os.path.join(FIXTURES, "tf_variable_references.json")) as _f:
    TF = json.load(_f)

# TensorFlow raises NotImplementedError for every scatter on a sync-on-read variable; ours updates the
# replica's component (README "Where we differ"), so that case is checked by test_sparse_ops instead.
REPLICA_CASES = sorted(k for k, case in TF["scatter"].items() if case["synchronization"] == "ON_WRITE")


def _strategy(replicas):
    return tps.MirroredStrategy(devices=jax.devices()[:replicas])


def _needs(replicas):
    return pytest.mark.skipif(len(jax.devices()) < replicas, reason=f"needs {replicas} devices")


@pytest.mark.parametrize("name", REPLICA_CASES)
def test_a_scatter_in_a_replica_function_gives_tensorflows_components(name, path):
    case = TF["scatter"][name]
    if len(jax.devices()) < case["replicas"]:
        pytest.skip(f"needs {case['replicas']} devices")
    strategy = _strategy(case["replicas"])
    dtype = np.dtype(case["dtype"])
    with strategy.scope():
        v = tps.Variable(np.asarray(case["initial"], dtype), aggregation=case["aggregation"])
    values, indices = jnp.asarray(case["values"], jnp.float32), jnp.asarray(case["indices"], jnp.int32)

    def step():
        rid = tps.get_replica_context().replica_id_in_sync_group
        row = jnp.take(values, rid)[None].astype(dtype)   # one row per replica, as TensorFlow's test
        getattr(v, case["op"])(tps.IndexedSlices(row, jnp.take(indices, rid)[None]))
        return v.read_value()

    tf = case["tf"]
    if "error" in tf:
        assert tf["error"] == "NotImplementedError"
        with pytest.raises(NotImplementedError, match=tf["message"].split(": ", 1)[-1].split(" (")[0]):
            strategy.run(step)
        return
    returned = strategy.run(step)
    assert [np.asarray(r).tolist() for r in strategy.experimental_local_results(returned)] == tf["value"]["returned"]
    assert [np.asarray(c).tolist() for c in v.values] == tf["value"]["components"]
    assert np.asarray(v.numpy()).dtype == dtype


@pytest.mark.parametrize("name", sorted(TF["cross_replica_scatter"]))
def test_a_cross_replica_scatter_of_an_aggregated_mirrored_variable(name):
    case = TF["cross_replica_scatter"][name]
    if len(jax.devices()) < case["replicas"]:
        pytest.skip(f"needs {case['replicas']} devices")
    strategy = _strategy(case["replicas"])
    with strategy.scope():
        v = tps.Variable(np.asarray(case["initial"], np.float32), aggregation=case["aggregation"])
    update = tps.IndexedSlices(np.asarray(case["values"], np.float32), np.asarray(case["indices"]))
    tf = case["tf"]
    if "error" in tf:
        with pytest.raises(NotImplementedError, match=tf["message"].split(" (")[0]):
            getattr(v, case["op"])(update)
        return
    getattr(v, case["op"])(update)
    assert [np.asarray(c).tolist() for c in v.values] == tf["value"]["components"]


def _on_read(strategy, case):
    with strategy.scope():
        return tps.Variable(np.zeros((), case["dtype"]), synchronization=tps.VariableSynchronization.ON_READ,
                            aggregation=case["aggregation"])


def _set_components(v, components, dtype):
    v.assign(tps.PerReplica([np.asarray(c, dtype) for c in components]))


@pytest.mark.parametrize("name", sorted(TF["restore"]))
def test_a_sync_on_read_variable_saves_its_aggregate_and_restores_as_tensorflow(name, tmp_path):
    """TensorFlow saves the aggregate and restores it onto every replica, divided by the replica count
    for SUM: [4, 3] saves 7 and comes back as [3.5, 3.5] (int32: [3, 3], read 6)."""
    case = TF["restore"][name]
    if len(jax.devices()) < case["replicas"]:
        pytest.skip(f"needs {case['replicas']} devices")
    strategy = _strategy(case["replicas"])
    v = _on_read(strategy, case)
    _set_components(v, case["components"], case["dtype"])
    for fmt in ("tpustrategy", "tensorflow"):
        prefix = tps.train.Checkpoint(v=v).write(str(tmp_path / fmt), format=fmt)
        assert tps.train.load_variable(prefix, "v") == case["saved"]
        fresh = _on_read(strategy, case)
        _set_components(fresh, [99] * case["replicas"], case["dtype"])
        tps.train.Checkpoint(v=fresh).read(prefix).assert_consumed()
        assert [np.asarray(c).tolist() for c in fresh.values] == case["restored_components"], fmt
        assert fresh.numpy().tolist() == case["read"], fmt


@_needs(2)
def test_tensorflows_checkpoint_of_a_sum_sync_on_read_variable_restores_its_share_on_each_replica():
    case = TF["restore"]["sum_on_read_R2"]
    v = _on_read(_strategy(2), case)
    tps.train.Checkpoint(v=v).read(os.path.join(FIXTURES, case["prefix"])).assert_consumed()
    assert [float(c) for c in v.values] == case["restored_components"] == [3.5, 3.5]
    assert float(v.numpy()) == case["read"] == 7.0


@_needs(8)
def test_a_sum_sync_on_read_variable_restores_onto_another_replica_count(tmp_path):
    case = TF["restore"]["sum_on_read_R2"]
    v = _on_read(_strategy(2), case)
    _set_components(v, case["components"], case["dtype"])
    prefix = tps.train.Checkpoint(v=v).write(str(tmp_path / "two"))
    wide = _on_read(_strategy(8), case)
    tps.train.Checkpoint(v=wide).read(prefix).assert_consumed()
    assert [float(c) for c in wide.values] == [7.0 / 8] * 8   # TensorFlow's rule: value / replicas
    assert float(wide.numpy()) == 7.0
