"""The examples train: a few steps of each lower the loss."""

from __future__ import annotations

import importlib.util
import math
import os
import pathlib

import pytest

_EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _load(name: str):
    import jax

    # An example adds --xla_force_host_platform_device_count=8 to XLA_FLAGS unless the flag
    # already says 8: JAX starts first, with this run's devices (--devices), and the flag the
    # example adds is taken back so that no later subprocess inherits it.
    jax.devices()
    flags = os.environ.get("XLA_FLAGS")
    spec = importlib.util.spec_from_file_location(f"tps_example_{name}", _EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    finally:
        if flags is None:
            os.environ.pop("XLA_FLAGS", None)
        else:
            os.environ["XLA_FLAGS"] = flags
    return module


@pytest.mark.parametrize("name", ["tf_style_loop", "functional_loop"])
def test_a_few_steps_of_the_example_lower_the_loss(name):
    result = _load(name).main(steps=30)
    assert result["final_loss"] < 0.5 * result["first_loss"], result
    assert result["accuracy"] > 0.8, result


def _plain_variable_accuracy(example, epochs: int) -> float:
    """The same model, data and Adam steps written the tf_style_loop way: hand-written
    all-reduce, optax update and ``assign`` over plain ``tps.Variable`` pytrees."""
    import jax
    import numpy as np
    import optax

    import tpustrategy as tps
    import tpustrategy.data as tpsd

    strategy = tps.MirroredStrategy()
    (train_images, train_labels), (test_images, test_labels) = example.load_digits()
    global_batch = 8 * strategy.num_replicas_in_sync
    dataset = tpsd.Dataset.from_tensor_slices((train_images, train_labels)).shuffle(
        len(train_images), seed=0).batch(global_batch)
    tx = optax.adam(1e-3, eps=1e-7)
    with strategy.scope():
        model = example.create_model()
        opt_state = jax.tree.map(tps.Variable, tx.init(model.weights()))

    def replica_step(inputs):
        images, labels = inputs
        params, state = model.weights(), jax.tree.map(lambda v: v.read_value(), opt_state)
        grads = jax.grad(lambda w: tps.nn.compute_average_loss(
            example.loss_object(labels, example.Model.apply(w, images)), global_batch_size=global_batch))(params)
        grads = tps.get_replica_context().all_reduce("SUM", grads)
        updates, new_state = tx.update(grads, state, params)
        jax.tree.map(lambda v, s: v.assign(s), opt_state, new_state)
        for v, new in zip(model.trainable_variables, optax.apply_updates(params, updates)):
            v.assign(new)

    @tps.function
    def train_step(inputs):
        strategy.run(replica_step, args=(inputs,))

    for _ in range(epochs):
        for inputs in strategy.experimental_distribute_dataset(dataset):
            train_step(inputs)
    logits = example.Model.apply([np.asarray(v.read_value()) for v in model.trainable_variables], test_images)
    return float((np.argmax(np.asarray(logits), -1) == test_labels).mean())


def test_the_keras_style_loop_trains_to_the_accuracy_of_the_plain_variable_loop():
    import jax

    example = _load("keras_style_loop")
    result = example.main(epochs=6, verbose=False)
    assert result["final_loss"] < 0.5 * result["first_loss"], result
    assert result["accuracy"] > 0.85, result
    # 1437 examples in global batches of 8 per replica (64 on 8 devices: 23 steps), the last ragged
    assert result["iterations"] == 6 * math.ceil(1437 / (8 * jax.device_count()))
    # The model restored from the last checkpoint (saved after epoch 5), evaluated without a
    # strategy, has the accuracy the distributed test loop measured for that epoch.
    assert result["eval_accuracy"] == result["checkpointed_test_accuracy"]
    plain = _plain_variable_accuracy(example, epochs=6)
    assert abs(result["accuracy"] - plain) <= 2 / 360, (result["accuracy"], plain)

