"""keras.io's "Pneumonia classification on TPU" (``examples/vision/xray_classification_with_tpus.py``)
at a small scale, written once for both sides of the comparison.

``tools/make_keras_xray_fixtures.py`` runs it under TensorFlow 2.21 (Keras 3, TensorFlow
backend, ``tf.distribute.MirroredStrategy`` over logical CPUs) and records TensorFlow's values;
``test_xray_port.py`` runs it under tpustrategy and compares. Only Keras and NumPy are imported
here: the strategy and the ``Dataset`` class (``tf.data.Dataset`` or ``tpsd.Dataset``) are
passed in. The example's shape is kept — ``Rescaling``, ``Conv2D``, ``SeparableConv2D`` blocks
with ``BatchNormalization``, dense blocks with ``BatchNormalization`` and ``Dropout``, a sigmoid
output, ``binary_crossentropy``, ``BinaryAccuracy`` / ``Precision`` / ``Recall``, ``Adam`` over
an ``ExponentialDecay`` schedule, ``class_weight``, ``ModelCheckpoint(save_best_only=True)``,
``EarlyStopping(restore_best_weights=True)``, ``evaluate``, and the checkpoint loaded without
the strategy — with small synthetic images, deterministic initial weights (NumPy, the same on
both sides) and the dropout rate 0 (the two backends draw different random masks).
"""

from __future__ import annotations

import os

import keras
import numpy as np

SIZE = 16
PER_REPLICA_BATCH = 16


def make_data(seed: int = 0) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Train / validation / test images (0..255, float32) and int64 labels, about 3:1 positive."""
    rng = np.random.default_rng(seed)

    def part(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.uniform(0, 255, size=(n, SIZE, SIZE, 3)).astype("float32")
        score = x[:, :8, :8, 0].mean((1, 2)) - x[:, 8:, 8:, 1].mean((1, 2)) + rng.normal(0, 4, n)
        return x, (score > np.quantile(score, 0.26)).astype("int64")

    return {"train": part(200), "val": part(72), "test": part(56)}


def class_weights(labels: np.ndarray) -> dict[int, float]:
    """The example's rule: each class weighted by total / (2 * its count)."""
    normal, pneumonia = int((labels == 0).sum()), int((labels == 1).sum())
    return {0: (1 / normal) * len(labels) / 2.0, 1: (1 / pneumonia) * len(labels) / 2.0}


def build_model(dropout: float = 0.0) -> keras.Model:
    from keras import layers

    def conv_block(filters: int, x: object) -> object:
        x = layers.SeparableConv2D(filters, 3, activation="relu", padding="same")(x)
        x = layers.SeparableConv2D(filters, 3, activation="relu", padding="same")(x)
        x = layers.BatchNormalization()(x)
        return layers.MaxPool2D()(x)

    def dense_block(units: int, rate: float, x: object) -> object:
        x = layers.Dense(units, activation="relu")(x)
        x = layers.BatchNormalization()(x)
        return layers.Dropout(rate)(x)

    inputs = keras.Input(shape=(SIZE, SIZE, 3))
    x = layers.Rescaling(1.0 / 255)(inputs)
    x = layers.Conv2D(4, 3, activation="relu", padding="same")(x)
    x = layers.MaxPool2D()(x)
    x = conv_block(8, x)
    x = layers.Dropout(dropout)(x)
    x = layers.Flatten()(x)
    x = dense_block(16, dropout, x)
    outputs = layers.Dense(1, activation="sigmoid")(x)
    return keras.Model(inputs=inputs, outputs=outputs)


def set_initial_weights(model: keras.Model, seed: int = 7) -> None:
    """Kernels drawn from NumPy (normal / sqrt(fan in)); biases and batch-norm state Keras's defaults."""
    rng = np.random.default_rng(seed)
    values = []
    for w in model.weights:
        if w.path.endswith(("kernel", "pointwise_kernel", "depthwise_kernel")):
            shape = tuple(w.shape)
            values.append((rng.normal(size=shape) / np.sqrt(np.prod(shape[:-1]))).astype("float32"))
        else:
            values.append(np.asarray(w.numpy()))
    model.set_weights(values)


def compile_model(model: keras.Model) -> None:
    schedule = keras.optimizers.schedules.ExponentialDecay(0.015, decay_steps=100000, decay_rate=0.96,
                                                           staircase=True)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=schedule), loss="binary_crossentropy",
                  metrics=[keras.metrics.BinaryAccuracy(), keras.metrics.Precision(name="precision"),
                           keras.metrics.Recall(name="recall")])


