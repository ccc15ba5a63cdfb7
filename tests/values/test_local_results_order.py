"""``experimental_local_results`` is in replica order whatever order the strategy's devices are in.

A small per-replica result (a loss) comes back as a per-device copy whose buffers are read
straight off the array (``views.per_device_components``); the order of those buffers is the
sharding's device order, which is the replicas' order only when the devices were listed in
order. Here they are not: replica ``r`` runs on the ``r``-th device listed.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

pytestmark = pytest.mark.devices(4)


@pytest.mark.parametrize("devices", [["/cpu:0", "/cpu:1", "/cpu:2", "/cpu:3"],
                                     ["/cpu:2", "/cpu:0", "/cpu:3", "/cpu:1"]])
def test_small_results_come_back_in_replica_order_on_each_replicas_device(devices):
    strategy = tps.MirroredStrategy(devices)

    def step():
        r = tps.get_replica_context().replica_id_in_sync_group
        return jnp.float32(10.0) * r, jnp.full((3,), 1.0) * r  # a scalar loss, a small vector

    for _ in range(2):  # the first call builds the program, the second takes the fast path
        loss, vec = strategy.run(step)
        losses = strategy.experimental_local_results(loss)
        assert [float(x) for x in losses] == [0.0, 10.0, 20.0, 30.0]
        assert [x.shape for x in losses] == [()] * 4
        want_devices = [int(d.split(":")[1]) for d in devices]
        assert [next(iter(x.devices())).id for x in losses] == want_devices
        for r, x in enumerate(strategy.experimental_local_results(vec)):
            np.testing.assert_array_equal(np.asarray(x), [float(r)] * 3)
            assert next(iter(x.devices())).id == want_devices[r]
