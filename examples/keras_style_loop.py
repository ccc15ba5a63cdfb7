"""Keras-style custom training loop: TensorFlow's distributed custom-training tutorial, ported.

TensorFlow's tutorial "Custom training with tf.distribute.Strategy"
(tensorflow/docs, site/en/tutorials/distribute/custom_training.ipynb) line for
line, renaming ``tf.distribute`` → ``tps``, ``tf.data`` → ``tpsd``,
``tf.keras.metrics`` → ``tps.metrics``, ``tf.keras.optimizers`` →
``tps.optimizers``, ``tf.nn`` → ``tps.nn`` and ``tf.function`` →
``tps.function``. Two things change shape because JAX has no Keras layers and
no tape: the model is a list of ``tps.Variable``s with a pure ``apply``
function, and ``tf.GradientTape`` becomes ``jax.value_and_grad`` of that
function. The data are scikit-learn's 8x8 digits instead of Fashion-MNIST.
"""

from __future__ import annotations

import os
import tempfile

# 8 fake CPU devices before JAX starts, unless the caller chose a count (=1: one device).
_FLAG = "--xla_force_host_platform_device_count"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}=8".strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402

import tpustrategy as tps  # noqa: E402
import tpustrategy.data as tpsd  # noqa: E402


def load_digits(num_train: int = 1437, seed: int = 0):
    """scikit-learn's 1797 digits, shuffled once, scaled to [0, 1]: (train_images, train_labels), (test_...).

    With 1437 training examples and 64-example global batches the last training
    batch holds 29 examples: over 8 replicas its pieces are ragged (4 or 3), as
    in the tutorial, whose last batch is partial too.
    """
    from sklearn.datasets import load_digits as sklearn_digits

    digits = sklearn_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))
    images = (digits.data[order] / 16.0).astype(np.float32)
    labels = digits.target[order].astype(np.int32)
    return (images[:num_train], labels[:num_train]), (images[num_train:], labels[num_train:])


class Model:
    """The tutorial's ``create_model()``: a two-layer MLP whose weights are ``tps.Variable``s.

    Created under ``strategy.scope()`` its variables are mirrored on every replica.
    """

    def __init__(self, seed: int = 0, hidden: int = 64):
        k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
        self.trainable_variables = [
            tps.Variable(jax.random.normal(k1, (64, hidden)) * (2 / 64) ** 0.5, name="dense/kernel"),
            tps.Variable(jnp.zeros(hidden), name="dense/bias"),
            tps.Variable(jax.random.normal(k2, (hidden, 10)) * (1 / hidden) ** 0.5, name="dense_1/kernel"),
            tps.Variable(jnp.zeros(10), name="dense_1/bias"),
        ]

    @staticmethod
    def apply(weights: list, images: jax.Array) -> jax.Array:
        """The logits for ``images`` under ``weights`` (a pure function, for ``jax.grad``)."""
        w1, b1, w2, b2 = weights
        return jax.nn.relu(images @ w1 + b1) @ w2 + b2

    def weights(self) -> list:
        return [v.read_value() for v in self.trainable_variables]

    def __call__(self, images: jax.Array, training: bool = False) -> jax.Array:
        return self.apply(self.weights(), images)


def create_model() -> Model:
    return Model()


def loss_object(labels: jax.Array, predictions: jax.Array) -> jax.Array:
    """``SparseCategoricalCrossentropy(from_logits=True, reduction=NONE)``: one loss per example."""
    return optax.softmax_cross_entropy_with_integer_labels(predictions, labels)


def main(epochs: int = 10, batch_size_per_replica: int = 8, checkpoint_dir: str | None = None,
         verbose: bool = True) -> dict:
    if checkpoint_dir is None:
        with tempfile.TemporaryDirectory(prefix="training_checkpoints-") as tmp:
            return main(epochs, batch_size_per_replica, tmp, verbose)
    strategy = tps.MirroredStrategy()
    if verbose:
        print(f"Number of devices: {strategy.num_replicas_in_sync}")

    (train_images, train_labels), (test_images, test_labels) = load_digits()
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
    checkpoint_prefix = os.path.join(checkpoint_dir, "ckpt")

    with strategy.scope():
        def compute_loss(labels, predictions):
            per_example_loss = loss_object(labels, predictions)
            return tps.nn.compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE)

    with strategy.scope():
        test_loss = tps.metrics.Mean(name="test_loss")

        train_accuracy = tps.metrics.SparseCategoricalAccuracy(name="train_accuracy")
        test_accuracy = tps.metrics.SparseCategoricalAccuracy(name="test_accuracy")

    # model, optimizer, and checkpoint must be created under `strategy.scope`.
    with strategy.scope():
        model = create_model()

        optimizer = tps.optimizers.Adam()

        checkpoint = tps.train.Checkpoint(optimizer=optimizer, model=model)

    def train_step(inputs):
        images, labels = inputs

        def forward(weights):  # what tf.GradientTape records
            predictions = model.apply(weights, images)
            return compute_loss(labels, predictions), predictions

        (loss, predictions), gradients = jax.value_and_grad(forward, has_aux=True)(model.weights())
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

    history = []
    for epoch in range(EPOCHS):
        # TRAIN LOOP
        total_loss = 0.0
        num_batches = 0
        for x in train_dist_dataset:
            total_loss += distributed_train_step(x)
            num_batches += 1
        train_loss = total_loss / num_batches

        # TEST LOOP
        for x in test_dist_dataset:
            distributed_test_step(x)

        if epoch % 2 == 0:
            checkpoint.save(checkpoint_prefix)

        template = "Epoch {}, Loss: {}, Accuracy: {}, Test Loss: {}, Test Accuracy: {}"
        history.append({"train_loss": float(train_loss), "train_accuracy": float(train_accuracy.result()),
                        "test_loss": float(test_loss.result()), "test_accuracy": float(test_accuracy.result())})
        if verbose:
            print(template.format(epoch + 1, train_loss, train_accuracy.result() * 100,
                                  test_loss.result(), test_accuracy.result() * 100))

        test_loss.reset_state()
        train_accuracy.reset_state()
        test_accuracy.reset_state()

    # Restore the latest checkpoint and test: a model checkpointed with a strategy can be
    # restored with or without a strategy.
    eval_accuracy = tps.metrics.SparseCategoricalAccuracy(name="eval_accuracy")

    new_model = create_model()
    new_optimizer = tps.optimizers.Adam()

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

    return {"first_loss": history[0]["train_loss"], "final_loss": history[-1]["train_loss"],
            "accuracy": history[-1]["test_accuracy"], "train_accuracy": history[-1]["train_accuracy"],
            "test_loss": history[-1]["test_loss"], "eval_accuracy": float(eval_accuracy.result()),
            "checkpointed_test_accuracy": history[(EPOCHS - 1) // 2 * 2]["test_accuracy"],
            "iterations": int(optimizer.iterations), "history": history}


if __name__ == "__main__":
    print({k: v for k, v in main().items() if k != "history"})
