"""assert_cardinality, pad_to_cardinality, map_and_batch, parallel_interleave, enumerate_dataset (TF's tests)."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.errors import FailedPreconditionError
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset
experimental = tpsd.experimental


def test_assert_cardinality_makes_an_unknown_length_known():
    ds = Dataset.range(10).filter(lambda x: True)
    assert ds.cardinality() == tpsd.UNKNOWN_CARDINALITY
    ds = ds.apply(experimental.assert_cardinality(10))
    assert ds.cardinality() == 10 and len(ds) == 10
    assert [int(x) for x in ds] == list(range(10))


@pytest.mark.parametrize(
    "num_elements,asserted,message",
    [
        (10, 20, "Input dataset was expected to contain 20 elements but contained only 10 elements."),
        (1, 20, "Input dataset was expected to contain 20 elements but contained only 1 element."),
        (10, tpsd.INFINITE_CARDINALITY, "Input dataset was expected to contain an infinite number of elements but contained only 10 elements."),
        (1, tpsd.INFINITE_CARDINALITY, "Input dataset was expected to contain an infinite number of elements but contained only 1 element."),
        (10, 5, "Input dataset was expected to contain 5 elements but contained at least 6 elements."),
        (10, 1, "Input dataset was expected to contain 1 element but contained at least 2 elements."),
    ],
)
def test_assert_cardinality_mismatch_is_tensorflows_failed_precondition(num_elements, asserted, message):
    ds = Dataset.range(num_elements).apply(experimental.assert_cardinality(asserted))
    with pytest.raises(FailedPreconditionError, match=message):
        list(ds)


def test_assert_cardinality_method_and_checkpoint_at_every_position():
    ds = Dataset.range(200).assert_cardinality(200)
    assert len(assert_iterator_checkpointing(ds, num_checkpoints=None)) == 200


def test_assert_cardinality_argument_is_checked():
    with pytest.raises(ValueError, match="expected_cardinality must be >= 0 or INFINITE_CARDINALITY"):
        Dataset.range(3).assert_cardinality(-5)
    assert Dataset.range(3).assert_cardinality(np.int64(3)).cardinality() == 3


def test_pad_to_cardinality_adds_masked_zero_elements():
    ds = Dataset.from_tensor_slices({"a": [1, 2, 3, 4, 5]}).apply(experimental.pad_to_cardinality(12))
    got = [(int(e["a"]), bool(e["valid"])) for e in ds]
    assert got == [(v, True) for v in [1, 2, 3, 4, 5]] + [(0, False)] * 7
    assert ds.cardinality() == 12


def test_pad_to_cardinality_without_padding_only_marks():
    ds = Dataset.from_tensor_slices({"a": [1, 2, 3, 4, 5]}).apply(experimental.pad_to_cardinality(5))
    assert [(int(e["a"]), bool(e["valid"])) for e in ds] == [(v, True) for v in [1, 2, 3, 4, 5]]


def test_pad_to_cardinality_of_nested_dict_elements_with_strings():
    data = {"a": [1, 2, 3, 4, 5], "b": ([b"a", b"b", b"c", b"d", b"e"], [-1, -2, -3, -4, -5])}
    ds = Dataset.from_tensor_slices(data).apply(experimental.pad_to_cardinality(12))
    got = [(int(e["a"]), (e["b"][0], int(e["b"][1])), bool(e["valid"])) for e in ds]
    expected = [(data["a"][i], (data["b"][0][i], data["b"][1][i]), True) for i in range(5)]
    assert got == expected + [(0, (b"", 0), False)] * 7


@pytest.mark.parametrize("ds,card", [
    (Dataset.from_tensors({"a": 1}).filter(lambda x: True), -2),
    (Dataset.from_tensors({"a": 1}).repeat(), -1),
])
def test_pad_to_cardinality_needs_a_known_cardinality(ds, card):
    with pytest.raises(ValueError, match=f"must have a known cardinalty, but has cardinality {card}"):
        ds.apply(experimental.pad_to_cardinality(5))


def test_pad_to_cardinality_needs_dict_elements_and_a_large_enough_target():
    with pytest.raises(ValueError, match="`pad_to_cardinality` requires its input dataset to be a dictionary"):
        Dataset.from_tensors(1).apply(experimental.pad_to_cardinality(5))
    with pytest.raises(ValueError, match=r"cardinalty less than the target cardinality \(3\), but has cardinality 5"):
        Dataset.from_tensors({"a": 1}).repeat(5).apply(experimental.pad_to_cardinality(3))


def test_map_and_batch_is_map_then_batch():
    ds = Dataset.range(10).apply(experimental.map_and_batch(lambda x: x * 2, 4, drop_remainder=True))
    assert [b.tolist() for b in ds] == [[0, 2, 4, 6], [8, 10, 12, 14]]
    ds = Dataset.range(5).apply(experimental.map_and_batch(lambda x: x + 1, 2, num_parallel_batches=2))
    assert [b.tolist() for b in ds] == [[1, 2], [3, 4], [5]]
    with pytest.raises(ValueError, match="`num_parallel_batches` and `num_parallel_calls` are mutually exclusive"):
        experimental.map_and_batch(lambda x: x, 2, num_parallel_batches=1, num_parallel_calls=2)


def test_parallel_interleave_cycles_blocks_in_order():
    ds = Dataset.range(1, 4).apply(experimental.parallel_interleave(lambda x: Dataset.from_tensors(x).repeat(4), cycle_length=2, block_length=2))
    assert [int(x) for x in ds] == [1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3]
    sloppy = Dataset.range(1, 4).apply(experimental.parallel_interleave(lambda x: Dataset.from_tensors(x).repeat(2), cycle_length=3, sloppy=True))
    assert sorted(int(x) for x in sloppy) == [1, 1, 2, 2, 3, 3]


def test_enumerate_dataset_pairs_indices_from_start():
    ds = Dataset.from_tensor_slices([b"a", b"b"]).apply(experimental.enumerate_dataset(start=5))
    assert [(int(i), s) for i, s in ds] == [(5, b"a"), (6, b"b")]
