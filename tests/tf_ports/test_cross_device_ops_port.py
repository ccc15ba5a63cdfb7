"""TensorFlow's ``tensorflow/python/distribute/cross_device_ops_test.py`` (public-API cases), ported.

``SingleWorkerCrossDeviceOpsTest.testReductionAndBroadcast`` on every public
cross-device-ops class (``ReductionToOneDevice`` with its options, ``NcclAllReduce``,
``HierarchicalCopyAllReduce``): ``reduce``, ``batch_reduce`` and ``broadcast`` onto a
``Mirrored`` on the same devices, a ``Mirrored`` on another device and a device string;
results are ``Mirrored`` on the destination's devices (unwrapped for one device) with
TensorFlow's values. TensorFlow's GPU device lists become fake CPU devices. The
``CollectiveAllReduce`` and ``_simple_reduce`` cases test private classes;
``IndexedSlices`` reductions are covered where ``tps.IndexedSlices`` is.
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def add_n(values):
    return sum(values)


CROSS_DEVICE_OPS = {
    "DefaultReductionToOneDevice": lambda: tps.ReductionToOneDevice(),
    "ReductionToCPUDeviceCrossDeviceOps": lambda: tps.ReductionToOneDevice(reduce_to_device="/cpu:0"),
    "AccumulateNCrossDeviceOp": lambda: tps.ReductionToOneDevice(accumulation_fn=add_n),
    "NcclAllReduce": lambda: tps.NcclAllReduce(),
    "HierarchicalCopy": lambda: tps.HierarchicalCopyAllReduce(8),
}
DEVICES = {"one": ["/cpu:0"], "cpu_and_other": ["/cpu:0", "/cpu:1"], "two_others": ["/cpu:1", "/cpu:2"]}


def _index(name):
    return int(name.rsplit(":", 1)[1])


def _devices(names):
    return [jax.devices()[_index(n)] for n in names]


def _per_replica(values, devices):
    placed = [jax.device_put(jnp.asarray(v), d) for v, d in zip(values, devices)]
    return placed[0] if len(placed) == 1 else tps.PerReplica(tuple(placed))


def _mirrored(value, devices):
    placed = [jax.device_put(jnp.asarray(value), d) for d in devices]
    return placed[0] if len(placed) == 1 else tps.Mirrored(tuple(placed))


def _destination_devices(destination):
    if isinstance(destination, str):
        return _devices([destination])
    if isinstance(destination, tps.DistributedValues):
        return [next(iter(v.devices())) for v in destination.values]
    return [next(iter(destination.devices()))]


def _assert_mirrored_equal(got, expected_value, destination):
    devices = _destination_devices(destination)
    if len(devices) == 1:
        assert not isinstance(got, tps.DistributedValues)
        components = [got]
    else:
        assert isinstance(got, tps.Mirrored)
        components = list(got.values)
    assert [next(iter(c.devices())) for c in components] == devices
    for c in components:
        np.testing.assert_allclose(np.asarray(c), expected_value)


@pytest.mark.parametrize("devices_name", [
    pytest.param(name, marks=pytest.mark.devices(1 + max(_index(n) for n in names)))
    for name, names in DEVICES.items()])
@pytest.mark.parametrize("ops_name", list(CROSS_DEVICE_OPS))
def test_reduction_and_broadcast(ops_name, devices_name):
    cross_device_ops = CROSS_DEVICE_OPS[ops_name]()
    devices = _devices(DEVICES[devices_name])
    n = len(devices)
    per_replica = _per_replica([float(d) for d in range(n)], devices)
    mean = (n - 1.0) / 2.0
    per_replica_2 = _per_replica([d + 1.0 for d in range(n)], devices)
    mean_2 = mean + 1.0
    all_destinations = [_mirrored(1.0, devices), _mirrored(1.0, _devices(["/cpu:0"])), "/cpu:0"]

    for destinations in all_destinations:
        _assert_mirrored_equal(cross_device_ops.reduce(tps.ReduceOp.MEAN, per_replica, destinations=destinations),
                               mean, destinations)
        _assert_mirrored_equal(cross_device_ops.reduce(tps.ReduceOp.MEAN, per_replica_2, destinations=destinations),
                               mean_2, destinations)
        _assert_mirrored_equal(cross_device_ops.reduce(tps.ReduceOp.SUM, per_replica, destinations=destinations),
                               mean * n, destinations)
        _assert_mirrored_equal(cross_device_ops.reduce(tps.ReduceOp.SUM, per_replica_2, destinations=destinations),
                               mean_2 * n, destinations)

    for d1, d2 in itertools.product(all_destinations, all_destinations):
        got = cross_device_ops.batch_reduce(tps.ReduceOp.MEAN, [(per_replica, d1), (per_replica_2, d2)])
        _assert_mirrored_equal(got[0], mean, d1)
        _assert_mirrored_equal(got[1], mean_2, d2)
        got = cross_device_ops.batch_reduce(tps.ReduceOp.SUM, [(per_replica, d1), (per_replica_2, d2)])
        _assert_mirrored_equal(got[0], mean * n, d1)
        _assert_mirrored_equal(got[1], mean_2 * n, d2)

    for destinations in all_destinations:
        _assert_mirrored_equal(cross_device_ops.broadcast(jnp.asarray(1.0), destinations), 1.0, destinations)


@pytest.mark.devices(2)
def test_reduce_onto_a_mirrored_variable_places_one_component_per_replica():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with strategy.scope():
        v = tps.Variable(0.0)
    per_replica = _per_replica([1.0, 3.0], jax.devices()[:2])
    got = tps.NcclAllReduce().reduce("SUM", per_replica, destinations=v)
    assert isinstance(got, tps.Mirrored)
    assert [np.asarray(c).item() for c in got.values] == [4.0, 4.0]


def test_batch_reduce_names_a_malformed_pair():
    with pytest.raises(ValueError, match=r"value_destination_pairs\[0\] must be a \(value, destinations\) pair"):
        tps.ReductionToOneDevice().batch_reduce("SUM", [jnp.asarray(1.0)])


def test_reduce_without_destinations_names_the_fix():
    with pytest.raises(ValueError, match="`destinations` must be a device"):
        tps.ReductionToOneDevice().reduce("SUM", jnp.asarray(1.0), destinations=None)
