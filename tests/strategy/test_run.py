"""strategy.run: contexts, argument handling, regrouping, errors (golden cases)."""

from __future__ import annotations

import collections
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tests.golden.cases import assert_close, case, render


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def _state():
    ctx = tps.get_replica_context()
    return {
        "replica_context_is_none": ctx is None,
        "in_cross_replica_context": tps.in_cross_replica_context(),
        "has_strategy": tps.has_strategy(),
    }


@pytest.mark.devices(2)
def test_context_states_in_default_scope_run_and_merge_fn(path):
    golden = case("replica_context_states")["output"]
    s = _strategy(2)
    default = _state()
    assert default == {k: golden["default"][k] for k in default}
    assert tps.get_strategy().num_replicas_in_sync == 1
    assert int(tps.get_replica_context().replica_id_in_sync_group) == 0
    with s.scope():
        assert _state() == {k: golden["scope"][k] for k in _state()}
        assert tps.get_strategy() is s
    seen = []
    merge_calls = []

    def merge_fn(strategy):
        merge_calls.append(1)
        seen.append(("merge", _state(), tps.get_strategy() is s))

    def fn():
        seen.append(("run", _state(), tps.get_strategy() is s))
        tps.get_replica_context().merge_call(merge_fn)
        ctx = tps.get_replica_context()
        return ctx.replica_id_in_sync_group, ctx.num_replicas_in_sync

    ids, n = s.run(fn)
    assert [int(v) for v in ids.values] == [st["replica_id_in_sync_group"] for st in golden["inside_run"]]
    assert n == 2
    run_states = [st for kind, st, _ in seen if kind == "run"]
    assert all(st == {k: golden["inside_run"][0][k] for k in st} for st in run_states)
    merge_states = [st for kind, st, _ in seen if kind == "merge"]
    assert merge_states == [{k: golden["inside_merge_fn"][0][k] for k in merge_states[0]}]
    assert len(merge_calls) == golden["merge_fn_invocations_for_2_replicas"]
    assert all(is_s for _, _, is_s in seen)


@pytest.mark.devices(4)
@pytest.mark.parametrize("case_id", ["run_replica_ids_R4_eager", "run_replica_ids_R4_tf_function"])
def test_replica_ids_are_global_and_num_replicas_is_a_python_int(case_id, path):
    golden = case(case_id)["output"]["value"]
    s = _strategy(4)
    ids, n = s.run(lambda: (tps.get_replica_context().replica_id_in_sync_group,
                            tps.get_replica_context().num_replicas_in_sync))
    expected = golden[0] if isinstance(golden, list) else golden
    assert_close(render(ids), expected)
    assert isinstance(n, int) and n == 4
    assert all(np.asarray(v).dtype == np.int32 for v in ids.values)


@pytest.mark.devices(2)
def test_args_must_be_a_tuple_or_list():
    golden = case("run_args_not_tuple_error")["error"]
    s = _strategy(2)
    with pytest.raises(ValueError) as info:
        s.run(lambda x: x, args=5)
    # TensorFlow's text first (programs match on it), then what to do about it.
    first, *rest = str(info.value).split("\n")
    assert first == golden["message"]
    assert "args=(value,)" in "\n".join(rest)


@pytest.mark.devices(2)
def test_run_inside_a_replica_function_raises():
    s = _strategy(2)
    with pytest.raises(RuntimeError, match="cross-replica context"):
        s.run(lambda: s.run(lambda: 1))


@pytest.mark.devices(2)
def test_scope_inside_a_replica_function_raises(path):
    s = _strategy(2)

    def fn():
        with s.scope():
            pass

    with pytest.raises(RuntimeError, match="cross-replica context"):
        s.run(fn)


@pytest.mark.devices(3)
def test_mixing_strategies_raises_with_both_named():
    a, b = _strategy(2), _strategy(3)
    with a.scope():
        with pytest.raises(RuntimeError, match="Mixing different tf.distribute.Strategy objects") as info:
            b.run(lambda: 1)
        assert hex(id(a))[2:] in str(info.value) and hex(id(b))[2:] in str(info.value)
        with pytest.raises(RuntimeError, match="Mixing different"):
            with b.scope():
                pass
        with pytest.raises(RuntimeError, match="Mixing different"):
            b.reduce("SUM", 1.0, axis=None)


@pytest.mark.devices(2)
def test_same_strategy_scope_nests():
    s = _strategy(2)
    with s.scope():
        with s.scope():
            assert tps.get_strategy() is s
        assert tps.get_strategy() is s
        out = s.run(lambda: tps.get_replica_context().replica_id_in_sync_group)
    assert [int(v) for v in out.values] == [0, 1]
    assert not tps.has_strategy()


@pytest.mark.devices(3)
def test_per_replica_args_are_split_and_others_broadcast(path):
    s = _strategy(3)
    pr = s.experimental_distribute_values_from_function(
        lambda ctx: np.float32(ctx.replica_id_in_sync_group * 10)
    )
    out = s.run(lambda x, y, scale=1.0: x * scale + y, args=(pr, jnp.float32(1.0)), kwargs={"scale": 2.0})
    assert [float(v) for v in out.values] == [1.0, 21.0, 41.0]


@pytest.mark.devices(2)
def test_per_replica_kwargs_are_split():
    s = _strategy(2)
    pr = tps.PerReplica([np.array([1.0, 2.0]), np.array([3.0, 4.0])])
    out = s.run(lambda *, v: jnp.sum(v), kwargs={"v": pr})
    assert [float(x) for x in out.values] == [3.0, 7.0]


