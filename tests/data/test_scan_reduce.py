"""`scan`, `reduce` and `get_single_element`: TensorFlow's scan/reduce/get_single_element tests."""

from __future__ import annotations

import collections
import itertools

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset


@pytest.mark.parametrize("start,step,take", [(0, 1, 10), (0, 1, 0), (10, 1, 10), (10, 2, 10), (10, -1, 10), (10, -2, 10)])
def test_scan_counts_from_start_by_step(start, step, take):
    ds = Dataset.from_tensors(0).repeat().scan(initial_state=start, scan_func=lambda state, _: (state + step, state))
    got = [int(x) for x in ds.take(take)]
    assert got == [v for v, _ in zip(itertools.count(start, step), range(take))]


def test_scan_fibonacci_with_a_list_state():
    ds = Dataset.from_tensors(1).repeat(None).scan(initial_state=[0, 1], scan_func=lambda a, _: ([a[1], a[0] + a[1]], a[1]))
    assert [int(x) for x in ds.take(6)] == [1, 1, 2, 3, 5, 8]


def test_scan_state_may_grow_by_one_value_each_step():
    seen = []

    def fn(state, x):
        seen.append(state)
        return np.append(state, x), state.sum()

    out = [int(v) for v in Dataset.range(4).scan(np.array([-1], np.int64), fn)]
    assert out == [-1, -1, 0, 2]
    assert seen[-1].tolist() == [-1, 0, 1, 2]


def test_scan_resets_a_growing_state_like_tensorflows_tensor_array_test():
    def fn(state, x):
        updated = np.append(state, x)
        nxt = np.zeros((0,), np.int64) if x % 3 == 0 else updated
        return nxt, updated

    ds = Dataset.range(6).scan(initial_state=np.array([-1], np.int64), scan_func=fn)
    expected = [[-1, 0], [1], [1, 2], [1, 2, 3], [4], [4, 5]]
    for _ in range(2):  # two iterations of the same dataset start from the initial state
        assert [x.tolist() for x in ds] == expected


def test_scan_state_shapes_may_change_and_the_spec_relaxes_them():
    def fn(state, x):
        return np.concatenate([state, state]), (state, x)

    ds = Dataset.from_tensors(np.int32(0)).repeat(5).scan(initial_state=np.array([0], np.int32), scan_func=fn)
    assert ds.element_spec == (tpsd.TensorSpec((None,), np.int32), tpsd.TensorSpec((), np.int32))
    for i, (vec, _) in enumerate(ds):
        assert vec.tolist() == [0] * 2**i


def test_scan_rank_changing_state_is_allowed():
    def fn(state, x):
        return (np.concatenate([state[0], state[0]]), np.expand_dims(state[1], 0)), (state, x)

    ds = Dataset.from_tensors(0).repeat(5).scan(initial_state=([0], 1), scan_func=fn)
    for i, ((longer, larger_rank), _) in enumerate(ds):
        assert longer.tolist() == [0] * 2**i
        np.testing.assert_array_equal(larger_rank, np.array(1, ndmin=i))


def test_scan_new_state_of_another_dtype_is_tensorflows_type_error():
    with pytest.raises(TypeError, match="the element types for the new state must match the initial state"):
        Dataset.range(10).scan(initial_state=np.int32(1), scan_func=lambda state, _: (np.int64(1), state))


def test_scan_new_state_of_another_structure_is_a_type_error_at_construction():
    with pytest.raises(TypeError, match="element structure for the new state must match"):
        Dataset.range(3).scan(initial_state=(np.int64(0), np.int64(0)), scan_func=lambda s, x: (s[0], x))


def test_scan_without_a_static_spec_checks_the_new_state_while_iterating():
    ds = Dataset.from_generator(lambda: iter(range(3)))  # no signature: nothing to trace with
    ds = ds.scan(initial_state=(np.int64(0), np.int64(0)), scan_func=lambda s, x: (s[0], x))
    with pytest.raises(TypeError, match=r"Expected \(tensor, tensor\); got tensor"):
        list(ds)


def test_scan_function_that_does_not_return_a_pair_is_tensorflows_type_error():
    with pytest.raises(TypeError, match="`scan_func` should return a pair consisting of new state and the output value"):
        Dataset.range(10).scan(initial_state=np.int32(1), scan_func=lambda state, x: np.int64(1))


def test_scan_keeps_the_input_cardinality():
    assert Dataset.range(7).scan(0, lambda s, x: (s, x)).cardinality() == 7
    assert Dataset.range(7).repeat().scan(0, lambda s, x: (s, x)).cardinality() == tpsd.INFINITE_CARDINALITY


def test_scan_name_and_tuple_elements_passed_whole():
    ds = Dataset.zip((Dataset.range(3), Dataset.range(3))).scan(np.int64(0), lambda s, xy: (s + xy[0] + xy[1], s), name="scan")
    assert [int(x) for x in ds] == [0, 0, 2]
    assert [int(x) for x in Dataset.from_tensors(42).scan(0, lambda x, y: (np.int32(y), y))] == [42]


