"""tensorflow/docs ``site/en/tutorials/distribute/input.ipynb``, its cells ported by renaming.

``tf.distribute`` -> ``tps``, ``tf.data`` -> ``tpsd``, ``tf.function`` -> ``tps.function``.
The tutorial makes 2 virtual CPUs; here the strategy is ``MirroredStrategy`` over 2 of the
test session's fake CPU devices, and TensorFlow 2.21's values (2 virtual CPUs,
``tools/make_guide_references.py``) are what each local result is compared with. The Keras
``StringLookup`` layer of the preprocessing cell is a ``tps.lookup.StaticHashTable`` with
the layer's numbering (OOV -> 0, vocabulary from 1); ``tf.print`` inside the function
becomes a returned list. Each pipeline also resumes in the middle: a distributed
iterator saved after some steps (``get_state`` / ``tps.train.Checkpoint``) continues with
exactly the steps the saved iterator would have given.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

_FIXTURE = os.path.join(os.path.dirname(__file__), "..", "data", "fixtures", "guide_references.json")
REF = json.load(open(_FIXTURE))["distribute"]


@pytest.fixture(scope="module")
def mirrored_strategy() -> tps.MirroredStrategy:
    """The tutorial's 2 virtual CPUs: tests using it compare with TensorFlow's 2-replica values."""
    return tps.MirroredStrategy(["/cpu:0", "/cpu:1"])


@pytest.fixture(scope="module")
def up_to_two() -> tps.MirroredStrategy:
    """The tutorial's strategy where the test does not depend on the count: one replica on --devices 1."""
    return tps.MirroredStrategy(jax.devices()[:2])


def local(strategy: Any, value: Any) -> list[Any]:
    return [np.asarray(v).tolist() for v in strategy.experimental_local_results(value)]


def steps(strategy: Any, it: Any, n: int | None = None) -> list[Any]:
    """The local results of the next ``n`` steps (all when None) of a distributed iterator."""
    out = []
    for x in it:
        out.append([local(strategy, leaf) for leaf in (x if isinstance(x, tuple) else (x,))])
        if n is not None and len(out) == n:
            break
    return out


def assert_resumes(strategy: Any, dist: Any, k: int) -> None:
    """A distributed iterator saved after ``k`` steps resumes with what it would give next."""
    it = iter(dist)
    steps(strategy, it, k)
    state = it.get_state()
    rest = steps(strategy, it)
    assert rest
    resumed = iter(dist)
    resumed.set_state(state)
    assert steps(strategy, resumed) == rest


@tps.function
def train_step(inputs):
    features, labels = inputs
    return labels - 0.3 * features


def test_plain_dataset_loop():
    global_batch_size = 16
    dataset = tpsd.Dataset.from_tensors(([1.0], [1.0])).repeat(100).batch(global_batch_size)
    out = [np.asarray(train_step(inputs)) for inputs in dataset]
    assert [o.shape for o in out] == [(16, 1)] * 6 + [(4, 1)]
    np.testing.assert_allclose(np.concatenate(out), np.full((100, 1), 0.7), rtol=1e-6)


@pytest.mark.devices(2)
def test_experimental_distribute_dataset_first_batch(mirrored_strategy):
    dataset = tpsd.Dataset.from_tensors(([1.0], [1.0])).repeat(100).batch(16)
    dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)
    features, labels = next(iter(dist_dataset))
    assert [list(np.shape(v)) for v in mirrored_strategy.experimental_local_results(features)] == REF[
        "first_batch_shapes"]
    assert isinstance(dist_dataset, tps.DistributedDataset)
    assert_resumes(mirrored_strategy, dist_dataset, 3)


def test_auto_shard_policy_option():
    dataset = tpsd.Dataset.from_tensors(([1.0], [1.0])).repeat(64).batch(16)
    options = tpsd.Options()
    options.experimental_distribute.auto_shard_policy = tpsd.experimental.AutoShardPolicy.DATA
    dataset = dataset.with_options(options)
    assert dataset.options().experimental_distribute.auto_shard_policy == tpsd.experimental.AutoShardPolicy.DATA


@pytest.mark.devices(2)
def test_distribute_datasets_from_function(mirrored_strategy):
    global_batch_size = 16

    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        dataset = tpsd.Dataset.from_tensors(([1.0], [1.0])).repeat(64).batch(16)
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        dataset = dataset.batch(batch_size)
        return dataset.prefetch(2)  # This prefetches 2 batches per device.

    dist_dataset = mirrored_strategy.distribute_datasets_from_function(dataset_fn)
    shapes = [[list(np.shape(v)) for v in mirrored_strategy.experimental_local_results(x[0])] for x in dist_dataset]
    assert shapes == REF["from_function_shapes"]  # one step: (4, 16, 1) and an empty (0, 0, 1)