def _floats(logs: dict) -> dict[str, float]:
    return {k: float(v) for k, v in logs.items()}


def batch_norm_statistics(model: keras.Model, components: object) -> list[list]:
    """Every moving statistic in the model's order: ``components(variable)`` gives its per-replica copies."""
    return [[np.asarray(c, np.float64).tolist() for c in components(w)]
            for w in model.weights if "moving_" in w.path]


def run(strategy: object, Dataset: object, directory: str, components: object, epochs: int = 6) -> dict:
    """The example's program; returns every value the comparison checks."""
    data = make_data()
    batch = PER_REPLICA_BATCH * strategy.num_replicas_in_sync
    (x_train, y_train), (x_val, y_val), (x_test, y_test) = data["train"], data["val"], data["test"]
    path = os.path.join(directory, "xray_model.keras")
    with strategy.scope():
        model = build_model()
        set_initial_weights(model)
        compile_model(model)
    train_ds = Dataset.from_tensor_slices((x_train, y_train)).batch(batch)
    val_ds = Dataset.from_tensor_slices((x_val, y_val)).batch(batch)
    test_ds = Dataset.from_tensor_slices((x_test, y_test)).batch(batch)
    checkpoint_cb = keras.callbacks.ModelCheckpoint(path, save_best_only=True)
    early_stopping_cb = keras.callbacks.EarlyStopping(patience=2, restore_best_weights=True)
    history = model.fit(train_ds, epochs=epochs, validation_data=val_ds, class_weight=class_weights(y_train),
                        callbacks=[checkpoint_cb, early_stopping_cb], verbose=0)
    out = {
        "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
        "stopped_epoch": int(early_stopping_cb.stopped_epoch),
        "evaluate": _floats(model.evaluate(test_ds, return_dict=True, verbose=0)),
        "predict": np.asarray(model.predict(x_test, verbose=0), np.float64).ravel().tolist(),
        "statistics": batch_norm_statistics(model, components),
        "weights_read": [np.asarray(w, np.float64).ravel()[:4].tolist() for w in model.get_weights()],
    }
    weights_path = os.path.join(directory, "xray.weights.h5")
    model.save_weights(weights_path)
    # Restored without the strategy: the best checkpoint, and the final weights in a fresh model.
    loaded = keras.models.load_model(path)
    out["loaded_evaluate"] = _floats(loaded.evaluate(test_ds, return_dict=True, verbose=0))
    out["loaded_predict"] = np.asarray(loaded.predict(x_test, verbose=0), np.float64).ravel().tolist()
    fresh = build_model()
    compile_model(fresh)
    fresh.load_weights(weights_path)
    out["weights_evaluate"] = _floats(fresh.evaluate(test_ds, return_dict=True, verbose=0))
    return out


def run_batch_norm(strategy: object, Dataset: object, directory: str, components: object) -> dict:
    """One BatchNormalization between two layers, fitted one epoch: each replica's statistics."""
    rng = np.random.default_rng(0)
    x = (rng.normal(size=(32, 3)) + np.arange(32)[:, None] / 4).astype("float32")
    y = (x[:, 0] > 4).astype("int64")
    with strategy.scope():
        model = keras.Sequential([keras.Input((3,)), keras.layers.BatchNormalization(momentum=0.5),
                                  keras.layers.Dense(1, activation="sigmoid")])
        set_initial_weights(model)
        model.compile(keras.optimizers.SGD(0.1), "binary_crossentropy", metrics=["binary_accuracy"])
    ds = Dataset.from_tensor_slices((x, y)).batch(16)
    history = model.fit(ds, epochs=2, verbose=0)
    out = {
        "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
        "statistics": batch_norm_statistics(model, components),
        "evaluate": [float(v) for v in model.evaluate(ds, verbose=0)],
        "predict": np.asarray(model.predict(x[:16], verbose=0), np.float64).ravel().tolist(),
    }
    path = os.path.join(directory, "bn.keras")
    model.save(path)
    loaded = keras.models.load_model(path)
    out["loaded_evaluate"] = [float(v) for v in loaded.evaluate(ds, verbose=0)]
    out["loaded_predict"] = np.asarray(loaded.predict(x[:16], verbose=0), np.float64).ravel().tolist()
    return out
