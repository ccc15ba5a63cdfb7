"""The Keras examples run and learn: the TPU guide's Keras section and the custom-training tutorial."""

import importlib.util
import os
import pathlib

import jax
import keras
import numpy as np
import pytest

import tpustrategy as tps


def _load(name):
    # keras_custom_loop adds --xla_force_host_platform_device_count=8 to XLA_FLAGS unless the flag
    # already says 8: JAX starts first, with this run's devices (--devices), and the flag is taken back.
    jax.devices()
    flags = os.environ.get("XLA_FLAGS")
    path = pathlib.Path(__file__).parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    example = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(example)
    finally:
        if flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = flags
    return example


def test_the_keras_fit_example_trains_over_the_tfrecord_pipeline():
    example = _load("keras_fit")
    keras.utils.set_random_seed(0)
    history = example.main(epochs=3)
    assert history["loss"][-1] < history["loss"][0]
    assert history["val_sparse_categorical_accuracy"][-1] > 0.6


@pytest.mark.devices(8)  # 8 replicas of 16 examples against one device's 128
def test_the_keras_custom_loop_example_on_8_replicas_equals_one_device():
    pytest.importorskip("sklearn")
    example = _load("keras_custom_loop")
    sizes = {"epochs": 3, "num_train": 200, "num_test": 64, "verbose": False}
    eight = example.main(batch_size_per_replica=16, **sizes)          # global batches 128 and a partial 72
    one = example.main(batch_size_per_replica=128, strategy=tps.MirroredStrategy(devices=jax.devices()[:1]), **sizes)
    for key in ("loss", "accuracy", "test_loss", "test_accuracy"):
        np.testing.assert_allclose(eight[key], one[key], rtol=1e-5, atol=1e-6, err_msg=key)
    assert eight["loss"][-1] < eight["loss"][0]
    assert eight["train_examples"] == [200.0]                         # the partial batch counted exactly once
    # the last checkpoint (epoch 3) restored outside the strategy scores what the distributed model scored
    assert eight["restored_accuracy"] == [eight["test_accuracy"][-1]]
