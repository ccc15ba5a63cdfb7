"""tps.experimental.CentralStorageStrategy: TensorFlow's name and arguments; one value of each
variable, replicas on every local device, training equal to one device's."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def test_it_runs_a_replica_per_compute_device_and_keeps_the_parameter_device():
    strategy = tps.experimental.CentralStorageStrategy()
    assert strategy.num_replicas_in_sync == len(jax.local_devices())
    assert strategy.parameter_device.platform == "cpu"


@pytest.mark.devices(4)
def test_explicit_compute_and_parameter_devices_are_kept():
    two = tps.experimental.CentralStorageStrategy(compute_devices=jax.devices()[:2],
                                                  parameter_device="/cpu:0")
    assert two.num_replicas_in_sync == 2 and two.parameter_device == jax.devices("cpu")[0]
    one = tps.experimental.CentralStorageStrategy(compute_devices=jax.devices()[3:4])
    assert one.parameter_device == jax.devices()[3]


@pytest.mark.devices(4)
def test_a_training_step_equals_the_single_device_step():
    strategy = tps.experimental.CentralStorageStrategy(compute_devices=jax.devices()[:4])
    x = np.arange(8, dtype=np.float32).reshape(8, 1)
    y = 3 * x + 1
    with strategy.scope():
        w = tps.Variable(jnp.zeros((1, 1)))
    ds = strategy.experimental_distribute_dataset(
        __import__("tpustrategy.data", fromlist=["Dataset"]).Dataset.from_tensor_slices((x, y)).batch(8))

    def step(batch):
        xb, yb = batch

        def loss(wv):
            return jnp.sum((xb @ wv - yb) ** 2) / 8

        g = jax.grad(loss)(w.value())
        g = tps.get_replica_context().all_reduce(tps.ReduceOp.SUM, g)
        w.assign_sub(0.01 * g)

    for batch in ds:
        strategy.run(step, (batch,))
    expected = -0.01 * (2 * x.T @ (0 - y)) / 8
    np.testing.assert_allclose(np.asarray(w.numpy()), expected, rtol=1e-6)
    assert len(strategy.experimental_local_results(w)) == 4


def test_a_bad_parameter_device_names_the_strategy():
    with pytest.raises((ValueError, TypeError), match="CentralStorageStrategy"):
        tps.experimental.CentralStorageStrategy(parameter_device="/tpu:99")
