"""Iterating distributed datasets and iterators inside tps.function, with TensorFlow's results."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


def _strategy(n):
    return tps.MirroredStrategy(devices=jax.devices()[:n])


def _sum_step(s):
    def step(x):
        return tps.get_replica_context().all_reduce("SUM", jnp.sum(x))

    return step


def test_for_over_a_distributed_dataset_inside_tps_function_sees_every_batch_each_call():
    s = _strategy(4)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4))
    step = _sum_step(s)

    @tps.function
    def total():
        acc = jnp.int32(0)
        for x in dist:  # every replica holds the all-reduced sum: the reduce counts it R times
            acc = acc + s.reduce("SUM", s.run(step, (x,)), axis=None) // s.num_replicas_in_sync
        return acc

    assert int(total()) == 45
    assert int(total()) == 45  # a fresh iterator each call, as in TensorFlow


def test_for_over_an_iterator_inside_tps_function_consumes_what_is_left():
    s = _strategy(2)
    it = iter(s.experimental_distribute_dataset(tpsd.Dataset.range(12).batch(2)))
    step = _sum_step(s)

    @tps.function
    def rest(iterator):
        acc = jnp.int32(0)
        for x in iterator:
            acc = acc + s.reduce("SUM", s.run(step, (x,)), axis=None) // s.num_replicas_in_sync
        return acc

    first = next(it)
    assert int(s.reduce("SUM", first, axis=0)) == 1
    assert int(rest(it)) == sum(range(2, 12))
    with pytest.raises(StopIteration):
        next(it)


def test_a_while_loop_over_get_next_as_optional_inside_tps_function():
    s = _strategy(4)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(8).map(lambda v: np.float32(v)).batch(4))

    @tps.function
    def mean_of_all(iterator):
        total, count = jnp.float32(0), 0
        while True:
            optional = iterator.get_next_as_optional()
            if not optional.has_value():
                break
            total = total + s.reduce("SUM", optional.get_value(), axis=0)
            count += 4
        return total / count

    assert float(mean_of_all(iter(dist))) == pytest.approx(3.5)


def test_next_past_the_end_inside_tps_function_raises_out_of_range_error():
    s = _strategy(2)
    it = iter(s.experimental_distribute_dataset(tpsd.Dataset.range(4).batch(2)))

    @tps.function
    def two_steps(iterator):
        a = s.reduce("SUM", next(iterator), axis=0)
        return a + s.reduce("SUM", next(iterator), axis=0)

    assert int(two_steps(it)) == 6
    with pytest.raises(tps.errors.OutOfRangeError):
        two_steps(it)


def test_k_steps_per_call_pull_k_batches_per_call_and_end_cleanly():
    s = _strategy(2)
    it = iter(s.experimental_distribute_dataset(tpsd.Dataset.range(12).batch(2)))

    @tps.function
    def three(iterator):
        return [s.reduce("SUM", next(iterator), axis=0) for _ in range(3)]

    assert [int(v) for v in three(it)] == [1, 5, 9]
    assert [int(v) for v in three(it)] == [13, 17, 21]
    with pytest.raises(StopIteration):
        three(it)


def test_a_new_iterator_in_the_same_argument_reuses_the_program():
    s = _strategy(2)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(2))
    traces = []

    @tps.function
    def first(iterator):
        traces.append(1)
        return s.reduce("SUM", next(iterator), axis=0)

    assert int(first(iter(dist))) == 1
    traced_once = len(traces)  # the first call traces again once it has the batch as an input
    assert [int(first(iter(dist))) for _ in range(3)] == [1, 1, 1]
    assert len(traces) == traced_once


def test_an_endless_loop_over_a_dataset_inside_tps_function_names_the_limit(monkeypatch):
    from tpustrategy._src import config

    monkeypatch.setattr(config, "MAX_UNROLLED_PULLS", 5)
    s = _strategy(2)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(4).repeat().batch(2))

    @tps.function
    def forever():
        acc = 0
        for x in dist:
            acc = acc + s.reduce("SUM", x, axis=0)
        return acc

    with pytest.raises(RuntimeError, match="(?s)unrolled.*TPS_MAX_UNROLLED_PULLS"):
        forever()
