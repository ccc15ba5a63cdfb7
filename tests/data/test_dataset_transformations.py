"""Tests of the per-element transformations against hand-computed and TensorFlow outputs."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy._src.data.core.structure import stack

Dataset = tpsd.Dataset
Pair = collections.namedtuple("Pair", ["a", "b"])


def values(ds):
    out = []
    for x in ds:
        if isinstance(x, tuple):
            out.append(tuple(v.tolist() if hasattr(v, "tolist") else v for v in x))
        else:
            out.append(x.tolist() if hasattr(x, "tolist") else x)
    return out


# ------------------------------------------------------------------- map


def test_map_unpacks_tuple_elements_into_positional_arguments():
    ds = Dataset.zip((Dataset.range(3), Dataset.range(3))).map(lambda a, b: a * 10 + b)
    assert values(ds) == [0, 11, 22]


def test_map_passes_namedtuples_and_dicts_whole():
    ds = Dataset.from_tensor_slices(Pair(np.arange(2), np.arange(2))).map(lambda p: p.a + p.b)
    assert values(ds) == [0, 2]
    ds = Dataset.from_tensor_slices({"x": np.arange(2)}).map(lambda d: d["x"] * 3)
    assert values(ds) == [0, 3]


def test_map_turns_a_returned_list_into_a_tuple():
    (out,) = list(Dataset.range(1).map(lambda x: [x, x + 1]))
    assert isinstance(out, tuple)


def test_map_element_spec_is_traced_with_unknown_dimensions_left_unknown():
    ds = Dataset.range(10).batch(4).map(lambda x: (x.astype(np.float32), x[:, None] * np.ones((1, 3))))
    assert ds.element_spec == (tpsd.TensorSpec((None,), np.float32), tpsd.TensorSpec((None, 3), np.float64))


def test_map_element_spec_falls_back_to_the_first_element_when_tracing_fails():
    def parse(s):
        return np.frombuffer(bytes.fromhex(s.decode()), np.uint8)

    ds = Dataset.from_tensor_slices(["0102", "0304"]).map(parse)
    assert ds.element_spec == tpsd.TensorSpec((2,), np.uint8)


@pytest.mark.parametrize("parallel", [None, 1, 3, tpsd.AUTOTUNE])
def test_map_keeps_the_input_order_with_any_parallelism(parallel):
    ds = Dataset.range(500).map(lambda x: x * 2, num_parallel_calls=parallel)
    assert values(ds) == [2 * i for i in range(500)]


def test_map_argument_errors_name_the_argument():
    with pytest.raises(TypeError, match="`map_func` must be callable"):
        Dataset.range(3).map(3)
    with pytest.raises(ValueError, match="num_parallel_calls must be positive or AUTOTUNE"):
        Dataset.range(3).map(lambda x: x, num_parallel_calls=0)
    with pytest.raises(TypeError, match="deterministic must be None or a bool"):
        Dataset.range(3).map(lambda x: x, deterministic="yes")


# ----------------------------------------------------------------- batch


def test_batch_keeps_a_short_last_batch_unless_drop_remainder():
    assert values(Dataset.range(7).batch(3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert values(Dataset.range(7).batch(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5]]
    assert values(Dataset.range(6).batch(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5]]


def test_batch_element_spec_has_a_static_batch_dimension_only_with_drop_remainder():
    assert Dataset.range(7).batch(3).element_spec == tpsd.TensorSpec((None,), np.int64)
    assert Dataset.range(7).batch(3, True).element_spec == tpsd.TensorSpec((3,), np.int64)


def test_batch_of_structures_stacks_each_component():
    ds = Dataset.from_tensor_slices({"x": np.arange(6).reshape(3, 2), "s": ["a", "b", "c"]}).batch(2)
    first = next(iter(ds))
    assert first["x"].shape == (2, 2) and first["s"].dtype == object


def test_batch_of_mismatched_shapes_names_the_element_and_both_shapes():
    ds = Dataset.range(4).map(lambda x: np.zeros(int(x) + 1)).batch(4)
    with pytest.raises(ValueError, match=r"First element had shape \[1\] and element 1 had shape \[2\]"):
        list(ds)


def test_batch_of_flat_tuples_and_dicts_stacks_by_component_and_names_the_component():
    # The common batch (a plain tuple or dict of arrays / bytes) and its errors.
    gen = [(np.full((2,), i, np.int32), b"r%d" % i) for i in range(3)]
    x, s = next(iter(Dataset.from_generator(lambda: iter(gen)).batch(3)))
    assert x.dtype == np.int32 and x.tolist() == [[0, 0], [1, 1], [2, 2]] and s.tolist() == [b"r0", b"r1", b"r2"]
    # dicts whose keys come in another order batch by key, in the first element's order
    dicts = [{"a": np.array([1.0]), "b": np.array([i])} if i % 2 else {"b": np.array([i]), "a": np.array([1.0])}
             for i in range(4)]
    out = stack(dicts, "batch")
    assert list(out) == ["b", "a"] and out["b"].tolist() == [[0], [1], [2], [3]] and out["a"].shape == (4, 1)
    with pytest.raises(ValueError, match=r"in component \['a'\]. First element had shape \[1\] and element 2"):
        stack(dicts[:2] + [{"a": np.zeros(2), "b": np.array([0])}], "batch")
    with pytest.raises(ValueError, match=r"in component \[0\]. First element had shape \[2\] and element 1"):
        stack([gen[0], (np.zeros(3, np.int32), b"x")], "batch")
    # a nested or missing component is a structure error, not a stacking one
    with pytest.raises(ValueError, match="element 1 has a different structure"):
        stack([gen[0], ((np.zeros(2), np.zeros(2)), b"x")], "batch")
    with pytest.raises(ValueError, match="element 1 has a different structure"):
        stack([dicts[0], {"a": np.array([1.0])}], "batch")


def test_batch_of_mixed_types_names_the_types():
    ds = Dataset.from_generator(lambda: iter([b"a", np.int64(1)])).batch(2)
    with pytest.raises(TypeError, match="different types"):
        list(ds)


def test_batch_argument_errors():
    with pytest.raises(ValueError, match="batch_size must be greater than zero; received batch_size=0"):
        Dataset.range(3).batch(0)
    with pytest.raises(TypeError, match="batch_size must be an int"):
        Dataset.range(3).batch(2.0)
    with pytest.raises(TypeError, match="drop_remainder must be a bool"):
        Dataset.range(3).batch(2, drop_remainder=1)


def test_batch_with_num_parallel_calls_gives_the_same_batches():
    assert values(Dataset.range(10).batch(3, num_parallel_calls=2)) == values(Dataset.range(10).batch(3))


# ---------------------------------------------------------- padded_batch


def test_padded_batch_pads_every_dimension_to_the_batch_max_by_default():
    ds = Dataset.range(1, 5).map(lambda x: np.full(int(x), int(x))).padded_batch(2)
    assert values(ds) == [[[1, 0], [2, 2]], [[3, 3, 3, 0], [4, 4, 4, 4]]]
    assert ds.element_spec == tpsd.TensorSpec((None, None), np.int64)


def test_padded_batch_uses_padded_shapes_and_padding_values():
    ds = Dataset.range(1, 4).map(lambda x: np.full(int(x), int(x))).padded_batch(
        3, padded_shapes=(5,), padding_values=np.int64(-1), drop_remainder=True
    )
    assert values(ds) == [[[1, -1, -1, -1, -1], [2, 2, -1, -1, -1], [3, 3, 3, -1, -1]]]
    assert ds.element_spec == tpsd.TensorSpec((3, 5), np.int64)


def test_padded_batch_pads_strings_with_empty_bytes_and_structures_per_component():
    ds = Dataset.from_tensor_slices(["a", "b"]).map(lambda s: (np.array([s] * (len(s) + ord(s) - 96), dtype=object), s))
    batch = next(iter(ds.padded_batch(2)))
    assert batch[0].tolist() == [[b"a", b"a", b""], [b"b", b"b", b"b"]]
    assert batch[1].tolist() == [b"a", b"b"]


def test_padded_batch_to_a_smaller_shape_says_so():
    ds = Dataset.range(3).map(lambda x: np.zeros(int(x) + 2)).padded_batch(3, padded_shapes=[2])
    with pytest.raises(ValueError, match="attempted to pad to a smaller size than the input element"):
        list(ds)


# --------------------------------------------------------------- unbatch


def test_unbatch_splits_batches_back_into_elements():
    assert values(Dataset.range(7).batch(3).unbatch()) == list(range(7))
    ds = Dataset.from_tensors({"a": np.arange(4).reshape(2, 2), "b": np.array([b"x", b"y"], dtype=object)}).unbatch()
    out = list(ds)
    assert out[1]["a"].tolist() == [2, 3] and out[1]["b"] == b"y"
    assert ds.element_spec["a"] == tpsd.TensorSpec((2,), np.int64)


def test_unbatch_then_batch_rebatches_across_input_batches():
    assert values(Dataset.range(10).batch(4).unbatch().batch(3)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert values(Dataset.range(10).batch(4).rebatch(5)) == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]


def test_unbatch_of_scalars_is_rejected_with_the_spec():
    with pytest.raises(ValueError, match="only supported for rank >= 1"):
        Dataset.range(3).unbatch()


def test_unbatch_of_components_with_different_batch_sizes_names_them():
    ds = Dataset.from_tensors((np.arange(3), np.arange(2))).unbatch()
    with pytest.raises(ValueError, match=r"same leading dimension; received leading dimensions \[2, 3\]"):
        list(ds)


# ----------------------------------------------------------------- shard


def test_shard_takes_every_nth_element_starting_at_index_like_tensorflow():
    # Golden case shard_range10_AUTO_W3 (DATA sharding of range(10) over 3 workers).
    assert [values(Dataset.range(10).shard(3, i)) for i in range(3)] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


def test_shard_of_batches_shards_whole_batches():
    # Golden case shard_range10_batch3_DATA_W2.
    out = [values(Dataset.range(10).batch(3).shard(2, i)) for i in range(2)]
    assert out == [[[0, 1, 2], [6, 7, 8]], [[3, 4, 5], [9]]]


def test_shard_with_a_bad_index_uses_the_tensorflow_message():
    with pytest.raises(ValueError, match=r"index must be between 0 and 2 \(currently index = 3\)"):
        Dataset.range(10).shard(3, 3)
    with pytest.raises(ValueError, match=r"index must be between 0 and 1 \(currently index = -1\)"):
        Dataset.range(10).shard(2, -1)
    with pytest.raises(ValueError, match="num_shards must be greater than zero"):
        Dataset.range(10).shard(0, 0)


def test_shard_with_the_shard_hint_placeholder_passes_everything_through():
    ds = Dataset.range(5).shard(tpsd.SHARD_HINT, 0)
    assert values(ds) == [0, 1, 2, 3, 4]


def test_shard_then_batch_uses_the_bulk_path_correctly():
    assert values(Dataset.range(100).shard(7, 3).batch(4)) == [
        list(range(3, 100, 7))[i : i + 4] for i in range(0, 14, 4)
    ]


# ---------------------------------------------------------------- repeat


def test_repeat_count_and_forever():
    assert values(Dataset.range(3).repeat(2)) == [0, 1, 2, 0, 1, 2]
    assert values(Dataset.range(3).repeat(0)) == []
    assert values(Dataset.range(3).repeat().take(7)) == [0, 1, 2, 0, 1, 2, 0]
    assert values(Dataset.range(3).repeat(-1).take(4)) == [0, 1, 2, 0]


def test_repeat_forever_of_an_empty_dataset_ends():
    assert values(Dataset.range(0).repeat()) == []
    assert values(Dataset.range(5).filter(lambda x: False).repeat()) == []


def test_repeat_then_batch_crosses_epochs():
    assert values(Dataset.range(5).repeat(2).batch(4)) == [[0, 1, 2, 3], [4, 0, 1, 2], [3, 4]]


# ---------------------------------------------------------------- shuffle


def test_shuffle_with_a_seed_is_a_reproducible_permutation():
    a = values(Dataset.range(100).shuffle(100, seed=3, reshuffle_each_iteration=False))
    b = values(Dataset.range(100).shuffle(100, seed=3, reshuffle_each_iteration=False))
    assert a == b and sorted(a) == list(range(100)) and a != list(range(100))


def test_shuffle_with_a_buffer_of_one_keeps_the_order():
    assert values(Dataset.range(20).shuffle(1, seed=1)) == list(range(20))


def test_shuffle_only_draws_from_the_buffer():
    # An element can only move ahead of at most buffer_size - 1 later ones.
    out = values(Dataset.range(200).shuffle(4, seed=9))
    assert sorted(out) == list(range(200))
    for pos, x in enumerate(out):
        assert x <= pos + 3


def test_shuffle_reshuffles_each_epoch_under_repeat_by_default():
    epochs = np.array(values(Dataset.range(50).shuffle(50, seed=1).repeat(3))).reshape(3, 50)
    assert all(sorted(e) == list(range(50)) for e in epochs.tolist())
    assert epochs[0].tolist() != epochs[1].tolist() != epochs[2].tolist()


def test_shuffle_without_reshuffle_repeats_the_same_order_each_epoch():
    epochs = np.array(values(Dataset.range(50).shuffle(50, seed=1, reshuffle_each_iteration=False).repeat(3)))
    e = epochs.reshape(3, 50)
    assert e[0].tolist() == e[1].tolist() == e[2].tolist() != list(range(50))


def test_shuffle_reshuffles_across_separate_iterations_of_the_same_dataset():
    ds = Dataset.range(50).shuffle(50, seed=1)
    assert values(ds) != values(ds)
    fixed = Dataset.range(50).shuffle(50, reshuffle_each_iteration=False)
    assert values(fixed) == values(fixed)


def test_shuffle_argument_errors():
    with pytest.raises(ValueError, match="buffer_size must be >= 1; received buffer_size=0"):
        Dataset.range(3).shuffle(0)
    with pytest.raises(TypeError, match="reshuffle_each_iteration must be a bool"):
        Dataset.range(3).shuffle(2, reshuffle_each_iteration=None)


# ------------------------------------------------------------ take / skip


def test_take_and_skip_counts():
    assert values(Dataset.range(10).take(3)) == [0, 1, 2]
    assert values(Dataset.range(10).take(-1)) == list(range(10))
    assert values(Dataset.range(10).take(0)) == []
    assert values(Dataset.range(10).skip(7)) == [7, 8, 9]
    assert values(Dataset.range(10).skip(-1)) == []
    assert values(Dataset.range(10).skip(20)) == []


def test_take_and_skip_reject_counts_below_minus_one():
    with pytest.raises(ValueError, match="count must be >= -1; received count=-2"):
        Dataset.range(3).take(-2)
    with pytest.raises(TypeError, match="count must be an int"):
        Dataset.range(3).skip("1")


# ---------------------------------------------------------------- filter


def test_filter_keeps_matching_elements():
    assert values(Dataset.range(10).filter(lambda x: x % 3 == 0)) == [0, 3, 6, 9]
    assert values(Dataset.range(100).filter(lambda x: x > 97).batch(5)) == [[98, 99]]


def test_filter_requires_a_scalar_boolean():
    with pytest.raises(TypeError, match="must be convertible to a scalar boolean"):
        list(Dataset.range(3).filter(lambda x: x))
    with pytest.raises(TypeError, match="`predicate` must be callable"):
        Dataset.range(3).filter(None)


# ------------------------------------------------------ flat_map / interleave


def test_flat_map_concatenates_inner_datasets():
    assert values(Dataset.range(4).flat_map(lambda x: Dataset.range(x))) == [0, 0, 1, 0, 1, 2]


def test_flat_map_must_return_a_dataset():
    with pytest.raises(TypeError, match="must return a `Dataset` object"):
        list(Dataset.range(2).flat_map(lambda x: x))


TF_INTERLEAVE = [1, 1, 1, 1, 2, 2, 2, 2, 1, 1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 3, 3, 4, 4, 5, 5, 5, 5, 5, 5]


@pytest.mark.parametrize("parallel", [None, 2, tpsd.AUTOTUNE])
def test_interleave_matches_the_tensorflow_documented_order(parallel):
    ds = Dataset.range(1, 6).interleave(
        lambda x: Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4, num_parallel_calls=parallel
    )
    assert values(ds) == TF_INTERLEAVE


def test_interleave_with_block_length_one_round_robins():
    ds = Dataset.range(3).interleave(lambda x: Dataset.range(x * 10, x * 10 + 3), cycle_length=3)
    assert values(ds) == [0, 10, 20, 1, 11, 21, 2, 12, 22]


def test_interleave_with_unequal_inner_lengths_refills_the_freed_slot():
    ds = Dataset.range(1, 5).interleave(lambda x: Dataset.range(x).map(lambda _: x), cycle_length=2)
    # Hand-run of TensorFlow's InterleaveDatasetOp loop: an exhausted slot moves the
    # cycle on; the slot is refilled the next time the cycle comes back to it.
    assert values(ds) == [1, 2, 2, 3, 3, 4, 3, 4, 4, 4]


def test_interleave_bulk_path_matches_the_element_path():
    ds = Dataset.range(1, 6).interleave(lambda x: Dataset.from_tensors(x).repeat(6), cycle_length=2, block_length=4)
    assert [v for b in values(ds.batch(7)) for v in b] == TF_INTERLEAVE


def test_interleave_argument_errors():
    with pytest.raises(ValueError, match="block_length must be greater than zero; received block_length=0"):
        Dataset.range(3).interleave(lambda x: Dataset.range(x), cycle_length=1, block_length=0)
    with pytest.raises(ValueError, match="cycle_length must be greater than zero"):
        Dataset.range(3).interleave(lambda x: Dataset.range(x), cycle_length=0)


# ------------------------------------------------------ the remaining ops


def test_prefetch_yields_the_same_elements():
    assert values(Dataset.range(100).prefetch(3)) == list(range(100))
    assert values(Dataset.range(100).prefetch(tpsd.AUTOTUNE)) == list(range(100))
    assert values(Dataset.range(5).prefetch(0)) == list(range(5))
    with pytest.raises(ValueError, match="buffer_size must be >= 0 or AUTOTUNE"):
        Dataset.range(3).prefetch(-5)


def test_cache_replays_the_first_pass_even_after_a_shuffle():
    ds = Dataset.range(20).shuffle(20, seed=4).cache()
    first, second = values(ds), values(ds)
    assert first == second != list(range(20))
    assert values(ds.repeat(2)) == first + first


def test_cache_does_not_rerun_the_input_after_a_complete_pass():
    calls = []
    ds = Dataset.range(5).map(lambda x: calls.append(int(x)) or x).cache()
    assert values(ds.repeat(3)) == [0, 1, 2, 3, 4] * 3
    assert calls == [0, 1, 2, 3, 4]


def test_a_partial_pass_does_not_fill_the_cache():
    ds = Dataset.range(5).cache()
    it = iter(ds)
    next(it)
    it.close()
    assert values(ds) == [0, 1, 2, 3, 4]


def test_concatenate_appends_and_checks_compatibility():
    assert values(Dataset.range(3).concatenate(Dataset.range(7, 9))) == [0, 1, 2, 7, 8]
    with pytest.raises(TypeError, match="incompatible dataset elements"):
        Dataset.range(3).concatenate(Dataset.from_tensor_slices(["a"]))


def test_enumerate_counts_from_start_as_int64():
    out = list(Dataset.from_tensor_slices(["a", "b"]).enumerate(start=5))
    assert out == [(5, b"a"), (6, b"b")] and isinstance(out[0][0], np.int64)


def test_apply_calls_the_transformation_and_checks_the_result():
    assert values(Dataset.range(5).apply(lambda d: d.skip(3))) == [3, 4]
    with pytest.raises(TypeError, match="must return a Dataset"):
        Dataset.range(5).apply(lambda d: 3)


# -------------------------------------------------------------- iterators


def test_as_numpy_iterator_and_iter_give_independent_passes():
    ds = Dataset.range(3)
    a, b = ds.as_numpy_iterator(), iter(ds)
    assert int(next(a)) == 0 and int(next(a)) == 1
    assert [int(x) for x in b] == [0, 1, 2]
    assert [int(x) for x in a] == [2]


def test_a_closed_iterator_ends_and_can_still_report_its_spec():
    it = iter(Dataset.range(3))
    it.close()
    with pytest.raises(StopIteration):
        next(it)
    assert it.element_spec == tpsd.TensorSpec((), np.int64)


def test_deterministic_false_is_accepted_and_order_is_still_valid():
    ds = Dataset.range(50).map(lambda x: x, num_parallel_calls=2, deterministic=False)
    assert sorted(values(ds)) == list(range(50))


# ----------------------------------------------------------- other errors


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: Dataset.range(3).repeat("2"), TypeError, "Dataset.repeat: count must be an int or None"),
        (lambda: Dataset.range(3).prefetch(1.0), TypeError, "Dataset.prefetch: buffer_size must be an int or AUTOTUNE"),
        (lambda: Dataset.range(3).cache(3), TypeError, "Dataset.cache: filename must be a str"),
        (lambda: Dataset.range(3).concatenate([1]), TypeError, "Dataset.concatenate: `dataset` must be a Dataset"),
        (lambda: Dataset.range(3).shard(2.0, 0), TypeError, "Dataset.shard: num_shards must be an int"),
        (lambda: Dataset.range(3).shuffle(2, seed=-1), ValueError, "Dataset.shuffle: seed must be >= 0"),
        (lambda: Dataset.list_files(3), TypeError, "Dataset.list_files: file_pattern must be a string"),
        (lambda: tpsd.TensorSpec(None, np.int64), TypeError, "TensorSpec: shape=None"),
        (lambda: Dataset.range(3, start=1, size=3), TypeError, r"unexpected keyword arguments \['size'\]"),
        (lambda: Dataset.from_tensors(object()), TypeError, "Cannot convert a value of type object"),
    ],
)
def test_argument_errors_name_the_api_and_the_argument(build, error, message):
    with pytest.raises(error, match=message):
        build()


def test_padded_batch_structure_and_rank_errors_explain_the_fix():
    ds = Dataset.range(3).map(lambda x: (np.zeros(int(x)), x))
    with pytest.raises(ValueError, match="does not nest like the elements"):
        list(ds.padded_batch(2, padded_shapes=[None]))
    with pytest.raises(ValueError, match="padded shape \\[None, None\\] has rank 2 but component"):
        list(ds.padded_batch(2, padded_shapes=([None, None], [])))
    mixed = Dataset.from_generator(lambda: iter([np.zeros(1), np.zeros((1, 1))]))
    with pytest.raises(ValueError, match="different ranks"):
        list(mixed.padded_batch(2))


def test_element_spec_of_an_empty_unknown_dataset_explains_the_fix():
    with pytest.raises(ValueError, match="could not be inferred without data and the dataset is empty"):
        _ = Dataset.from_generator(lambda: iter([])).element_spec
