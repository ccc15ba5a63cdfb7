"""TensorFlow's TPU guide, "Train a model using Keras high-level APIs", ported by renaming.

Run as a script (``tests/stress/test_keras_tpu_guide_port.py`` starts it in a subprocess):
``python keras_tpu_guide_port.py [--strategy tpu|mirrored] [--steps-per-execution N]
[--epochs N] [--steps-per-epoch N] [--validation-steps N] [--no-validation] [--filters N]``.

The guide's program, names changed from ``tf.distribute`` / ``tf.keras`` / ``tf.data`` to
``tps`` / ``keras`` / ``tpsd``: the resolver, ``experimental_connect_to_cluster``,
``initialize_tpu_system``, ``TPUStrategy(resolver)``; ``create_model()`` (two 3x3 convolutions,
three dense layers, L2 regularisers) compiled in ``strategy.scope()`` with ``steps_per_execution``;
``fit(train_dataset, epochs, steps_per_epoch, validation_data=test_dataset, validation_steps)``
over a shuffled, repeated training dataset. MNIST is replaced by synthetic data of its shapes
(28x28x1 ``uint8`` images, 10 classes) that a model can learn: each class is a fixed pattern
plus noise. Sizes are scaled down (fewer filters, steps and examples) to run in seconds on
CPU devices. The last line printed is ``HISTORY <json>``.
"""

import argparse
import json
import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", choices=["tpu", "mirrored"], default="tpu")
    parser.add_argument("--steps-per-execution", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps-per-epoch", type=int, default=100)
    parser.add_argument("--validation-steps", type=int, default=50)
    parser.add_argument("--no-validation", action="store_true")
    parser.add_argument("--filters", type=int, default=256, help="the guide's 256; fewer runs faster")
    return parser.parse_args()


def make_strategy(kind):
    if kind == "mirrored":
        return tps.MirroredStrategy()
    resolver = tps.cluster_resolver.TPUClusterResolver(tpu="local")
    tps.config.experimental_connect_to_cluster(resolver)
    tps.tpu.experimental.initialize_tpu_system(resolver)
    return tps.TPUStrategy(resolver)


PATTERNS = np.random.default_rng(0).integers(0, 256, size=(10, 28, 28, 1))


def synthetic_mnist(n, seed):
    """``n`` MNIST-shaped examples: class ``k`` is ``PATTERNS[k]`` blended with noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=(n,))
    noise = rng.integers(0, 256, size=(n, 28, 28, 1))
    images = (0.6 * PATTERNS[labels] + 0.4 * noise).astype(np.uint8)
    return images, labels.astype(np.int64)


def create_model(filters):
    regularizer = keras.regularizers.L2(1e-5)
    return keras.Sequential(
        [keras.Input((28, 28, 1)),
         keras.layers.Conv2D(filters, 3, activation="relu", kernel_regularizer=regularizer),
         keras.layers.Conv2D(filters, 3, activation="relu", kernel_regularizer=regularizer),
         keras.layers.Flatten(),
         keras.layers.Dense(256, activation="relu", kernel_regularizer=regularizer),
         keras.layers.Dense(128, activation="relu", kernel_regularizer=regularizer),
         keras.layers.Dense(10, kernel_regularizer=regularizer)])


def get_dataset(batch_size, num_examples, is_training=True):
    images, labels = synthetic_mnist(num_examples, seed=1 if is_training else 2)
    dataset = tpsd.Dataset.from_tensor_slices((images, labels))

    def scale(image, label):
        return image.astype(np.float32) / 255.0, label

    dataset = dataset.map(scale)
    if is_training:
        dataset = dataset.shuffle(10000, seed=3)
        dataset = dataset.repeat()
    return dataset.batch(batch_size)


def main():
    args = parse_args()
    strategy = make_strategy(args.strategy)
    with strategy.scope():
        model = create_model(args.filters)
        model.compile(optimizer="adam",
                      steps_per_execution=args.steps_per_execution,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["sparse_categorical_accuracy"])

    batch_size = args.batch_size
    # The guide's 60000 // batch_size and 10000 // batch_size, scaled down.
    steps_per_epoch = args.steps_per_epoch
    validation_steps = args.validation_steps
    train_dataset = get_dataset(batch_size, batch_size * steps_per_epoch, is_training=True)
    test_dataset = get_dataset(batch_size, batch_size * validation_steps, is_training=False)

    validation = {} if args.no_validation else {
        "validation_data": test_dataset, "validation_steps": validation_steps}
    history = model.fit(train_dataset, epochs=args.epochs, steps_per_epoch=steps_per_epoch,
                        verbose=2, **validation)
    print("HISTORY " + json.dumps(history.history), flush=True)


if __name__ == "__main__":
    main()
