"""Several cores per replica: TPUStrategy(device_assignment=...) and TensorFlow's logical-device API."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import tpustrategy as tps
import tpustrategy.data as tpsd


def _strategy(replicas, cores, **kwargs):
    grid = np.array(jax.devices()[: replicas * cores]).reshape(replicas, cores)
    return tps.TPUStrategy(device_assignment=tps.tpu.DeviceAssignment.from_devices(grid), **kwargs)


@pytest.mark.devices(8)
@pytest.mark.parametrize("replicas,cores", [(4, 2), (2, 4)])
def test_the_mesh_has_replica_and_core_axes_in_assignment_order(replicas, cores):
    s = _strategy(replicas, cores)
    assert s.num_replicas_in_sync == replicas and s.num_cores_per_replica == cores
    assert s.mesh.axis_names == ("replica", "core")
    assert s.mesh.devices.tolist() == np.array(jax.devices()).reshape(replicas, cores).tolist()
    ids = s.run(lambda: tps.get_replica_context().replica_id_in_sync_group)
    assert [int(v) for v in s.experimental_local_results(ids)] == list(range(replicas))


@pytest.mark.devices(8)
@pytest.mark.parametrize("replicas,cores", [(4, 2), (2, 4)])
def test_all_reduce_sums_over_replicas_only(replicas, cores):
    s = _strategy(replicas, cores)
    out = s.run(lambda: tps.get_replica_context().all_reduce(
        "SUM", tps.get_replica_context().replica_id_in_sync_group.astype(jnp.float32) + 1))
    assert [float(v) for v in s.experimental_local_results(out)] == [replicas * (replicas + 1) / 2] * replicas
    assert float(s.reduce("SUM", out, axis=None)) == replicas * replicas * (replicas + 1) / 2


@pytest.mark.devices(8)
def test_a_device_assignment_built_from_a_topology_maps_cores_like_tensorflow():
    topology = tps.tpu.Topology(mesh_shape=[2, 2, 1, 2], device_coordinates=[[[x, y, 0, c] for y in range(2)
                                                                            for x in range(2) for c in range(2)]])
    da = tps.tpu.DeviceAssignment.build(topology, computation_shape=[1, 1, 1, 2], num_replicas=4)
    s = tps.TPUStrategy(device_assignment=da)
    devices = jax.devices()
    expected = [[devices[da.tpu_ordinal(r, c)] for c in range(2)] for r in range(4)]
    assert s.mesh.devices.tolist() == expected


@pytest.mark.devices(8)
def test_split_replicate_and_assign_set_the_core_sharding_inside_a_replica_function():
    s = _strategy(4, 2)
    x = tps.PerReplica([np.ones((3, 8), np.float32) * i for i in range(4)])

    def fn(x):
        return (s.experimental_split_to_logical_devices(x, [1, 2]),
                s.experimental_replicate_to_logical_devices(x),
                s.experimental_assign_to_logical_device(x, 1))

    split, replicated, assigned = s.run(fn, (x,))
    assert split.stacked_array().sharding.spec == P("replica", None, "core")
    assert assigned.stacked_array().sharding.spec in (P("replica"), P("replica", None, None))
    for out in (split, replicated, assigned):
        parts = s.experimental_local_results(out)
        assert [float(p[0, 0]) for p in parts] == [0.0, 1.0, 2.0, 3.0]
        assert all(p.shape == (3, 8) for p in parts)


@pytest.mark.devices(8)
def test_a_weight_split_over_two_cores_stores_half_per_device_and_trains_like_one_core():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 16)).astype(np.float32)
    y = rng.normal(size=(32, 8)).astype(np.float32)
    w0 = rng.normal(size=(16, 8)).astype(np.float32) * 0.1

    def train(strategy, split):
        with strategy.scope():
            w = tps.Variable(w0)
        if split:
            strategy.experimental_split_to_logical_devices(w, [1, 2])

        def step(xb, yb):
            if split:
                xb = strategy.experimental_replicate_to_logical_devices(xb)
            loss, g = jax.value_and_grad(lambda w: jnp.mean((jnp.tanh(xb @ w) - yb) ** 2))(w.read_value())
            w.assign_sub(0.1 * tps.get_replica_context().all_reduce("MEAN", g))
            return loss

        @tps.function
        def one(it):
            return strategy.reduce("MEAN", strategy.run(step, next(it)), axis=None)

        it = iter(strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices((x, y)).batch(16).repeat()))
        return [float(one(it)) for _ in range(6)], w

    split_losses, w = train(_strategy(4, 2), split=True)
    plain_losses, _ = train(tps.MirroredStrategy(devices=jax.devices()[:4]), split=False)
    np.testing.assert_allclose(split_losses, plain_losses, rtol=1e-5)
    assert w._value.sharding.spec == P(None, "core")
    assert {s.data.shape for s in w._value.addressable_shards} == {(16, 4)}  # half of (16, 8) per device


@pytest.mark.devices(8)
def test_a_ragged_step_runs_with_several_cores_per_replica():
    s = _strategy(4, 2)
    x = tps.PerReplica([np.ones((i + 1, 4), np.float32) for i in range(4)])
    out = s.run(lambda v: tps.get_replica_context().all_reduce("SUM", jnp.sum(v)), (x,))
    assert [float(v) for v in s.experimental_local_results(out)] == [40.0] * 4


@pytest.mark.devices(8)
def test_distributed_input_feeds_four_replicas_of_two_cores():
    s = _strategy(4, 2)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(16).batch(8))
    steps = [[np.asarray(p).tolist() for p in s.experimental_local_results(b)] for b in dist]
    assert steps == [[[0, 1], [2, 3], [4, 5], [6, 7]], [[8, 9], [10, 11], [12, 13], [14, 15]]]


@pytest.mark.parametrize("call,error,fragment", [
    (lambda s, x: s.experimental_split_to_logical_devices(x, [2]), ValueError, "rank of `tensor.shape` (2)"),
    (lambda s, x: s.experimental_split_to_logical_devices(x, [4, 1]), ValueError, "product of `partition_dimensions`"),
    (lambda s, x: s.experimental_split_to_logical_devices(x, [1, 2]), ValueError, "divisible"),
    (lambda s, x: s.experimental_split_to_logical_devices(x, ["a", 2]), TypeError, "list of ints"),
    (lambda s, x: s.experimental_assign_to_logical_device(x, 2), ValueError, "only total of 2 logical devices"),
    (lambda s, x: s.experimental_assign_to_logical_device(x, -1), ValueError, "logical device id -1"),
])
@pytest.mark.devices(8)
def test_logical_device_calls_validate_like_tensorflow(call, error, fragment):
    s = _strategy(4, 2)
    with pytest.raises(error, match=None) as info:
        call(s, jnp.ones((4, 3)))
    assert fragment in str(info.value)


@pytest.mark.devices(8)
def test_splitting_two_dimensions_at_once_names_the_supported_form():
    s = _strategy(2, 4)
    with pytest.raises(NotImplementedError, match=r"\[4, 1\]"):
        s.experimental_split_to_logical_devices(jnp.ones((4, 4)), [2, 2])


@pytest.mark.devices(8)
def test_assign_to_a_logical_device_is_refused_with_spmd_partitioning_as_in_tensorflow():
    s = _strategy(4, 2, experimental_spmd_xla_partitioning=True)
    with pytest.raises(ValueError, match="SPMD"):
        s.experimental_assign_to_logical_device(jnp.ones(2), 0)


@pytest.mark.devices(8)
def test_logical_device_scopes_are_validated():
    s = _strategy(4, 2)
    with s.scope(), s.extended.experimental_logical_device(1):
        v = tps.Variable(3.0)
    out = s.run(lambda: _scaled(v))
    assert float(s.reduce("SUM", out, axis=None)) == 4 * 15.0
    with pytest.raises(ValueError, match=r"\[0, 2\)"):
        with s.extended.experimental_logical_device(2):
            pass


def _scaled(v):
    with tps.get_replica_context().experimental_logical_device(0):
        return v * 5.0


@pytest.mark.devices(3)
def test_from_devices_rejects_a_ragged_grid_and_repeated_devices():
    d = jax.devices()
    with pytest.raises(ValueError, match="rectangular grid"):
        tps.tpu.DeviceAssignment.from_devices([[d[0], d[1]], [d[2]]])
    with pytest.raises(ValueError, match="appears twice"):
        tps.tpu.DeviceAssignment.from_devices([[d[0], d[1]], [d[1], d[2]]])