@pytest.mark.devices(2)
def test_run_over_distributed_dataset(mirrored_strategy):
    dataset = tpsd.Dataset.from_tensors(([1.0], [1.0])).repeat(100).batch(16)
    dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)
    losses = [local(mirrored_strategy, mirrored_strategy.run(train_step, args=(x,))) for x in dist_dataset]
    assert len(losses) == len(REF["losses"]) == 7
    for got, ref in zip(losses, REF["losses"], strict=True):
        for g, r in zip(got, ref, strict=True):
            np.testing.assert_allclose(np.asarray(g, np.float32).reshape(-1), np.asarray(r, np.float32).reshape(-1))


def test_iter_per_epoch_with_next(up_to_two):
    dataset = tpsd.Dataset.from_tensors(([1.0], [1.0])).repeat(100).batch(16)
    dist_dataset = up_to_two.experimental_distribute_dataset(dataset)
    num_epochs, steps_per_epoch = 10, 5
    n = 0
    for _epoch in range(num_epochs):
        dist_iterator = iter(dist_dataset)
        for _step in range(steps_per_epoch):
            loss = up_to_two.run(train_step, args=(next(dist_iterator),))
            n += 1
            np.testing.assert_allclose(np.concatenate(local(up_to_two, loss)), np.full((16, 1), 0.7), rtol=1e-6)
        # dist_iterator.get_next() is the same as next(dist_iterator)
        first = up_to_two.experimental_local_results(dist_iterator.get_next()[0])[0]
        assert np.shape(first) == {1: (16, 1), 2: (8, 1)}[up_to_two.num_replicas_in_sync]
    assert n == 50


@pytest.mark.devices(2)
def test_get_next_as_optional_in_function(mirrored_strategy):
    global_batch_size, steps_per_loop = 4, 5
    strategy = mirrored_strategy
    dataset = tpsd.Dataset.range(9).batch(global_batch_size)
    distributed_iterator = iter(strategy.experimental_distribute_dataset(dataset))

    def identity(x):
        return x

    @tps.function
    def train_fn(distributed_iterator):
        printed = []  # tf.print(strategy.experimental_local_results(per_replica_results))
        for _ in range(steps_per_loop):
            optional_data = distributed_iterator.get_next_as_optional()
            if not optional_data.has_value():
                break
            per_replica_results = strategy.run(identity, args=(optional_data.get_value(),))
            printed.append(strategy.experimental_local_results(per_replica_results))
        return printed

    printed = train_fn(distributed_iterator)
    assert [[np.asarray(v).tolist() for v in p] for p in printed] == REF["optional"]


@pytest.mark.devices(2)
def test_get_next_as_optional_eager_and_empty(mirrored_strategy):
    strategy = mirrored_strategy
    it = iter(strategy.experimental_distribute_dataset(tpsd.Dataset.range(9).batch(4)))
    got = []
    while True:
        opt = it.get_next_as_optional()
        if not opt.has_value():
            break
        got.append(local(strategy, strategy.run(lambda x: x, args=(opt.get_value(),))))
    assert got == REF["optional"]
    with pytest.raises(tps.errors.InvalidArgumentError):
        it.get_next_as_optional().get_value()


@pytest.mark.devices(2)
def test_function_with_element_spec_input_signature(mirrored_strategy):
    dataset = tpsd.Dataset.from_tensors(([1.0], [1.0])).repeat(100).batch(16)
    dist_dataset = mirrored_strategy.experimental_distribute_dataset(dataset)

    @tps.function(input_signature=[dist_dataset.element_spec])
    def train_step2(per_replica_inputs):
        def step_fn(inputs):
            return 2 * inputs

        return mirrored_strategy.run(step_fn, args=(per_replica_inputs,))

    for _ in range(5):
        iterator = iter(dist_dataset)
        for _ in range(5):
            output = train_step2(next(iterator))
            # ``2 * inputs`` of the (features, labels) tuple is Python's tuple repetition, in
            # TensorFlow too: four parts, each the ones of the batch.
            assert len(output) == 4
            assert [local(mirrored_strategy, part) for part in output] == REF["input_signature_output"]
            for part in output:
                np.testing.assert_allclose(np.concatenate(local(mirrored_strategy, part)), np.full((16, 1), 1.0))