@pytest.mark.devices(2)
def test_return_structures_keep_python_values_unwrapped(path):
    s = _strategy(2)
    Point = collections.namedtuple("Point", "x y")
    captured = jnp.array([1, 2])

    def fn():
        rid = tps.get_replica_context().replica_id_in_sync_group
        return {"none": None, "int": 3, "float": 1.5, "captured": captured, "p": Point(rid, [rid, 7])}

    out = s.run(fn)
    assert out["none"] is None and out["int"] == 3 and out["float"] == 1.5
    assert out["captured"] is captured
    assert isinstance(out["p"], Point)
    assert [int(v) for v in out["p"].x.values] == [0, 1]
    assert out["p"].y[1] == 7


def test_single_replica_returns_plain_arrays(path):
    s = _strategy(1)
    out = s.run(lambda: tps.get_replica_context().replica_id_in_sync_group)
    assert not isinstance(out, tps.DistributedValues)
    assert int(out) == 0
    assert len(s.experimental_local_results(out)) == 1


@pytest.mark.devices(4)
def test_all_reduce_results_come_back_mirrored_on_the_compiled_path():
    s = _strategy(4)
    w = jnp.ones(3)

    def fn(x):
        ctx = tps.get_replica_context()
        g = ctx.all_reduce("MEAN", x)
        return g, w - 0.1 * g, x + 1

    g, new_w, y = s.run(fn, (tps.PerReplica([np.full(3, float(i)) for i in range(4)]),))
    assert isinstance(g, tps.Mirrored) and isinstance(new_w, tps.Mirrored)
    assert isinstance(y, tps.PerReplica)
    np.testing.assert_allclose(new_w.values[3], np.ones(3) - 0.15)


@pytest.mark.devices(2)
def test_function_is_traced_once_per_input_signature():
    s = _strategy(2)
    traces = []

    def fn(x):
        traces.append(1)
        return x * 2

    for _ in range(3):
        s.run(fn, (jnp.ones(3),))
    s.run(fn, (jnp.ones(4),))
    assert len(traces) == 2


def test_default_strategy_runs_and_reduces():
    golden = case("default_strategy_run_reduce")["output"]
    s = tps.get_strategy()
    assert s.num_replicas_in_sync == golden["num_replicas_in_sync"]
    assert int(s.run(lambda: tps.get_replica_context().replica_id_in_sync_group)) == golden["run"]
    x = jnp.array([1.0, 2.0])
    assert_close(np.asarray(s.reduce("SUM", x, axis=None)).tolist(), golden["reduce_sum_axis_none"])
    assert float(s.reduce("SUM", x, axis=0)) == golden["reduce_sum_axis0"]
    assert float(s.reduce("MEAN", x, axis=0)) == golden["reduce_mean_axis0"]
    assert s.experimental_local_results(3) == tuple(golden["local_results"])


@pytest.mark.devices(2)
def test_experimental_run_v2_is_run():
    s = _strategy(2)
    out = s.experimental_run_v2(lambda: tps.get_replica_context().replica_id_in_sync_group)
    assert [int(v) for v in out.values] == [0, 1]


@pytest.mark.devices(2)
def test_an_exception_in_the_replica_function_reaches_the_caller(path):
    s = _strategy(2)

    def fn():
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        s.run(fn)


def test_tpu_strategy_falls_back_to_default_backend_devices():
    s = tps.TPUStrategy()
    assert s.num_replicas_in_sync == len(jax.devices())
    out = s.run(lambda: tps.get_replica_context().all_reduce("SUM", 1.0))
    assert float(s.experimental_local_results(out)[0]) == len(jax.devices())


@pytest.mark.devices(4)
def test_one_device_strategy_has_one_replica():
    s = tps.OneDeviceStrategy("/cpu:3")
    assert s.num_replicas_in_sync == 1
    assert s.worker_devices == (jax.devices()[3],)
    assert float(s.run(lambda x: x + 1, (1.0,))) == 2.0


def test_bad_device_string_names_the_device_and_the_fix():
    with pytest.raises(ValueError, match="'/cpu:99' does not exist"):
        tps.MirroredStrategy(["/cpu:99"])


@pytest.mark.devices(2)
def test_python_control_flow_on_replica_values_falls_back_to_the_eager_path_with_a_warning():
    s = _strategy(2)

    def fn():
        ctx = tps.get_replica_context()
        if ctx.replica_id_in_sync_group == 0:
            return 10
        return 20

    with pytest.warns(UserWarning, match="runs eagerly") as record:
        out = s.run(fn)
    assert "Fix:" in str(record[0].message)
    assert list(out.values) == [10, 20]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(s.run(fn).values) == [10, 20]  # remembered: no second warning


@pytest.mark.devices(2)
def test_compute_average_loss_divides_by_the_global_batch():
    golden = case("e2e_compute_average_loss_R2")["output"]
    s = _strategy(2)
    losses = tps.PerReplica([np.array(v, np.float32) for v in case("e2e_compute_average_loss_R2")["input"]["per_replica_losses"]])
    out = s.run(lambda x: (tps.nn.compute_average_loss(x), tps.nn.compute_average_loss(x, global_batch_size=10)), (losses,))
    assert_close(render(out), golden["per_replica"])
    assert_close([float(s.reduce("SUM", o, axis=None)) for o in out], golden["sum_over_replicas"])
