"""TensorFlow's "Custom training with tf.distribute.Strategy" tutorial with its Keras model, renamed.

The tutorial (tensorflow/docs, site/en/tutorials/distribute/custom_training.ipynb)
line for line, renaming only: ``tf.keras`` -> ``keras`` (Keras 3, JAX backend),
``tf.distribute`` -> ``tps``, ``tf.data`` -> ``tpsd``, ``tf.GradientTape`` ->
``tps.GradientTape``, ``tf.nn`` -> ``tps.nn``, ``tf.function`` ->
``tps.function``, ``tf.train`` -> ``tps.train`` (and ``tf.add_n`` -> ``sum``).
The model is the tutorial's CNN with its L2 regularizers, trained with a Keras
``Adam`` and Keras metrics; a checkpoint is saved every other epoch and restored
into a new model outside the strategy for the final evaluation.

The one change is the data: there is no network here, so instead of
Fashion-MNIST the images are scikit-learn's 8x8 digits scaled up to 24x24 and
padded to 28x28x1 (the tutorial's input shape). The last training batch is
partial, as in the tutorial.
"""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("KERAS_BACKEND", "jax")
# 8 fake CPU devices before JAX starts, unless the caller chose a count (=1: one device).
_FLAG = "--xla_force_host_platform_device_count"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}=8".strip()

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402


