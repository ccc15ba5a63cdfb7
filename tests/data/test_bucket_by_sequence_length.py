"""`bucket_by_sequence_length`: TensorFlow's bucket_by_sequence_length_test.py cases."""

from __future__ import annotations

import random

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset

BOUNDARIES = [10, 20, 30]
BATCH_SIZES = [10, 8, 4, 2]
LENGTHS = [8, 13, 25, 35]


def _records(make_elements, seed=0):
    def gen():
        elements = make_elements()
        random.Random(seed).shuffle(elements)
        for el in elements:
            yield (el,)

    return Dataset.from_generator(gen, (np.int32,), ((None,),))


def _length(x, y=None):
    return x.shape[0]


@pytest.mark.parametrize("no_padding", [True, False])
def test_drop_remainder_keeps_full_batches_of_each_bucket(no_padding):
    n_bucket_elements = [28, 7, 6, 5]

    def make():
        return [[1] * length for n, length in zip(n_bucket_elements, LENGTHS) for _ in range(n)]

    ds = _records(make).bucket_by_sequence_length(
        element_length_func=_length, bucket_boundaries=BOUNDARIES, bucket_batch_sizes=BATCH_SIZES,
        no_padding=no_padding, drop_remainder=True,
    )
    batches = [b for (b,) in ds]
    assert len(batches) == 5
    sums = {length: 0 for length in LENGTHS}
    sizes = {length: [] for length in LENGTHS}
    for b in batches:
        sums[b.shape[1]] += int(b.sum())
        sizes[b.shape[1]].append(b.shape[0])
    for length, size, n in zip(LENGTHS, BATCH_SIZES, n_bucket_elements):
        assert sums[length] == (n - n % size) * length
        assert sizes[length] == [size] * (n // size)


@pytest.mark.parametrize("no_padding", [True, False])
def test_one_batch_per_bucket_padded_to_its_longest(no_padding):
    def make():
        out = []
        for size, length in zip(BATCH_SIZES, LENGTHS):
            out += [[1] * (length - 1)] + [[1] * length for _ in range(size - 1)]
        return out

    ds = _records(make).bucket_by_sequence_length(
        element_length_func=_length, bucket_boundaries=BOUNDARIES, bucket_batch_sizes=BATCH_SIZES, no_padding=no_padding
    )
    if no_padding:  # elements of different lengths cannot be batched without padding
        with pytest.raises(ValueError, match="cannot batch tensors with different shapes"):
            list(ds)
        return
    batches = [b for (b,) in ds]
    assert len(batches) == 4
    for b in batches:
        assert int(b.sum()) == b.shape[0] * b.shape[1] - 1
    assert sorted(b.shape[0] for b in batches) == sorted(BATCH_SIZES)
    assert sorted(b.shape[1] for b in batches) == sorted(LENGTHS)


def test_pad_to_bucket_boundary_pads_to_boundary_minus_one_and_rejects_the_last_bucket():
    def gen():
        elements = [[1] * length for size, length in zip(BATCH_SIZES[:-1], LENGTHS) for _ in range(size)]
        random.Random(3).shuffle(elements)
        for el in elements:
            yield (el,)
        for _ in range(BATCH_SIZES[-1]):
            yield ([1] * (BOUNDARIES[-1] + 5),)

    ds = Dataset.from_generator(gen, (np.int64,), ((None,),)).bucket_by_sequence_length(
        element_length_func=lambda el: el.shape[0], bucket_boundaries=BOUNDARIES, bucket_batch_sizes=BATCH_SIZES,
        pad_to_bucket_boundary=True,
    )
    it = iter(ds)
    batches = [next(it)[0] for _ in range(3)]
    with pytest.raises(ValueError, match="elements must have length < max\\(bucket_boundaries\\)"):
        next(it)
    assert sorted(b.shape[0] for b in batches) == sorted(BATCH_SIZES[:-1])
    assert sorted(b.shape[1] for b in batches) == [b - 1 for b in BOUNDARIES]


def test_pad_to_bucket_boundary_adds_no_extraneous_padding():
    def gen():
        for length in range(1, 11):
            yield ([1] * length,)

    ds = Dataset.from_generator(gen, (np.int64,), ((None,),)).bucket_by_sequence_length(
        element_length_func=lambda e: e.shape[0], bucket_boundaries=[3, 7, 11], bucket_batch_sizes=[2, 2, 2, 2],
        pad_to_bucket_boundary=True,
    )
    batches = [b.tolist() for (b,) in ds]
    assert batches == [
        [[1, 0], [1, 1]],
        [[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0]],
        [[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]],
        [[1, 1, 1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1, 0, 0]],
        [[1, 1, 1, 1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]],
    ]


def test_tuple_elements_have_tensorflows_batched_spec():
    def gen():
        yield from zip([[1, 2, 3], [3, 4, 5, 6, 7], [1, 2], [8, 9, 0, 2, 3]], [1, 2, 1, 2])

    ds = Dataset.from_generator(gen, (np.int32, np.int32), ((None,), ())).bucket_by_sequence_length(
        element_length_func=_length, bucket_batch_sizes=[2, 2, 2], bucket_boundaries=[0, 8]
    )
    text, label = ds.element_spec
    assert text.shape == (None, None) and label.shape == (None,)
    got = [(t.tolist(), lab.tolist()) for t, lab in ds]
    assert got == [([[1, 2, 3, 0, 0], [3, 4, 5, 6, 7]], [1, 2]), ([[1, 2, 0, 0, 0], [8, 9, 0, 2, 3]], [1, 2])]


def test_padded_shapes_and_padding_values_are_used():
    ds = Dataset.range(1, 7).map(lambda n: np.arange(int(n), dtype=np.int64) + 1)
    ds = ds.bucket_by_sequence_length(lambda x: x.shape[0], [4], [3, 3], padded_shapes=(8,), padding_values=np.int64(-1))
    assert [b.tolist() for b in ds] == [
        [[1, -1, -1, -1, -1, -1, -1, -1], [1, 2, -1, -1, -1, -1, -1, -1], [1, 2, 3, -1, -1, -1, -1, -1]],
        [[1, 2, 3, 4, -1, -1, -1, -1], [1, 2, 3, 4, 5, -1, -1, -1], [1, 2, 3, 4, 5, 6, -1, -1]],
    ]


def test_batch_sizes_must_be_one_more_than_the_boundaries():
    with pytest.raises(ValueError, match=r"`len\(bucket_batch_sizes\)` must equal `len\(bucket_boundaries\) \+ 1`"):
        Dataset.range(3).bucket_by_sequence_length(lambda x: 1, [1, 2], [4, 4])


def test_boundaries_must_increase_and_sizes_be_positive():
    with pytest.raises(ValueError, match="bucket_boundaries must be strictly increasing"):
        Dataset.range(3).bucket_by_sequence_length(lambda x: 1, [5, 2], [4, 4, 4])
    with pytest.raises(ValueError, match=r"bucket_batch_sizes\[1\] must be greater than zero"):
        Dataset.range(3).bucket_by_sequence_length(lambda x: 1, [5], [4, 0])


def test_length_that_is_not_an_integer_names_the_function():
    ds = Dataset.range(3).bucket_by_sequence_length(lambda x: 1.5, [5], [4, 4])
    with pytest.raises(TypeError, match="element_length_func's result must be an int"):
        list(ds)


def test_experimental_form_and_numpy_sizes():
    fn = tpsd.experimental.bucket_by_sequence_length(lambda x: x.shape[0], np.array([3]), [np.int64(2), np.int64(2)])
    ds = Dataset.range(1, 5).map(lambda n: np.ones(int(n), np.int32)).apply(fn)
    assert [b.shape for b in ds] == [(2, 2), (2, 4)]


def test_checkpoint_at_every_position_with_partly_filled_buckets():
    ds = Dataset.range(60).map(lambda n: np.full(int(n) % 7 + 1, n, np.int64))
    ds = ds.bucket_by_sequence_length(lambda x: x.shape[0], [3, 5], [4, 3, 2])
    out = assert_iterator_checkpointing(ds, num_checkpoints=None)
    assert sum(b.shape[0] for b in out) == 60


@pytest.mark.devices(2)
def test_buckets_distribute_as_global_batches():
    import tpustrategy as tps

    strategy = tps.MirroredStrategy([f"/cpu:{i}" for i in range(2)])
    ds = Dataset.range(16).map(lambda n: np.ones(int(n) % 4 + 1, np.int32)).bucket_by_sequence_length(
        lambda x: x.shape[0], [3], [4, 4], drop_remainder=True
    )
    dist = strategy.experimental_distribute_dataset(ds)
    rows = 0
    for step in dist:
        parts = [np.asarray(p) for p in strategy.experimental_local_results(step)]
        assert [p.shape[0] for p in parts] == [2, 2]
        rows += sum(p.shape[0] for p in parts)
    assert rows == 16
