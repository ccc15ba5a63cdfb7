"""TensorFlow's TPU guide, Keras section, renamed: a Keras model under the strategy, ``fit`` and ``evaluate``.

``tf.keras`` -> ``keras`` (Keras 3, JAX backend), ``tf.distribute`` -> ``tps``,
``tf.data`` -> ``tpsd``. The data are written once as TFRecord files of
``tf.train.Example``s and read back with the guide's pipeline shape.
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402

FEATURES = {"x": tpsd.FixedLenFeature([16], "float32"), "y": tpsd.FixedLenFeature([], "int64")}


def write_records(directory: str, n: int = 600, shards: int = 4) -> list[str]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, 16)).astype("float32")
    y = (x[:, :4].sum(1) > 0).astype("int64")
    paths = []
    for s in range(shards):
        path = os.path.join(directory, f"data-{s}.tfrecord")
        with tpsd.TFRecordWriter(path) as writer:
            for i in range(s, n, shards):
                writer.write(tpsd.make_example({"x": x[i], "y": int(y[i])}).SerializeToString())
        paths.append(path)
    return paths


def get_dataset(paths: list[str], batch_size: int, is_training: bool = True) -> tpsd.Dataset:
    ds = tpsd.Dataset.from_tensor_slices(paths).interleave(tpsd.TFRecordDataset, cycle_length=len(paths))
    ds = ds.batch(batch_size).map(lambda b: (lambda e: (e["x"], e["y"].astype("int32")))(tpsd.parse_example(b, FEATURES)))
    return ds


def create_model() -> keras.Model:
    return keras.Sequential([keras.Input((16,)), keras.layers.Dense(64, activation="relu"),
                             keras.layers.Dense(2)])


def main(epochs: int = 3) -> dict[str, list[float]]:
    strategy = tps.TPUStrategy()
    batch_size = 64
    with tempfile.TemporaryDirectory() as directory:
        paths = write_records(directory)
        with strategy.scope():
            model = create_model()
            model.compile(optimizer="adam", steps_per_execution=4,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          metrics=["sparse_categorical_accuracy"])
        train_dataset = get_dataset(paths, batch_size, is_training=True)
        test_dataset = get_dataset(paths, batch_size, is_training=False)
        history = model.fit(train_dataset, epochs=epochs, validation_data=test_dataset, verbose=0)
        loss, accuracy = model.evaluate(test_dataset, verbose=0)
    print(f"final loss {loss:.4f}, accuracy {accuracy:.3f}")
    return history.history


if __name__ == "__main__":
    main()