def load_data(num_train: int = 1437, num_test: int = 360, seed: int = 0):
    """Digits as 28x28x1 images in [0, 1]: ``(train_images, train_labels), (test_images, test_labels)``."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))
    images = np.kron(digits.images[order], np.ones((3, 3)))             # 8x8 -> 24x24
    images = np.pad(images, ((0, 0), (2, 2), (2, 2)))[..., None] / np.float32(16)
    images, labels = images.astype(np.float32), digits.target[order].astype(np.int32)
    train = slice(0, num_train)
    test = slice(len(labels) - num_test, len(labels))
    return (images[train], labels[train]), (images[test], labels[test])


def create_model() -> keras.Model:
    regularizer = keras.regularizers.L2(1e-5)
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        keras.layers.Conv2D(32, 3, activation="relu", kernel_regularizer=regularizer),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(64, 3, activation="relu", kernel_regularizer=regularizer),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(64, activation="relu", kernel_regularizer=regularizer),
        keras.layers.Dense(10, kernel_regularizer=regularizer),
    ])
    return model


def main(epochs: int = 10, batch_size_per_replica: int = 16, num_train: int = 1437, num_test: int = 360,
         strategy: tps.Strategy | None = None, checkpoint_dir: str | None = None,
         verbose: bool = True) -> dict[str, list[float]]:
    """Trains and evaluates; returns the per-epoch history and the accuracy restored without a strategy.

    Returns:
      ``{"loss", "accuracy", "test_loss", "test_accuracy"}`` per epoch, plus
      ``"restored_accuracy"`` (one value: the last checkpoint evaluated by a new
      model outside the strategy) and ``"train_examples"`` (examples the training
      accuracy counted in the last epoch).
    """
    keras.utils.set_random_seed(0)
    (train_images, train_labels), (test_images, test_labels) = load_data(num_train, num_test)

    # Create a strategy to distribute the variables and the graph
    strategy = strategy if strategy is not None else tps.MirroredStrategy()
    if verbose:
        print(f"Number of devices: {strategy.num_replicas_in_sync}")

    # Setup input pipeline
    BUFFER_SIZE = len(train_images)
    BATCH_SIZE_PER_REPLICA = batch_size_per_replica
    GLOBAL_BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync
    EPOCHS = epochs

    train_dataset = tpsd.Dataset.from_tensor_slices((train_images, train_labels)).shuffle(
        BUFFER_SIZE, seed=0).batch(GLOBAL_BATCH_SIZE)
    test_dataset = tpsd.Dataset.from_tensor_slices((test_images, test_labels)).batch(GLOBAL_BATCH_SIZE)
    train_dist_dataset = strategy.experimental_distribute_dataset(train_dataset)
    test_dist_dataset = strategy.experimental_distribute_dataset(test_dataset)

    # Create a checkpoint directory to store the checkpoints.
    owned = None
    if checkpoint_dir is None:
        owned = tempfile.TemporaryDirectory()
        checkpoint_dir = owned.name
    checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt")

    # Define the loss function
    with strategy.scope():
        # Set reduction to `None` so we can do the reduction afterwards and divide by global batch size.
        loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

        def compute_loss(labels, predictions, model_losses):
            per_example_loss = loss_object(labels, predictions)
            loss = tps.nn.compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE)
            if model_losses:
                loss += tps.nn.scale_regularization_loss(sum(model_losses))
            return loss

    # Define the metrics to track loss and accuracy
    with strategy.scope():
        test_loss = keras.metrics.Mean(name="test_loss")
        train_accuracy = keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")
        test_accuracy = keras.metrics.SparseCategoricalAccuracy(name="test_accuracy")

    # Training loop: a model, an optimizer and a checkpoint must be created under `strategy.scope`.
    with strategy.scope():
        model = create_model()
        optimizer = keras.optimizers.Adam(learning_rate=0.001)
        checkpoint = tps.train.Checkpoint(optimizer=optimizer, model=model)

    def train_step(inputs):
        images, labels = inputs
        with tps.GradientTape() as tape:
            predictions = model(images, training=True)
            loss = compute_loss(labels, predictions, model.losses)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        train_accuracy.update_state(labels, predictions)
        return loss

    def test_step(inputs):
        images, labels = inputs
        predictions = model(images, training=False)
        t_loss = loss_object(labels, predictions)
        test_loss.update_state(t_loss)
        test_accuracy.update_state(labels, predictions)

    # `run` replicates the provided computation and runs it with the distributed input.
    @tps.function
    def distributed_train_step(dataset_inputs):
        per_replica_losses = strategy.run(train_step, args=(dataset_inputs,))
        return strategy.reduce(tps.ReduceOp.SUM, per_replica_losses, axis=None)

    @tps.function
    def distributed_test_step(dataset_inputs):
        return strategy.run(test_step, args=(dataset_inputs,))

    history: dict[str, list[float]] = {"loss": [], "accuracy": [], "test_loss": [], "test_accuracy": []}
    for epoch in range(EPOCHS):
        # TRAIN LOOP
        total_loss = 0.0
        num_batches = 0
        for x in train_dist_dataset:
            total_loss += float(distributed_train_step(x))
            num_batches += 1
        train_loss = total_loss / num_batches

        # TEST LOOP
        for x in test_dist_dataset:
            distributed_test_step(x)

        if epoch % 2 == 0:
            checkpoint.save(checkpoint_prefix)

        history["loss"].append(train_loss)
        history["accuracy"].append(float(train_accuracy.result()))
        history["test_loss"].append(float(test_loss.result()))
        history["test_accuracy"].append(float(test_accuracy.result()))
        if verbose:
            print(f"Epoch {epoch + 1}, Loss: {train_loss}, Accuracy: {train_accuracy.result() * 100}, "
                  f"Test Loss: {test_loss.result()}, Test Accuracy: {test_accuracy.result() * 100}")
        history["train_examples"] = [float(train_accuracy.count.numpy())]
        test_loss.reset_state()
        train_accuracy.reset_state()
        test_accuracy.reset_state()

    # Restore the latest checkpoint and test: a model restored from a strategy's checkpoint, without one.
    eval_accuracy = keras.metrics.SparseCategoricalAccuracy(name="eval_accuracy")
    new_model = create_model()
    new_optimizer = keras.optimizers.Adam()
    new_optimizer.build(new_model.trainable_variables)   # Keras 3 creates its slots on build
    test_dataset = tpsd.Dataset.from_tensor_slices((test_images, test_labels)).batch(GLOBAL_BATCH_SIZE)

    @tps.function
    def eval_step(images, labels):
        predictions = new_model(images, training=False)
        eval_accuracy(labels, predictions)

    checkpoint = tps.train.Checkpoint(optimizer=new_optimizer, model=new_model)
    checkpoint.restore(tps.train.latest_checkpoint(checkpoint_dir))
    for images, labels in test_dataset:
        eval_step(images, labels)
    if verbose:
        print(f"Accuracy after restoring the saved model without strategy: {eval_accuracy.result() * 100}")
    history["restored_accuracy"] = [float(eval_accuracy.result())]
    if owned is not None:
        owned.cleanup()
    return history


if __name__ == "__main__":
    main()
