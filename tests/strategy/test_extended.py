"""``strategy.extended``: update per component, reduce_to destinations, and TensorFlow's properties."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def _s(n=None):
    """A MirroredStrategy over the first ``n`` devices (all of them by default)."""
    return tps.MirroredStrategy(devices=jax.devices()[:n])


def _sync_on_read(s, aggregation, initial=0.0):
    with s.scope():
        return tps.Variable(initial, synchronization=tps.VariableSynchronization.ON_READ, aggregation=aggregation)


def _components(s, var):
    return [float(x) for x in s.experimental_local_results(var)]


# update ------------------------------------------------------------------------------------------
def test_update_of_a_sum_sync_on_read_variable_gives_every_component_the_argument():
    s = _s()
    r = len(jax.devices())
    v = _sync_on_read(s, tps.VariableAggregation.SUM)
    result = s.extended.update(v, lambda c, x: c.assign(x), args=(5.0,))
    assert result is v
    assert _components(s, v) == [5.0] * r  # TensorFlow: fn runs on each component with 5.0
    assert float(v.read_value()) == 5.0 * r  # and the SUM read adds them up


@pytest.mark.devices(4)
def test_update_of_a_mean_sync_on_read_variable_adds_to_each_component():
    s = _s(4)
    v = _sync_on_read(s, tps.VariableAggregation.MEAN, initial=1.0)
    s.extended.update(v, lambda c, d: c.assign_add(d), args=(2.0,))
    s.extended.update(v, lambda c, d: c.assign_sub(d), kwargs={"d": 0.5})
    assert _components(s, v) == [2.5] * 4
    assert float(v.read_value()) == 2.5


@pytest.mark.devices(4)
def test_update_function_reads_its_own_component():
    s = _s(4)
    v = _sync_on_read(s, tps.VariableAggregation.SUM)
    s.extended.update(v, lambda c, x: c.assign(x), args=(s.experimental_distribute_values_from_function(
        lambda ctx: np.float32(ctx.replica_id_in_sync_group)),))
    s.extended.update(v, lambda c: c.assign(c.read_value() * 10.0 + 1.0))
    assert _components(s, v) == [1.0, 11.0, 21.0, 31.0]


@pytest.mark.devices(4)
def test_update_with_a_per_replica_argument_gives_each_component_its_own():
    s = _s(4)
    v = _sync_on_read(s, tps.VariableAggregation.SUM)
    per_replica = tps.PerReplica([np.float32(i * i) for i in range(4)])
    s.extended.update(v, lambda c, x: c.assign(x), args=(per_replica,))
    assert _components(s, v) == [0.0, 1.0, 4.0, 9.0]
    assert float(v.read_value()) == 14.0


def test_update_inside_tps_function_runs_on_each_component():
    s = _s()
    r = len(jax.devices())
    v = _sync_on_read(s, tps.VariableAggregation.SUM, initial=1.0)
    step = tps.function(lambda: s.extended.update(v, lambda c, x: c.assign_add(x), args=(5.0,)))
    step()
    step()
    assert _components(s, v) == [11.0] * r
    assert float(v.read_value()) == 11.0 * r


@pytest.mark.devices(4)
def test_update_keeps_the_variable_dtype_and_refuses_a_float_into_an_integer_variable():
    s = _s(4)
    with s.scope():
        v = tps.Variable(0, synchronization=tps.VariableSynchronization.ON_READ,
                         aggregation=tps.VariableAggregation.SUM)
    s.extended.update(v, lambda c, x: c.assign_add(x), args=(3,))
    assert [int(x) for x in s.experimental_local_results(v)] == [3] * 4
    assert np.asarray(s.experimental_local_results(v)[0]).dtype == np.int32
    with pytest.raises((TypeError, ValueError)):
        s.extended.update(v, lambda c, x: c.assign(x), args=(0.5,))


@pytest.mark.devices(4)
def test_update_of_a_mirrored_variable_runs_once_and_accepts_equal_per_replica_arguments():
    s = _s(4)
    with s.scope():
        w = tps.Variable(1.0)
    s.extended.update(w, lambda var, d: var.assign_add(d), args=(2.0,))
    assert float(w.read_value()) == 3.0
    s.extended.update(w, lambda var, d: var.assign_add(d), args=(tps.PerReplica([np.float32(1.0)] * 4),))
    assert _components(s, w) == [4.0] * 4


@pytest.mark.devices(4)
@pytest.mark.parametrize("method,expected", [("assign", 1.0), ("assign_add", 8.0), ("assign_sub", 2.0)])
@pytest.mark.parametrize("compiled_fn", [False, True], ids=["run", "tps.function"])
def test_replica_context_update_follows_tensorflows_replica_ctx_update_test(path, method, expected, compiled_fn):
    # TensorFlow's ReplicaCtxUpdateTest.testDenseUpdate: two updates, with a tensor and a Python float.
    s = _s(4)
    with s.scope():
        v = tps.Variable(5.0)

    def replica_fn():
        ctx = tps.get_replica_context()
        ctx._update(v, lambda var, value: getattr(var, method)(value), args=(jnp.asarray(2.0),))
        ctx._update(v, lambda var, value: getattr(var, method)(value), args=(1.0,))

    s.run(tps.function(replica_fn) if compiled_fn else replica_fn)
    assert _components(s, v) == [expected] * 4


@pytest.mark.devices(4)
def test_replica_context_update_of_a_sync_on_read_variable_writes_each_replicas_component(path):
    s = _s(4)
    v = _sync_on_read(s, tps.VariableAggregation.SUM)

    def replica_fn():
        ctx = tps.get_replica_context()
        rid = jnp.asarray(ctx.replica_id_in_sync_group, jnp.float32)
        ctx._update(v, lambda c, x: c.assign_add(x), args=(rid + 1.0,))

    s.run(replica_fn)
    assert _components(s, v) == [1.0, 2.0, 3.0, 4.0]
    assert float(v.read_value()) == 10.0


@pytest.mark.devices(4)
def test_replica_context_update_of_a_mirrored_variable_with_differing_values_raises():
    s = _s(4)
    with s.scope():
        v = tps.Variable(0.0)

    def replica_fn():
        ctx = tps.get_replica_context()
        ctx._update(v, lambda var, x: var.assign(x), args=(jnp.asarray(ctx.replica_id_in_sync_group, jnp.float32),))

    with pytest.raises(ValueError, match="aggregation"):
        s.run(replica_fn)
    assert _components(s, v) == [0.0] * 4


# reduce_to / batch_reduce_to ---------------------------------------------------------------------
@pytest.mark.devices(4)
def test_reduce_to_one_device_gives_an_array_that_float_accepts():
    s = _s(4)
    value = s.run(lambda: jnp.asarray(1.0) + tps.get_replica_context().replica_id_in_sync_group)
    for destination in ("/cpu:0", jax.devices()[0], jnp.asarray(0.0), tps.Variable(0.0)):
        reduced = s.extended.reduce_to(tps.ReduceOp.SUM, value, destination)
        assert not isinstance(reduced, tps.DistributedValues), destination
        assert float(reduced) == 10.0
    pairs = s.extended.batch_reduce_to("MEAN", [(value, "/cpu:0"), (value, "/cpu:0")])
    assert [float(r) for r in pairs] == [2.5, 2.5]
    np.testing.assert_array_equal(np.asarray(pairs), [2.5, 2.5])


@pytest.mark.devices(4)
def test_reduce_to_a_distributed_value_or_mirrored_variable_gives_a_mirrored_on_its_devices():
    s = _s(4)
    value = s.run(lambda: jnp.asarray(1.0))
    with s.scope():
        w = tps.Variable(0.0)
    for destination in (value, w):
        reduced = s.extended.reduce_to(tps.ReduceOp.SUM, value, destination)
        assert isinstance(reduced, tps.Mirrored)
        assert [float(x) for x in s.experimental_local_results(reduced)] == [4.0] * 4


def test_reduce_to_of_a_host_tensor_counts_it_once_per_replica():
    # TensorFlow's testReduceToHostTensor: a value equal on every replica, summed over R replicas.
    s = _s()
    assert float(s.extended.reduce_to(tps.ReduceOp.SUM, jnp.asarray(1.0), jnp.asarray(1.0))) == len(jax.devices())


def test_reduce_to_an_unknown_destination_names_what_it_received():
    s = _s(4)
    with pytest.raises(TypeError, match=r"destinations.*Received: \[1, 2\]"):
        s.extended.reduce_to("SUM", jnp.asarray(1.0), [1, 2])


# Properties and TensorFlow's private helpers --------------------------------------------------------
def test_mirrored_strategy_of_all_local_devices_has_tensorflows_extended_values():
    s = _s()
    assert s.extended.worker_devices == tuple(jax.devices())
    assert s.extended.parameter_devices == tuple(jax.devices())
    assert s.extended.num_hosts == 1
    assert s.extended.num_replicas_per_host == len(jax.devices())
    assert s.extended._num_devices_per_worker == len(jax.devices())


def test_tpu_strategy_of_all_cores_has_one_host_of_a_replica_per_core():
    s = tps.TPUStrategy()
    assert s.extended.worker_devices == tuple(jax.devices())
    assert s.extended.parameter_devices == s.extended.worker_devices
    assert (s.extended.num_hosts, s.extended.num_replicas_per_host) == (1, len(jax.devices()))


@pytest.mark.devices(8)
def test_tpu_strategy_with_two_cores_per_replica_counts_replicas_not_cores():
    grid = np.array(jax.devices()).reshape(4, 2)
    s = tps.TPUStrategy(device_assignment=tps.tpu.DeviceAssignment.from_devices(grid))
    # TensorFlow: min(num_replicas, cores_per_host // num_cores_per_replica) = min(4, 8 // 2).
    assert (s.extended.num_hosts, s.extended.num_replicas_per_host) == (1, 4)
    assert s.extended.worker_devices == tuple(grid[:, 0])


@pytest.mark.devices(4)
def test_one_device_strategy_has_one_worker_device():
    s = tps.OneDeviceStrategy(jax.devices()[3])
    assert s.extended.worker_devices == (jax.devices()[3],)
    assert (s.extended.num_hosts, s.extended.num_replicas_per_host) == (1, 1)


@pytest.mark.devices(4)
def test_local_replica_id_and_replica_ctx_all_reduce_follow_tensorflows_private_helpers(path):
    s = _s(4)

    def replica_fn():
        rid = tps.get_replica_context().replica_id_in_sync_group
        return s.extended._get_local_replica_id(rid), s.extended._replica_ctx_all_reduce("SUM", jnp.asarray(1.0))

    local, total = s.run(replica_fn)
    assert [int(x) for x in s.experimental_local_results(local)] == [0, 1, 2, 3]
    assert [float(x) for x in s.experimental_local_results(total)] == [4.0] * 4
    assert s.extended._get_local_replica_id(3) == 3


@pytest.mark.devices(2)
def test_replica_ctx_all_reduce_outside_a_replica_function_says_where_to_call_it():
    with pytest.raises(RuntimeError, match="replica context"):
        _s(4).extended._replica_ctx_all_reduce("SUM", jnp.asarray(1.0))
