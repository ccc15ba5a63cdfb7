"""`Dataset.window`: TensorFlow's window_test.py cases, checkpoints, cardinality and auto-sharding."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset

COMPONENTS = (
    np.arange(7),
    np.array([[1, 2, 3]]) * np.arange(7)[:, np.newaxis],
    np.array(37.0) * np.arange(7),
)

CASES = [
    (20, size, shift, stride, drop)
    for size in (10, 14, 17)
    for shift in (7, 14)
    for stride in (1, 2, 6)
    for drop in (True, False)
] + [(count, 10, 4, 1, drop) for count in (0, 1) for drop in (True, False)]


@pytest.mark.parametrize("count,size,shift,stride,drop_remainder", CASES)
def test_windows_slide_over_squared_components_as_tensorflow_counts_them(count, size, shift, stride, drop_remainder):
    ds = (
        Dataset.from_tensor_slices(COMPONENTS)
        .map(lambda x, y, z: (x * x, y * y, z * z))
        .repeat(count)
        .window(size=size, shift=shift, stride=stride, drop_remainder=drop_remainder)
        .flat_map(lambda x, y, z: Dataset.zip((x.batch(size), y.batch(size), z.batch(size))))
    )
    assert [s.shape for s in ds.element_spec] == [(None, *c.shape[1:]) for c in COMPONENTS]
    got = list(ds)
    n = count * 7
    num_full = max(0, (n - ((size - 1) * stride + 1)) // shift + 1)
    expected_count = num_full if drop_remainder else n // shift + (n % shift > 0)
    assert len(got) == expected_count
    for i, result in enumerate(got):
        remaining = n - i * shift
        length = size if i < num_full else remaining // stride + (remaining % stride > 0)
        for component, part in zip(COMPONENTS, result):
            assert len(part) == length
            for j in range(length):
                np.testing.assert_array_equal(part[j], component[(i * shift + j * stride) % 7] ** 2)


@pytest.mark.parametrize("count,size,shift,stride,drop_remainder", CASES[:8] + CASES[-4:])
def test_cardinality_is_the_number_of_windows_produced(count, size, shift, stride, drop_remainder):
    ds = Dataset.range(7 * count).window(size, shift, stride, drop_remainder)
    assert ds.cardinality() == sum(1 for _ in ds)


def test_cardinality_of_infinite_and_unknown_inputs_is_kept():
    assert Dataset.range(3).repeat().window(2).cardinality() == tpsd.INFINITE_CARDINALITY
    assert Dataset.range(3).filter(lambda x: x > 0).window(2).cardinality() == tpsd.UNKNOWN_CARDINALITY


@pytest.mark.parametrize("size,shift,stride,arg", [(0, 3, 1, "size"), (3, 0, 1, "shift"), (3, 3, 0, "stride")])
def test_non_positive_sizes_name_the_argument(size, shift, stride, arg):
    with pytest.raises(ValueError, match=rf"Dataset.window: {arg} must be greater than zero; received {arg}=0"):
        Dataset.range(10).window(size=size, shift=shift, stride=stride)


def test_a_float_size_is_a_type_error_naming_the_argument():
    with pytest.raises(TypeError, match=r"Dataset.window: size must be an int .*received float: 2.5"):
        Dataset.range(10).window(2.5)


def test_sizes_may_be_numpy_integers_and_zero_d_arrays():
    ds = Dataset.range(6).window(np.int64(3), shift=np.array(2), stride=np.int32(1), drop_remainder=np.bool_(True))
    assert [list(map(int, w)) for w in ds] == [[0, 1, 2], [2, 3, 4]]


def test_windows_of_tuples_and_dicts_nest_like_the_elements():
    a, b = next(iter(Dataset.from_tensor_slices(([1, 2], [3, 4])).window(2)))
    assert isinstance(a, Dataset) and isinstance(b, Dataset)
    assert [int(x) for x in a] == [1, 2] and [int(x) for x in b] == [3, 4]
    w = next(iter(Dataset.from_tensor_slices({"a": [1, 2]}).window(2)))
    assert list(w) == ["a"] and [int(x) for x in w["a"]] == [1, 2]


def test_element_spec_is_a_nest_of_dataset_specs_of_the_input_spec():
    ds = Dataset.zip((Dataset.range(4), Dataset.from_tensor_slices(np.zeros((4, 3), np.float32)))).window(2)
    x, y = ds.element_spec
    assert x.element_spec == tpsd.TensorSpec((), np.int64)
    assert y.element_spec == tpsd.TensorSpec((3,), np.float32)
    inner = next(iter(ds))[1]
    assert inner.element_spec == tpsd.TensorSpec((3,), np.float32) and inner.cardinality() == 2


def test_shapes_that_differ_inside_a_window_fail_at_the_batch_with_tensorflows_message():
    def gen():
        yield [1.0, 2.0, 3.0]
        yield [4.0, 5.0, 6.0]
        yield [7.0, 8.0, 9.0, 10.0]

    ds = Dataset.from_generator(gen, np.float32, output_shapes=[None]).window(size=3, shift=1)
    ds = ds.flat_map(lambda x: x.batch(batch_size=3))
    with pytest.raises(ValueError, match=r"First element had shape \[3\] and element 2 had shape \[4\]"):
        list(ds)


def test_an_error_in_an_element_the_stride_skips_does_not_fail_the_window():
    def check_numerics(x):
        if np.isnan(x):
            raise ValueError("message: Tensor had NaN values")
        return x

    values = np.float32([1.0, np.nan, 2.0, np.nan, 3.0])
    ds = Dataset.from_tensor_slices(values).map(check_numerics)
    ds = ds.window(size=2, shift=2, stride=2, drop_remainder=True).flat_map(lambda x: x.batch(batch_size=2))
    assert [b.tolist() for b in ds] == [[1.0, 2.0], [2.0, 3.0]]


def test_an_error_in_an_element_inside_a_window_is_raised():
    ds = Dataset.range(4).map(lambda x: 1 // 0 if x == 1 else x).window(2)
    with pytest.raises(ZeroDivisionError):
        [list(w) for w in ds]


def test_zip_of_ranges_gives_pairs_of_window_datasets():
    ds = Dataset.zip((Dataset.range(100), Dataset.range(100))).window(10)
    windows = list(ds)
    assert len(windows) == 10
    for i, (x, y) in enumerate(windows):
        assert [int(v) for v in x] == list(range(i * 10, (i + 1) * 10))
        assert [int(v) for v in y] == list(range(i * 10, (i + 1) * 10))


def test_drop_remainder_keeps_only_full_windows():
    ds = Dataset.range(100).window(30, drop_remainder=True).flat_map(lambda x: x.batch(30)).batch(4)
    (only,) = list(ds)
    assert only.tolist() == [[y + 30 * x for y in range(30)] for x in range(3)]


def test_name_is_accepted():
    assert [int(x) for x in Dataset.from_tensors(42).window(1, name="window").flat_map(lambda x: x)] == [42]


def test_a_window_dataset_can_be_iterated_twice_and_taken_from():
    w = next(iter(Dataset.range(5).window(5)))
    assert [int(x) for x in w] == [0, 1, 2, 3, 4]
    assert [int(x) for x in w.skip(1).take(2)] == [1, 2]
    assert w.cardinality() == 5


def test_checkpoint_at_every_position_of_tensorflows_window_interleave_pipeline():
    ds = Dataset.range(42).window(6).interleave(lambda x: x, cycle_length=2, num_parallel_calls=2)
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert len(out) == 42 and sorted(int(x) for x in out) == list(range(42))


@pytest.mark.parametrize("size,shift,stride,drop", [(4, 1, 1, False), (3, 5, 2, False), (5, 2, 3, True), (2, 2, 1, True)])
def test_checkpoint_at_every_position_with_overlapping_and_gapped_windows(size, shift, stride, drop):
    ds = Dataset.range(30).window(size, shift, stride, drop).flat_map(lambda w: w.batch(size))
    assert_iterator_checkpointing(ds, num_checkpoints=None)


def test_a_restored_iterator_rereads_at_most_one_window_span():
    calls = []

    def count(x):
        calls.append(int(x))
        return x

    ds = Dataset.range(10_000).map(count).window(8, shift=2).flat_map(lambda w: w.batch(8))
    it = iter(ds)
    for _ in range(3000):
        next(it)
    state = it.get_state()
    expected = next(it)
    calls.clear()
    restored = iter(ds)
    restored.set_state(state)
    np.testing.assert_array_equal(next(restored), expected)
    # flat_map re-opens the window it was in (start 5998), then the next one ends at 6007:
    # one span and one shift, not the 6000 elements before them.
    assert calls == list(range(5998, 6008))


def test_file_sharding_walks_through_window(tmp_path):
    paths = []
    for k in range(4):
        path = str(tmp_path / f"f{k}.tfrecord")
        with tpsd.TFRecordWriter(path) as w:
            for j in range(4):
                w.write(f"{k}{j}".encode())
        paths.append(path)
    ds = tpsd.TFRecordDataset(paths).window(2).flat_map(lambda w: w.batch(2))
    options = tpsd.Options()
    options.experimental_distribute.auto_shard_policy = tpsd.AutoShardPolicy.FILE
    ds = ds.with_options(options)
    worker1 = [b.tolist() for b in tpsd.experimental.auto_shard_dataset(ds, 2, 1)]
    assert worker1 == [[b"10", b"11"], [b"12", b"13"], [b"30", b"31"], [b"32", b"33"]]


@pytest.mark.devices(4)
def test_windows_batched_after_flat_map_split_across_replicas():
    import tpustrategy as tps

    strategy = tps.MirroredStrategy([f"/cpu:{i}" for i in range(4)])
    ds = Dataset.range(32).window(4, shift=4).flat_map(lambda w: w.batch(4)).batch(4)
    dist = strategy.experimental_distribute_dataset(ds)
    rows = [np.asarray(part).tolist() for step in dist for part in strategy.experimental_local_results(step)]
    assert rows == [[[4 * i + j for j in range(4)]] for i in range(8)]
