"""`group_by_window` and `group_by_reducer`: TensorFlow's group_by_window / group_by_reducer tests."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset
Reducer = tpsd.experimental.Reducer


def _fill(v):
    return v, np.full([int(v)], v, np.int64), np.array([str(int(v)).encode()] * 3, dtype=object)


def _dynamic_pad(bucket, window):
    return Dataset.zip((Dataset.from_tensors(bucket), window.padded_batch(32, ((), (None,), (3,)))))


def test_single_bucket_pads_every_component():
    ds = Dataset.range(32).map(_fill).group_by_window(
        key_func=lambda x, y, z: 0, reduce_func=_dynamic_pad, window_size=32
    )
    (which, (scalars, unk, vec3)), = list(ds)
    assert int(which) == 0 and np.asarray(which).dtype == np.int64
    np.testing.assert_array_equal(scalars, np.arange(32))
    expected = np.zeros((32, 31), np.int64)
    for i in range(32):
        expected[i, :i] = i
    np.testing.assert_array_equal(unk, expected)
    assert vec3.tolist() == [[str(i).encode()] * 3 for i in range(32)]


def test_even_and_odd_buckets():
    ds = Dataset.range(64).map(_fill).group_by_window(
        key_func=lambda x, y, z: x % 2, reduce_func=_dynamic_pad, window_size=32
    )
    (even_key, even), (odd_key, odd) = list(ds)
    assert (int(even_key), int(odd_key)) == (0, 1)
    np.testing.assert_array_equal(even[0], np.arange(0, 64, 2))
    np.testing.assert_array_equal(odd[0], np.arange(1, 65, 2))
    assert even[1].shape == (32, 62) and odd[1].shape == (32, 63)
    for i in range(32):
        assert even[1][i].tolist() == [2 * i] * (2 * i) + [0] * (62 - 2 * i)
        assert odd[1][i].tolist() == [2 * i + 1] * (2 * i + 1) + [0] * (62 - 2 * i)


def test_dict_elements_with_every_odd_filtered_out():
    ds = Dataset.range(128).map(lambda v: dict(zip("xyz", _fill(v)))).filter(lambda d: d["x"] % 2 == 0)
    ds = ds.group_by_window(
        key_func=lambda d: d["x"] % 2,
        reduce_func=lambda k, w: Dataset.zip((Dataset.from_tensors(k), w.padded_batch(32, {"x": (), "y": (None,), "z": (3,)}))),
        window_size=32,
    )
    (k0, b0), (k1, b1) = list(ds)
    assert (int(k0), int(k1)) == (0, 0)
    np.testing.assert_array_equal(b0["x"], np.arange(0, 64, 2))
    np.testing.assert_array_equal(b1["x"], np.arange(64, 128, 2))


def test_window_size_func_gives_each_key_its_own_window():
    ds = Dataset.from_tensor_slices(np.arange(100, dtype=np.int64)).group_by_window(
        key_func=lambda x: x % 2,
        reduce_func=lambda _, xs: xs.batch(20),
        window_size=None,
        window_size_func=lambda key: np.array([5, 10], np.int64)[key],
    )
    batches = list(ds)
    assert len(batches) == 15
    for b in batches:
        assert b.shape[0] == (5 if b[0] % 2 == 0 else 10) and len({int(x) % 2 for x in b}) == 1


def test_random_values_are_all_grouped_with_full_batches_first():
    components = np.random.default_rng(0).integers(100, size=200).astype(np.int64)
    ds = Dataset.from_tensor_slices(components).map(lambda x: x * x)
    ds = ds.group_by_window(key_func=lambda x: x % 2, reduce_func=lambda _, xs: xs.batch(4), window_size=4)
    counts = []
    for b in ds:
        assert len({int(x) % 2 for x in b}) == 1
        counts.append(len(b))
    assert sum(counts) == 200
    full = len([c for c in counts if c == 4])
    assert full >= 24 and all(c == 4 for c in counts[:full])


def test_immediate_output_from_an_infinite_input():
    components = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0, 2, 2, 0, 0], dtype=np.int64)
    ds = Dataset.from_tensor_slices(components).repeat(-1)
    ds = ds.group_by_window(key_func=lambda x: x % 3, reduce_func=lambda _, xs: xs.batch(4), window_size=4)
    it = iter(ds)
    for _ in range(3):
        assert [next(it).tolist() for _ in range(4)] == [[0] * 4, [1] * 4, [2] * 4, [0] * 4]
    assert ds.cardinality() == tpsd.INFINITE_CARDINALITY


def test_small_groups_at_the_end_come_in_key_order():
    components = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0], dtype=np.int64)
    ds = Dataset.from_tensor_slices(components).group_by_window(
        key_func=lambda x: x % 2, reduce_func=lambda _, xs: xs.batch(4), window_size=4
    )
    assert [b.tolist() for b in ds] == [[0, 0, 0, 0], [1, 1, 1, 1], [0, 0, 0], [1]]
    assert ds.cardinality() == tpsd.UNKNOWN_CARDINALITY


def test_window_size_zero_is_tensorflows_message():
    with pytest.raises(ValueError, match="Window size must be greater than zero, but got 0."):
        Dataset.range(4).group_by_window(key_func=lambda _: 0, reduce_func=lambda _, xs: xs, window_size=0)


def test_window_size_func_returning_zero_fails_while_iterating():
    ds = Dataset.range(4).group_by_window(key_func=lambda _: 0, reduce_func=lambda _, xs: xs, window_size_func=lambda k: 0)
    with pytest.raises(ValueError, match="Window size must be greater than zero, but got 0"):
        list(ds)


def test_exactly_one_of_window_size_and_window_size_func():
    with pytest.raises(ValueError, match="either the `window_size` argument or the `window_size_func` argument"):
        Dataset.range(4).group_by_window(key_func=lambda _: 0, reduce_func=lambda _, xs: xs)


@pytest.mark.parametrize("bad", [lambda x: "wrong", lambda x: np.int64([0, 0]), lambda x: 1.5])
def test_a_key_that_is_not_one_integer_is_tensorflows_message(bad):
    ds = Dataset.range(4).group_by_window(key_func=bad, reduce_func=lambda _, xs: xs, window_size=2)
    with pytest.raises(ValueError, match="`key_func` must return a single tf.int64 tensor"):
        list(ds)


def test_reduce_func_errors_reach_the_caller():
    def reduce_func(_, xs):
        return xs.padded_batch(4, padded_shapes=((), (0,)))  # smaller than the elements: fails only when run

    ds = Dataset.range(1, 20).map(lambda x: (x, np.array([x * x]))).group_by_window(
        key_func=lambda x, _: x % 2, reduce_func=reduce_func, window_size=32
    )
    with pytest.raises(ValueError, match="attempted to pad to a smaller size than the input element"):
        list(ds)


def test_reduce_func_must_return_a_dataset():
    ds = Dataset.range(4).group_by_window(key_func=lambda x: x, reduce_func=lambda k, w: 3, window_size=1)
    with pytest.raises(TypeError, match="`reduce_func` must return a `Dataset` object"):
        list(ds)


def test_a_window_dataset_can_be_consumed_twice():
    components = np.random.default_rng(1).integers(50, size=200).astype(np.int64)

    def reduce_func(key, window):
        return Dataset.zip((window.padded_batch(4, padded_shapes=(None,)), window.padded_batch(4, padded_shapes=((int(key) + 1) * 10,))))

    ds = Dataset.from_tensor_slices(components).map(lambda x: np.full([int(x)], x))
    ds = ds.group_by_window(key_func=lambda x: np.int64(x.shape[0] // 10), reduce_func=reduce_func, window_size=4)
    counts = []
    for tight, tens in ds:
        assert tens.shape[1] % 10 == 0
        np.testing.assert_array_equal(tight, tens[:, : tight.shape[1]])
        counts.append(tight.shape[0])
    assert sum(counts) == 200


def test_window_size_one_short_circuits():
    ds = Dataset.range(10).group_by_window(key_func=lambda x: x, reduce_func=lambda _, w: w.batch(1), window_size=1)
    assert [b.tolist() for b in ds] == [[i] for i in range(10)]


def test_reduce_func_sees_the_key_and_a_parallel_map_downstream_works():
    ds = Dataset.range(1000).group_by_window(
        key_func=lambda x: x // 10, reduce_func=lambda key, window: Dataset.from_tensors(key), window_size=4
    ).map(lambda x: x + 1, num_parallel_calls=-1)
    assert [int(x) for x in ds.take(5)] == [1, 1, 2, 2, 3]  # 10 per key: two full windows of 4 each, then the next key


def test_infinite_input_gives_infinite_cardinality_and_the_name_is_accepted():
    ds = Dataset.range(1).repeat().group_by_window(key_func=lambda x: x % 2, reduce_func=lambda k, w: Dataset.from_tensors(k), window_size=4)
    assert ds.cardinality() == tpsd.INFINITE_CARDINALITY
    one = Dataset.from_tensors(np.int64(42)).group_by_window(lambda x: x, lambda k, w: w.batch(4), window_size=4, name="g")
    assert [b.tolist() for b in one] == [[42]]


def test_element_spec_comes_from_the_reduced_dataset():
    ds = Dataset.range(10).group_by_window(lambda x: x % 2, lambda k, w: w.batch(4), window_size=4)
    assert ds.element_spec == tpsd.TensorSpec((None,), np.int64)


def test_checkpoint_at_every_position_with_open_windows():
    components = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0, 2, 2, 0, 0], dtype=np.int64)
    ds = Dataset.from_tensor_slices(components).repeat(-1)
    ds = ds.group_by_window(key_func=lambda x: x % 3, reduce_func=lambda _, xs: xs.batch(4), window_size=4)
    assert_iterator_checkpointing(ds, max_elements=12, num_checkpoints=None)


def test_checkpoint_inside_a_flushing_group_and_with_tuple_elements():
    ds = Dataset.zip((Dataset.range(40), Dataset.from_tensor_slices([f"s{i}" for i in range(40)])))
    ds = ds.group_by_window(key_func=lambda x, s: x % 3, reduce_func=lambda k, w: w.batch(2), window_size=5)
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert sum(len(b[0]) for b in out) == 40


def test_restore_cost_is_bounded_by_the_open_groups():
    calls = []
    ds = Dataset.range(50_000).map(lambda x: calls.append(1) or x).group_by_window(
        key_func=lambda x: x % 4, reduce_func=lambda _, w: w.batch(8), window_size=8
    )
    it = iter(ds)
    for _ in range(3000):
        next(it)
    state = it.get_state()
    expected = next(it)
    calls.clear()
    restored = iter(ds)
    restored.set_state(state)
    np.testing.assert_array_equal(next(restored), expected)
    assert len(calls) <= 32


def test_file_sharding_walks_through_group_by_window(tmp_path):
    paths = []
    for k in range(2):
        paths.append(str(tmp_path / f"f{k}.tfrecord"))
        with tpsd.TFRecordWriter(paths[-1]) as w:
            for j in range(4):
                w.write(f"{k}{j}".encode())
    ds = tpsd.TFRecordDataset(paths).group_by_window(lambda r: int(r[-1:]) % 2, lambda k, w: w.batch(2), window_size=2)
    options = tpsd.Options()
    options.experimental_distribute.auto_shard_policy = tpsd.AutoShardPolicy.FILE
    got = [b.tolist() for b in tpsd.experimental.auto_shard_dataset(ds.with_options(options), 2, 1)]
    assert got == [[b"10", b"12"], [b"11", b"13"]]


@pytest.mark.parametrize("i", range(1, 11))
def test_group_by_reducer_sum(i):
    reducer = Reducer(init_func=lambda _: np.int64(0), reduce_func=lambda x, y: x + y, finalize_func=lambda x: x)
    ds = Dataset.range(2 * i).apply(tpsd.experimental.group_by_reducer(lambda x: x % 2, reducer))
    assert [int(x) for x in ds] == [(i - 1) * i, i * i]


@pytest.mark.parametrize("i", [1, 4, 10])
def test_group_by_reducer_average_with_a_tuple_state(i):
    def reduce_fn(x, y):
        return (x[0] * x[1] + np.float32(y)) / (x[1] + 1), x[1] + np.float32(1)

    reducer = Reducer(init_func=lambda _: (0.0, 0.0), reduce_func=reduce_fn, finalize_func=lambda x, _: x)
    ds = Dataset.range(2 * i).apply(tpsd.experimental.group_by_reducer(lambda x: x % 2, reducer))
    assert [float(x) for x in ds] == [i - 1, i]


@pytest.mark.parametrize("i", [1, 5, 10])
def test_group_by_reducer_concatenates_strings(i):
    chars = list("abcdefghijklmnopqrst")
    reducer = Reducer(init_func=lambda x: b"", reduce_func=lambda x, y: x + y[0], finalize_func=lambda x: x)
    ds = Dataset.zip((Dataset.from_tensor_slices(chars), Dataset.range(2 * i)))
    ds = ds.apply(tpsd.experimental.group_by_reducer(lambda x, y: y % 2, reducer))
    assert list(ds) == [b"acegikmoqs"[:i], b"bdfhjlnprt"[:i]]


def test_group_by_reducer_state_shapes_may_change():
    reducer = Reducer(
        init_func=lambda x: ([0], 1),
        reduce_func=lambda x, _: (np.concatenate([x[0], x[0]]), np.expand_dims(x[1], 0)),
        finalize_func=lambda x, y: (x, y),
    )
    for i in (1, 3, 6):
        ds = Dataset.from_tensors(np.int64(0)).repeat(i).apply(tpsd.experimental.group_by_reducer(lambda x: x, reducer))
        ((x, y),) = list(ds)
        assert x.tolist() == [0] * 2**i
        np.testing.assert_array_equal(y, np.array(1, ndmin=i))


def test_group_by_reducer_state_type_mismatch_is_tensorflows_message():
    reducer = Reducer(init_func=lambda x: np.int32(1), reduce_func=lambda x, y: np.int64(1), finalize_func=lambda x: x)
    with pytest.raises(TypeError, match="the element types for the new state must match the initial state"):
        Dataset.range(10).apply(tpsd.experimental.group_by_reducer(lambda _: np.int64(0), reducer))


@pytest.mark.parametrize("key", [lambda _: np.int64((0, 0)), lambda _: "wrong"])
def test_group_by_reducer_invalid_keys_are_tensorflows_message(key):
    reducer = Reducer(init_func=lambda x: np.int64(0), reduce_func=lambda x, y: x + y, finalize_func=lambda x: x)
    with pytest.raises(ValueError, match="`key_func` must return a single tf.int64 tensor"):
        Dataset.range(10).apply(tpsd.experimental.group_by_reducer(key, reducer))


def test_group_by_reducer_tuple_elements_and_state():
    reducer = Reducer(
        init_func=lambda _: (np.array([], dtype=np.int64), np.int64(0)),
        reduce_func=lambda s, v: (np.concatenate([s[0], [v[0]]]), s[1] + v[1]),
        finalize_func=lambda s1, s2: (s1, s2),
    )
    ds = Dataset.zip((Dataset.range(10), Dataset.range(10))).apply(tpsd.experimental.group_by_reducer(lambda x, y: np.int64(0), reducer))
    ((x, y),) = list(ds)
    assert x.tolist() == list(range(10)) and int(y) == 45


def test_group_by_reducer_checkpoint_at_every_position():
    reducer = Reducer(init_func=lambda _: np.int64(0), reduce_func=lambda x, y: x + y, finalize_func=lambda x: x)
    ds = Dataset.range(30).apply(tpsd.experimental.group_by_reducer(lambda x: x % 4, reducer))
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert [int(x) for x in out] == [sum(range(k, 30, 4)) for k in range(4)]


def test_reducer_functions_must_be_callable():
    with pytest.raises(TypeError, match="Reducer: `finalize_func` must be callable"):
        Reducer(lambda k: 0, lambda s, x: s, None)
