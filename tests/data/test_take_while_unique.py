"""`take_while` and `unique`: TensorFlow's take_while_test.py and unique_test.py cases."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset


@pytest.mark.parametrize("num_elements,window_size", [(14, 2), (15, 2), (100, 3)])
def test_take_while_stops_at_the_first_short_batch(num_elements, window_size):
    ds = Dataset.range(num_elements).batch(window_size)
    ds = ds.take_while(predicate=lambda elem: elem.shape[0] > window_size - 1).flat_map(Dataset.from_tensor_slices)
    assert [int(x) for x in ds] == list(range(num_elements // window_size * window_size))


@pytest.mark.parametrize("num_elements,upper_bound", [(10, 2), (16, 7), (100, 99), (100, 101), (0, 1)])
def test_take_while_range_below_a_bound(num_elements, upper_bound):
    ds = Dataset.range(num_elements).take_while(lambda x: x < upper_bound)
    assert [int(x) for x in ds] == list(range(min(num_elements, upper_bound)))


def test_take_while_strings():
    words = ["this", "is", "the", "test", "for", "strings"]
    ds = Dataset.from_tensor_slices(words).take_while(predicate=lambda x: x != b"test")
    assert list(ds) == [b"this", b"is", b"the"]


@pytest.mark.parametrize("size,index", [(5, 3), (10, 0), (100, 5), (8, 7)])
def test_take_while_short_circuits_at_the_first_false(size, index):
    flags = [True] * size
    flags[index] = False
    assert list(Dataset.from_tensor_slices(flags).take_while(predicate=lambda x: x)) == [True] * index


def test_take_while_then_repeat_restarts_each_epoch():
    ds = Dataset.range(10).take_while(predicate=lambda x: x < 2).repeat(5)
    assert [int(x) for x in ds] == [0, 1] * 5


def test_take_while_unpacks_tuple_elements_and_has_unknown_cardinality():
    ds = Dataset.zip((Dataset.range(10), Dataset.range(10, 20))).take_while(lambda a, b: a + b < 16)
    assert [(int(a), int(b)) for a, b in ds] == [(0, 10), (1, 11), (2, 12)]
    assert ds.cardinality() == tpsd.UNKNOWN_CARDINALITY


def test_take_while_predicate_that_is_not_a_scalar_bool_names_the_api():
    with pytest.raises(TypeError, match="Dataset.take_while: `predicate` return type must be convertible to a scalar boolean"):
        list(Dataset.range(3).take_while(lambda x: np.array([True, False])))


def test_take_while_predicate_must_be_callable():
    with pytest.raises(TypeError, match="Dataset.take_while: `predicate` must be callable"):
        Dataset.range(3).take_while(3)


@pytest.mark.parametrize("num_elements,upper_bound", [(10, 10), (10, 23), (23, 10), (23, 23)])
def test_take_while_checkpoint_at_every_position(num_elements, upper_bound):
    ds = Dataset.range(num_elements).take_while(predicate=lambda x: x < upper_bound)
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert len(out) == min(num_elements, upper_bound)


INT_CASES = [
    ([], []),
    ([1], [1]),
    ([1, 1, 1, 1, 1, 1, 1], [1]),
    ([1, 1, 1, 1, 0], [1, 0]),
    ([1, 2, 3, 4], [1, 2, 3, 4]),
    ([1, 2, 4, 3, 2, 1, 2, 3, 4], [1, 2, 4, 3]),
    ([[1], [1, 1], [1, 1, 1]], [[1], [1, 1], [1, 1, 1]]),
    ([[1, 1], [1, 1], [2, 2], [3, 3], [1, 1]], [[1, 1], [2, 2], [3, 3]]),
]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("values,expected", INT_CASES)
def test_unique_ints_keep_first_occurrences(dtype, values, expected):
    ds = Dataset.from_generator(lambda: iter(values), dtype).unique()
    got = list(ds)
    assert [np.asarray(x).tolist() for x in got] == expected
    assert all(np.asarray(x).dtype == dtype for x in got)


@pytest.mark.parametrize(
    "values,expected",
    [
        ([], []),
        (["hello"], ["hello"]),
        (["hello", "hello", "hello"], ["hello"]),
        (["hello", "world"], ["hello", "world"]),
        (["foo", "bar", "baz", "baz", "bar", "foo"], ["foo", "bar", "baz"]),
    ],
)
def test_unique_strings(values, expected):
    ds = Dataset.from_generator(lambda: iter(values), "string").unique()
    assert list(ds) == [e.encode() for e in expected]


@pytest.mark.parametrize("dtype", [np.bool_, np.float64, np.complex64, np.float32, np.float16])
def test_unique_rejects_unsupported_types(dtype):
    with pytest.raises(TypeError, match="unique\\(\\) only supports inputs with a single int32, int64, or string component"):
        Dataset.from_tensor_slices(np.zeros(3, dtype)).unique()


def test_unique_rejects_an_unsupported_type_without_a_static_spec_at_the_first_element():
    ds = Dataset.from_generator(lambda: iter([1.5, 2.5]), np.float32).unique()
    with pytest.raises(TypeError, match="single int32, int64, or string component"):
        list(ds)


def test_unique_rejects_tuple_elements():
    with pytest.raises(TypeError, match="single int32, int64, or string component"):
        Dataset.zip((Dataset.range(3), Dataset.range(3))).unique()


def test_unique_name_and_cardinality():
    ds = Dataset.from_tensors(42).unique(name="unique")
    assert [int(x) for x in ds] == [42]
    assert ds.cardinality() == tpsd.UNKNOWN_CARDINALITY


def test_unique_checkpoint_at_every_position_of_tensorflows_pipeline():
    ds = Dataset.range(200).map(lambda x: x % 100).unique()
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert [int(x) for x in out] == list(range(100))


def test_unique_checkpoint_of_strings_and_vectors():
    ds = Dataset.from_tensor_slices(["a", "b", "a", "c", "b", "d"]).unique()
    assert assert_iterator_checkpointing(ds, num_checkpoints=None) == [b"a", b"b", b"c", b"d"]
    vecs = Dataset.from_generator(lambda: iter([[1], [1, 1], [1], [2], [1, 1]]), np.int64).unique()
    assert [v.tolist() for v in assert_iterator_checkpointing(vecs, num_checkpoints=None)] == [[1], [1, 1], [2]]


def test_unique_restore_does_not_reread_the_input():
    calls = []
    ds = Dataset.range(10_000).map(lambda x: calls.append(1) or x % 50).unique()
    it = iter(ds)
    for _ in range(30):
        next(it)
    state = it.get_state()
    calls.clear()
    restored = iter(ds)
    restored.set_state(state)
    assert [int(x) for x in restored] == list(range(30, 50))
    assert len(calls) == 10_000 - 30  # only the elements after the restored position


def test_experimental_function_forms():
    assert [int(x) for x in Dataset.range(5).apply(tpsd.experimental.take_while(lambda x: x < 3))] == [0, 1, 2]
    assert [int(x) for x in Dataset.from_tensor_slices([3, 3, 1]).apply(tpsd.experimental.unique())] == [3, 1]