@pytest.mark.devices(2)
def test_preprocessing_lookup_in_dataset_fn(mirrored_strategy):
    strategy = mirrored_strategy
    vocab = ["a", "b", "c", "d", "f"]
    with strategy.scope():
        # keras.layers.StringLookup(vocabulary=vocab): OOV -> 0, the vocabulary from 1.
        layer = tps.lookup.StaticHashTable(
            tps.lookup.KeyValueTensorInitializer(vocab, np.arange(1, len(vocab) + 1, dtype=np.int64)), 0)

    def dataset_fn(input_context):
        dataset = tpsd.Dataset.from_tensor_slices(["a", "c", "e"]).repeat()
        global_batch_size = 4
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        dataset = dataset.batch(batch_size)
        dataset = dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)

        def preprocess_with_kpl(input):  # noqa: A002 (the tutorial's name)
            return layer.lookup(input)

        return dataset.map(preprocess_with_kpl)

    distributed_dataset = strategy.distribute_datasets_from_function(dataset_fn)
    distributed_dataset_iterator = iter(distributed_dataset)
    assert [local(strategy, next(distributed_dataset_iterator)) for _ in range(3)] == REF["string_lookup"]
    saved = distributed_dataset_iterator.get_state()
    expected = [local(strategy, next(distributed_dataset_iterator)) for _ in range(4)]
    resumed = iter(distributed_dataset)
    resumed.set_state(saved)
    assert [local(strategy, next(resumed)) for _ in range(4)] == expected


def test_enumerate_predict_partial_batches(up_to_two):
    dataset_size, batch_size = 24, 6
    dataset = tpsd.Dataset.range(dataset_size).enumerate().batch(batch_size)
    dist_dataset = up_to_two.experimental_distribute_dataset(dataset)

    def predict(index, inputs):
        outputs = 2 * inputs
        return index, outputs

    result = {}
    for index, inputs in dist_dataset:
        output_index, outputs = up_to_two.run(predict, args=(index, inputs))
        rindices = [i for a in up_to_two.experimental_local_results(output_index) for i in np.asarray(a)]
        routputs = [o for a in up_to_two.experimental_local_results(outputs) for o in np.asarray(a)]
        for i, value in zip(rindices, routputs, strict=True):
            result[int(i)] = int(value)
    assert sorted(result.items()) == [tuple(p) for p in REF["enumerate_predict"]]
    assert_resumes(up_to_two, dist_dataset, 2)


@pytest.mark.devices(2)
def test_distribute_values_from_function(mirrored_strategy):
    def value_fn(ctx):
        return np.int32(ctx.replica_id_in_sync_group)  # tf.constant(ctx.replica_id_in_sync_group)

    distributed_values = mirrored_strategy.experimental_distribute_values_from_function(value_fn)
    for _ in range(4):
        result = mirrored_strategy.run(lambda x: x, args=(distributed_values,))
        assert local(mirrored_strategy, result) == REF["values_from_function"]


def test_from_generator_distributed(up_to_two, tmp_path):
    rng = np.random.default_rng(0)

    def input_gen():
        while True:
            yield rng.random(4)

    dataset = tpsd.Dataset.from_generator(input_gen, output_types=(np.float32), output_shapes=(4,))
    dist_dataset = up_to_two.experimental_distribute_dataset(dataset)
    iterator = iter(dist_dataset)
    for _ in range(4):
        result = up_to_two.run(lambda x: x, args=(next(iterator),))
        parts = up_to_two.experimental_local_results(result)
        assert [np.shape(p) for p in parts] == {1: [(4,)], 2: [(2,), (2,)]}[up_to_two.num_replicas_in_sync]
        assert np.asarray(parts[0]).dtype == np.float32


def test_distributed_iterator_in_checkpoint(up_to_two, tmp_path):
    dataset = tpsd.Dataset.range(40).batch(4)
    dist = up_to_two.experimental_distribute_dataset(dataset)
    iterator = iter(dist)
    ckpt = tps.train.Checkpoint(iterator=iterator)
    steps(up_to_two, iterator, 3)
    path = ckpt.save(str(tmp_path / "ckpt"))
    expected = steps(up_to_two, iterator, 4)
    ckpt.restore(path)
    assert steps(up_to_two, iterator, 4) == expected
    assert expected[0] == {1: [[[12, 13, 14, 15]]], 2: [[[12, 13], [14, 15]]]}[up_to_two.num_replicas_in_sync]
