"""TensorFlow's ``tensorflow/python/distribute/checkpointing_test.py``, ported.

``testInitializeFromCheckpoint`` saves a plain variable and restores it under each
strategy's scope into a checkpoint that does not hold it yet. TensorFlow then reads
the value through the private ``_preload_simple_restoration`` to build the variable
from it; the public form of the same flow is deferred restoration: the variable
attached to the restored checkpoint takes the saved value on assignment (and is not
restored twice). Both are checked on every strategy the TF case lists that exists
here (MirroredStrategy on one and on several devices, TPUStrategy, CentralStorageStrategy).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

pytest.importorskip("orbax.checkpoint")

STRATEGIES = {
    "mirrored_one_cpu": lambda: tps.MirroredStrategy(jax.devices()[:1]),
    "mirrored_two": lambda: tps.MirroredStrategy(jax.devices()[:2]),
    "tpu": lambda: tps.TPUStrategy(),
    "central_storage_two": lambda: tps.experimental.CentralStorageStrategy(jax.devices()[:2]),
}


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_a_variable_attached_after_restore_takes_the_saved_value_once(name, tmp_path):
    shape = [5]
    save_path = tps.train.Checkpoint(v=tps.Variable(jnp.ones(shape))).save(
        os.path.join(tmp_path, "checkpoint"))
    strategy = STRATEGIES[name]()
    with strategy.scope():
        restore_checkpoint = tps.train.Checkpoint()
        status = restore_checkpoint.restore(save_path)
        v = tps.Variable(jnp.zeros(shape))
        restore_checkpoint.v = v  # deferred restoration: assigned the saved value here
        np.testing.assert_allclose(v.numpy(), np.ones(shape))
        v.assign(jnp.full(shape, 2.0))
        restore_checkpoint.v = v  # the same object again: not restored a second time
        np.testing.assert_allclose(v.numpy(), np.full(shape, 2.0))
    status.assert_consumed()
    for component in strategy.experimental_local_results(v):
        np.testing.assert_allclose(np.asarray(component), np.full(shape, 2.0))
