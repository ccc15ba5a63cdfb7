"""What cannot be an argument of strategy.run, or a value of a variable, is named with its fix."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


@pytest.fixture(params=["compiled", "eager"])
def strategy(request):
    tps.config.run_functions_eagerly(request.param == "eager")
    yield tps.MirroredStrategy()
    tps.config.run_functions_eagerly(False)


def test_a_distributed_dataset_is_not_a_replica_functions_argument(strategy):
    dist = strategy.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(4))
    with pytest.raises(TypeError) as info:
        strategy.run(lambda x: x * 2, args=(dist,))
    message = str(info.value)
    assert message.startswith("strategy.run: args[0] is a distributed dataset, but the replica "
                              "function takes one batch")
    assert "Received: args[0] of type DistributedDataset" in message
    assert "strategy.run(fn, args=(next(iterator),))" in message


def test_a_distributed_iterator_is_not_one_either_in_keyword_arguments_too(strategy):
    it = iter(strategy.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(4)))
    with pytest.raises(TypeError, match=r"kwargs\['batch'\] is a distributed iterator"):
        strategy.run(lambda batch: batch * 2, kwargs={"batch": it})
    # The iterator is untouched: its batches are all still there.
    assert sorted(int(v) for b in it for v in np.ravel(strategy.gather(b, axis=0))) == list(range(8))


def test_a_value_for_args_keeps_tensorflows_text_and_names_the_fix(strategy):
    value = strategy.experimental_distribute_values_from_function(lambda ctx: np.float32(1))
    with pytest.raises(ValueError, match="positional args must be a list or tuple") as info:
        strategy.run(lambda x: x, args=value)
    assert "Fix: wrap one argument in a tuple, strategy.run(fn, args=(value,))." in str(info.value)


def test_a_reduce_axis_of_another_type_keeps_tensorflows_text_and_names_the_fix(strategy):
    out = strategy.run(lambda: jnp.ones(3))
    with pytest.raises(TypeError, match="Expected `axis` to be an integer, tuple or list") as info:
        strategy.reduce("SUM", out, axis="x")
    assert "Received: axis='x'" in str(info.value) and "axis=None" in str(info.value)


@pytest.mark.parametrize("value", ["abc", [1.0, "a", 3.0], object()], ids=["str", "mixed list", "object"])
def test_assigning_a_value_that_is_not_numbers_names_the_variable(strategy, value):
    with strategy.scope():
        v = tps.Variable(jnp.zeros(3))
    with pytest.raises(TypeError) as info:
        v.assign(value)
    message = str(info.value)
    assert message.startswith(f"Variable.assign: variable {v.name!r} holds float32 numbers, but the value "
                              "is not numeric.")
    assert f"Received: {type(value).__name__}" in message and "shape (3,)" in message
    np.testing.assert_array_equal(v.numpy(), np.zeros(3))  # nothing was written
