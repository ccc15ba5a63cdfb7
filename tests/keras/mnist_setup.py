"""The multi-worker tutorial's ``mnist_setup.py`` (test_multi_worker_tutorial.py), with synthetic 8x8 "digits".

Renamed only (``tf.data`` -> ``tpustrategy.data``, ``tf.keras`` -> ``keras``), except: the data are a
small synthetic set of the same kind, the shuffle is seeded and the model's initial weights too
(so one device can be compared), the model is smaller, and ``SGD(0.001)`` is ``SGD(0.05)`` so a
wrong step shows in the comparison.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy.data as tpsd  # noqa: E402

PER_WORKER_BATCH = 16
STEPS = 4
N = 128
GLOBAL_BATCH = 32          # the BackupAndRestore runs: 4 steps per epoch over a finite dataset
EPOCHS = 4
INTERRUPT_EPOCH = 2


def data():
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(N, 8, 8)).astype(np.uint8)
    # The `x` arrays are in uint8 with values in [0, 255]: float32 in [0, 1].
    x_train = (images / np.float32(255)).astype(np.float32)
    y_train = (images[:, :4].mean(axis=(1, 2)) // 26).astype(np.int64)   # 10 classes, learnable
    return x_train, y_train


def mnist_dataset(batch_size):
    x_train, y_train = data()
    # The tutorial shuffles with no seed; seeded here so one device sees the same batches.
    return tpsd.Dataset.from_tensor_slices((x_train, y_train)).shuffle(N, seed=7).repeat().batch(batch_size)


def build_and_compile_cnn_model():
    keras.utils.set_random_seed(3)   # every worker and the reference start from the same weights
    model = keras.Sequential([
        keras.Input(shape=(8, 8)),
        keras.layers.Reshape(target_shape=(8, 8, 1)),
        keras.layers.Conv2D(4, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=keras.optimizers.SGD(learning_rate=0.05),
        metrics=["accuracy"])
    return model
