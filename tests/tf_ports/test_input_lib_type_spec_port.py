"""TensorFlow's ``tensorflow/python/distribute/input_lib_type_spec_test.py``, ported.

The cases read TensorFlow's private ``iterator._type_spec``; their public content is
``element_spec`` of distributed datasets and iterators (a ``PerReplica`` of
``TensorSpec``s with an unknown batch dimension), ``tps.function(input_signature=...)``
built from it, and a ``tps.function`` that pulls from a new iterator of the same
dataset without compiling again. TensorFlow traces that function once; ours traces a
function that pulls from an iterator twice on its first call (once to find the pulls,
once to build the program; README "Where we differ"), and never again for a new iterator
of the same dataset. Ragged and sparse element cases have no meaning here (JAX has no
ragged or sparse tensor); ``most_specific_compatible_type`` is private TypeSpec API.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

STRATEGIES = {
    "one_device": lambda: tps.OneDeviceStrategy(jax.devices()[0]),
    "mirrored_one_cpu": lambda: tps.MirroredStrategy(jax.devices()[:1]),
    "mirrored_two": lambda: tps.MirroredStrategy(jax.devices()[:2]),
    "tpu": lambda: tps.TPUStrategy(),
    "central_storage_two": lambda: tps.experimental.CentralStorageStrategy(jax.devices()[:2]),
}
MULTI = ["mirrored_two", "tpu"]


def _spec(shape, dtype):
    return tpsd.TensorSpec(shape=shape, dtype=dtype)


@pytest.mark.parametrize("name", MULTI)
def test_element_spec_of_a_distributed_iterator_is_one_tensor_spec_per_replica(name):
    strategy = STRATEGIES[name]()
    dist_dataset = strategy.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(2))
    with strategy.scope():
        iterator = iter(dist_dataset)
    spec = _spec((None,), np.int64)
    if strategy.num_replicas_in_sync == 1:
        # TensorFlow gives one replica the dataset's own spec, unwrapped, as `run` gets a plain
        # tensor (input_lib._create_distributed_tensor_spec).
        assert iterator.element_spec == spec and dist_dataset.element_spec == spec
        return
    expected = (spec,) * strategy.num_replicas_in_sync
    assert tuple(iterator.element_spec.values) == expected
    assert tuple(dist_dataset.element_spec.values) == expected


@pytest.mark.parametrize("name", MULTI)
def test_a_new_iterator_of_the_same_dataset_does_not_trace_again(name):
    strategy = STRATEGIES[name]()
    trace_count = [0]

    @tps.function
    def f(iterator):
        trace_count[0] += 1
        counter = np.int64(0)
        for _ in range(5):
            next(iterator)
            counter += 1
        return counter

    dist_dataset = strategy.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(2))
    counts = []
    with strategy.scope():
        for _ in range(3):
            counter = f(iter(dist_dataset))
            counts.append(trace_count[0])
            assert int(counter) == 5
    assert counts[0] == counts[1] == counts[2]


@pytest.mark.parametrize("input_type", ["dataset", "dataset_fn"])
@pytest.mark.parametrize("name", list(STRATEGIES))
def test_input_signature_from_per_replica_element_spec(name, input_type):
    strategy = STRATEGIES[name]()

    def dataset_fn(ctx):
        del ctx
        return tpsd.Dataset.from_tensor_slices(np.ones([10, 12]).astype(np.float32)).batch(4)

    if input_type == "dataset":
        ds = strategy.experimental_distribute_dataset(dataset_fn(tps.InputContext()))
        type_spec = ds.element_spec
    else:
        ds = strategy.distribute_datasets_from_function(dataset_fn)
        type_spec = iter(ds).element_spec

    seen = []

    @tps.function(input_signature=[type_spec])
    def process_inputs(inputs):
        return strategy.run(lambda inputs: inputs, args=(inputs,))

    for x in ds:
        out = process_inputs(x)
        seen.append(sum(np.asarray(c).shape[0] for c in strategy.experimental_local_results(out)))
    assert sum(seen) == 10


@pytest.mark.parametrize("name", list(STRATEGIES))
def test_input_signature_from_nested_per_replica_element_spec(name):
    strategy = STRATEGIES[name]()
    a = np.ones((10, 2)) * 5
    b = np.ones((10, 3)) * 6
    dist_dataset = strategy.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices((a, b)).batch(2))

    @tps.function(input_signature=[dist_dataset.element_spec])
    def process_inputs(inputs):
        return strategy.run(lambda inputs: inputs, args=(inputs,))

    total = 0
    for x in dist_dataset:
        first, second = process_inputs(x)
        for c1, c2 in zip(strategy.experimental_local_results(first), strategy.experimental_local_results(second)):
            assert np.all(np.asarray(c1) == 5) and np.all(np.asarray(c2) == 6)
            total += np.asarray(c1).shape[0]
    assert total == 10