def test_scan_checkpoint_at_every_position_of_the_fibonacci_pipeline():
    ds = Dataset.from_tensors(1).repeat(10).scan(initial_state=[0, 1], scan_func=lambda a, _: ([a[1], a[0] + a[1]], a[1]))
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert [int(x) for x in out] == [1, 1, 2, 3, 5, 8, 13, 21, 34, 55]


Pair = collections.namedtuple("Pair", "total strings")


def test_scan_checkpoint_keeps_a_namedtuple_state_with_strings_exactly():
    def fn(state, x):
        return Pair(state.total + x, np.append(state.strings, np.array([str(int(x))], dtype=object))), state.total

    init = Pair(np.int64(0), np.array([], dtype=object))
    ds = Dataset.range(12).scan(init, fn)
    assert_iterator_checkpointing(ds, num_checkpoints=None)
    it = iter(ds)
    for _ in range(5):
        next(it)
    state = it.get_state()
    restored = iter(ds)
    restored.set_state(state)
    assert int(next(restored)) == 10


def test_scan_restore_cost_does_not_depend_on_the_position():
    calls = []
    ds = Dataset.range(100_000).map(lambda x: calls.append(1) or x).scan(np.int64(0), lambda s, x: (s + x, s))
    it = iter(ds)
    for _ in range(20_000):
        next(it)
    state = it.get_state()
    calls.clear()
    restored = iter(ds)
    restored.set_state(state)
    assert int(next(restored)) == sum(range(20_000))
    assert len(calls) == 1


@pytest.mark.parametrize("i", range(10))
def test_reduce_sum(i):
    assert int(Dataset.range(1, i + 1).reduce(np.int64(0), lambda x, y: x + y)) == (i + 1) * i // 2


@pytest.mark.parametrize("i", [0, 3, 9])
def test_reduce_sum_of_tuple_elements_gets_the_element_whole(i):
    ds = Dataset.zip((Dataset.range(1, i + 1), Dataset.range(1, i + 1)))
    assert int(ds.reduce(np.int64(0), lambda state, value: state + value[0] + value[1])) == (i + 1) * i


@pytest.mark.parametrize("i", [0, 4, 9])
def test_reduce_sum_and_count(i):
    s, c = Dataset.range(1, i + 1).reduce((np.int64(0), np.int64(0)), lambda state, v: (state[0] + v, state[1] + 1))
    assert (int(s), int(c)) == ((i + 1) * i // 2, i)


def test_reduce_nested_dict_state():
    def reduce_fn(state, value):
        state["dense"] += value["dense"]
        state["last"] = value["last"]
        return state

    ds = Dataset.range(1, 10).map(lambda i: {"dense": np.int64(i), "last": np.array([i], np.int64)})
    out = ds.reduce({"dense": np.int64(0), "last": np.array([0], np.int64)}, reduce_fn)
    assert int(out["dense"]) == 45 and out["last"].tolist() == [9]


def test_reduce_state_dtype_change_is_a_type_error():
    with pytest.raises(TypeError, match="Dataset.reduce: the element types for the new state must match"):
        Dataset.range(3).reduce(0, lambda s, x: s + x)  # int32 state + int64 element


def test_reduce_of_an_infinite_dataset_is_refused():
    with pytest.raises(ValueError, match="Dataset.reduce: the dataset is infinite"):
        Dataset.range(3).repeat().reduce(np.int64(0), lambda s, x: s + x)


@pytest.mark.parametrize("skip", [0, 5, 10])
def test_get_single_element_returns_the_element(skip):
    ds = Dataset.range(100).skip(skip).map(lambda x: (x * x, x[np.newaxis])).take(1)
    dense, vec = ds.get_single_element()
    assert int(dense) == skip * skip and vec.tolist() == [skip]


def test_get_single_element_of_an_empty_dataset_is_tensorflows_message():
    with pytest.raises(ValueError, match="Dataset was empty."):
        Dataset.range(100).skip(100).take(1).get_single_element()


def test_get_single_element_of_two_elements_is_tensorflows_message():
    with pytest.raises(ValueError, match="Dataset had more than one element."):
        Dataset.range(100).take(2).get_single_element()


def test_get_single_element_consumes_a_window_inside_flat_map():
    ds = Dataset.range(10).window(2).flat_map(lambda w: Dataset.from_tensors(w.batch(2).get_single_element()))
    assert [b.tolist() for b in ds] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


def test_get_single_element_runs_the_map_once():
    calls = []
    assert int(Dataset.range(1).map(lambda x: calls.append(1) or x).get_single_element(name="g")) == 0
    assert len(calls) == 1


def test_experimental_function_forms():
    ds = Dataset.range(5)
    assert [int(x) for x in ds.apply(tpsd.experimental.scan(np.int64(0), lambda s, x: (s + x, s)))] == [0, 0, 1, 3, 6]
    assert int(tpsd.experimental.get_single_element(Dataset.from_tensors(np.int64(7)))) == 7
