"""One replica: TensorFlow's semantics where they differ by strategy."""

from __future__ import annotations

import jax
import numpy as np

import tpustrategy as tps


def test_values_from_function_wraps_one_replica_except_on_one_device_strategy():
    # TensorFlow: OneDeviceStrategy returns value_fn's value; MirroredStrategy (and TPUStrategy)
    # regroup with always_wrap=True, so one replica still gives a PerReplica of one component.
    mirrored = tps.MirroredStrategy(devices=jax.devices()[:1])
    value = mirrored.experimental_distribute_values_from_function(lambda ctx: np.float32(ctx.replica_id_in_sync_group + 5))
    assert isinstance(value, tps.PerReplica)
    assert [float(v) for v in mirrored.experimental_local_results(value)] == [5.0]
    one = tps.OneDeviceStrategy(jax.devices()[0])
    plain = one.experimental_distribute_values_from_function(lambda ctx: np.float32(ctx.num_replicas_in_sync))
    assert not isinstance(plain, tps.DistributedValues) and float(plain) == 1.0


def test_a_one_replica_per_replica_runs_and_comes_back_plain():
    mirrored = tps.MirroredStrategy(devices=jax.devices()[:1])
    value = mirrored.experimental_distribute_values_from_function(lambda ctx: np.arange(3, dtype=np.float32))
    out = mirrored.run(lambda x: x * 2, (value,))
    assert not isinstance(out, tps.DistributedValues)  # TensorFlow: run unwraps one replica's results
    np.testing.assert_array_equal(np.asarray(out), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(np.asarray(mirrored.reduce("SUM", out, axis=None)), [0.0, 2.0, 4.0])
