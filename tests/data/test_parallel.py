"""Background workers: real concurrency, order, error delivery and thread shutdown."""

from __future__ import annotations

import gc
import threading
import time
import traceback

import numpy as np
import pytest

import tpustrategy.data as tpsd

Dataset = tpsd.Dataset
pytestmark = pytest.mark.timeout(60)


def wait_for(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return predicate()


def worker_threads():
    return [t for t in threading.enumerate() if t.name.startswith("tpsd-")]


@pytest.fixture(autouse=True)
def no_leaked_threads():
    gc.collect()
    assert wait_for(lambda: not worker_threads()), worker_threads()
    yield
    gc.collect()
    assert wait_for(lambda: not worker_threads()), f"leaked: {worker_threads()}"


def test_parallel_map_calls_the_function_concurrently():
    barrier = threading.Barrier(2, timeout=10)

    def meet(x):
        barrier.wait()  # only returns if two calls are in flight at once
        return x

    assert [int(x) for x in Dataset.range(2).map(meet, num_parallel_calls=2)] == [0, 1]


def test_parallel_interleave_reads_inner_datasets_concurrently():
    barrier = threading.Barrier(2, timeout=10)

    def inner(x):
        def gen():
            barrier.wait()
            yield int(x)

        return Dataset.from_generator(gen, output_types=np.int64)

    ds = Dataset.range(2).interleave(inner, cycle_length=2, num_parallel_calls=2)
    assert sorted(int(v) for v in ds) == [0, 1]


def test_prefetch_produces_ahead_of_the_consumer():
    produced = []
    ds = Dataset.range(10).map(lambda x: produced.append(int(x)) or x).prefetch(3)
    it = iter(ds)
    assert int(next(it)) == 0
    assert wait_for(lambda: len(produced) >= 3)
    assert [int(x) for x in it] == list(range(1, 10))


def test_prefetch_never_runs_far_past_its_buffer():
    produced = []
    it = iter(Dataset.range(1000).map(lambda x: produced.append(1) or x).prefetch(4))
    next(it)
    time.sleep(0.2)
    assert len(produced) <= 1 + 2 * 4
    it.close()


def test_closing_an_iterator_stops_every_worker_thread():
    ds = (
        Dataset.range(10_000)
        .map(lambda x: x, num_parallel_calls=3)
        .prefetch(5)
        .interleave(lambda x: Dataset.range(3).prefetch(2), cycle_length=3, num_parallel_calls=3)
        .batch(4, num_parallel_calls=2)
    )
    it = iter(ds)
    next(it)
    assert worker_threads()
    it.close()
    assert not worker_threads()
    with pytest.raises(StopIteration):
        next(it)


def test_dropping_an_iterator_stops_its_threads():
    it = iter(Dataset.range(10_000).map(lambda x: x, num_parallel_calls=2).prefetch(2))
    next(it)
    assert worker_threads()
    del it
    gc.collect()
    assert wait_for(lambda: not worker_threads())


def test_a_finished_iterator_leaves_no_threads():
    assert len(list(Dataset.range(100).map(lambda x: x, num_parallel_calls=2).prefetch(1))) == 100
    assert wait_for(lambda: not worker_threads())


class Boom(Exception):
    pass


def explode_at_5(x):
    if x == 5:
        raise Boom(f"bad element {int(x)}")
    return x


@pytest.mark.parametrize(
    "build",
    [
        lambda: Dataset.range(20).map(explode_at_5),
        lambda: Dataset.range(20).map(explode_at_5, num_parallel_calls=3),
        lambda: Dataset.range(20).map(explode_at_5).prefetch(4),
        lambda: Dataset.range(20).map(explode_at_5, num_parallel_calls=2).prefetch(tpsd.AUTOTUNE),
        lambda: Dataset.range(1).interleave(
            lambda _: Dataset.range(20).map(explode_at_5), cycle_length=2, num_parallel_calls=2
        ),
    ],
    ids=["map", "parallel_map", "prefetch", "parallel_map_prefetch", "parallel_interleave"],
)
def test_an_error_in_a_user_function_arrives_once_after_the_good_elements(build):
    it = iter(build())
    got = []
    with pytest.raises(Boom, match="bad element 5") as info:
        for x in it:
            got.append(int(x))
    assert got == [0, 1, 2, 3, 4]
    assert "explode_at_5" in "".join(traceback.format_tb(info.value.__traceback__))
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(StopIteration):
        next(it)
    assert wait_for(lambda: not worker_threads())


def test_an_error_inside_a_batch_stops_the_pipeline_without_hanging():
    it = iter(Dataset.range(20).map(explode_at_5, num_parallel_calls=2).batch(4).prefetch(2))
    assert next(it).tolist() == [0, 1, 2, 3]
    with pytest.raises(Boom):
        next(it)
    assert list(it) == []


def test_an_error_in_a_generator_reaches_the_consumer_through_prefetch():
    def gen():
        yield 1
        raise RuntimeError("generator failed")

    it = iter(Dataset.from_generator(gen, output_types=np.int64).prefetch(2))
    assert int(next(it)) == 1
    with pytest.raises(RuntimeError, match="generator failed"):
        next(it)
    assert next(it, None) is None


def test_get_state_of_a_parallel_map_is_the_consumer_position_not_the_workers():
    ds = Dataset.range(1000).map(lambda x: x, num_parallel_calls=2)
    it = iter(ds)
    for _ in range(10):
        next(it)
    state = it.get_state()
    it.close()
    fresh = iter(ds)
    fresh.set_state(state)
    assert int(next(fresh)) == 10
    fresh.close()


def test_set_state_on_a_running_prefetch_restarts_it_at_the_position():
    ds = Dataset.range(500).prefetch(8)
    it = iter(ds)
    for _ in range(3):
        next(it)
    state = it.get_state()
    for _ in range(50):
        next(it)
    it.set_state(state)
    assert [int(next(it)) for _ in range(3)] == [3, 4, 5]
    it.close()


def test_num_parallel_calls_validation_mentions_autotune():
    with pytest.raises(TypeError, match="num_parallel_calls must be an int or AUTOTUNE"):
        Dataset.range(3).map(lambda x: x, num_parallel_calls=1.5)
    with pytest.raises(ValueError, match="positive or AUTOTUNE"):
        Dataset.range(3).interleave(lambda x: Dataset.range(x), num_parallel_calls=-3)
