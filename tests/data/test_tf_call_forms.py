"""TensorFlow's call forms: keyword names, sizes as integer arrays, generator tuples, scalar strings."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.data as tpsd

Dataset = tpsd.Dataset


def test_map_filter_flat_map_interleave_take_tensorflows_keywords():
    ds = Dataset.range(4)
    assert [int(x) for x in ds.map(map_func=lambda x: x + 1, name="m")] == [1, 2, 3, 4]
    assert [int(x) for x in ds.filter(predicate=lambda x: x % 2 == 0, name="f")] == [0, 2]
    assert [int(x) for x in ds.flat_map(map_func=lambda x: Dataset.from_tensors(x).repeat(2))] == [0, 0, 1, 1, 2, 2, 3, 3]
    got = ds.interleave(map_func=lambda x: Dataset.from_tensors(x).repeat(2), cycle_length=2, block_length=1)
    assert [int(x) for x in got] == [0, 1, 0, 1, 2, 3, 2, 3]


def test_the_older_fn_keyword_still_works():
    ds = Dataset.range(3)
    assert [int(x) for x in ds.map(fn=lambda x: -x)] == [0, -1, -2]
    assert [int(x) for x in ds.flat_map(fn=lambda x: Dataset.from_tensors(x))] == [0, 1, 2]
    assert [int(x) for x in ds.interleave(fn=lambda x: Dataset.from_tensors(x), cycle_length=1)] == [0, 1, 2]


def test_both_keywords_at_once_or_none_is_a_clear_error():
    with pytest.raises(TypeError, match=r"Dataset.map: received both map_func= and fn="):
        Dataset.range(3).map(map_func=lambda x: x, fn=lambda x: x)
    with pytest.raises(TypeError, match=r"Dataset.interleave: missing the required argument 'map_func'"):
        Dataset.range(3).interleave(cycle_length=2)


@pytest.mark.parametrize("size", [np.int64(2), np.int32(2), np.array(2), np.array(2, np.int64)])
def test_batch_and_padded_batch_accept_numpy_integer_sizes(size):
    assert [b.tolist() for b in Dataset.range(5).batch(size)] == [[0, 1], [2, 3], [4]]
    assert Dataset.range(5).batch(size, drop_remainder=np.bool_(True)).cardinality() == 2
    padded = Dataset.range(3).map(lambda x: np.arange(x)).padded_batch(size)
    assert [b.tolist() for b in padded] == [[[0], [0]], [[0, 1]]]


@pytest.mark.parametrize("bad", [2.0, np.array([2]), "2", True])
def test_batch_rejects_non_integer_sizes(bad):
    with pytest.raises(TypeError, match="Dataset.batch: batch_size must be an int"):
        Dataset.range(5).batch(bad)


def test_from_generator_converts_a_yielded_tuple_for_a_shaped_leaf():
    ds = Dataset.from_generator(lambda: ((i,) for i in range(3)), output_signature=tpsd.TensorSpec(shape=(1,), dtype=np.int64))
    out = list(ds)
    assert [x.tolist() for x in out] == [[0], [1], [2]] and out[0].dtype == np.int64
    nested = Dataset.from_generator(
        lambda: (((i, i + 1), i) for i in range(2)),
        output_signature=(tpsd.TensorSpec((2,), np.int32), tpsd.TensorSpec((), np.int32)),
    )
    assert [(a.tolist(), int(b)) for a, b in nested] == [([0, 1], 0), ([1, 2], 1)]


def test_from_generator_still_rejects_a_tuple_for_a_scalar_leaf():
    ds = Dataset.from_generator(lambda: iter([(1, 2)]), output_signature=tpsd.TensorSpec((), np.int64))
    with pytest.raises(TypeError, match="did not match the expected structure"):
        list(ds)


def test_a_scalar_string_in_a_function_indexes_like_a_zero_d_tensor():
    seen = []

    def fn(eg):
        seen.append((eg.shape, eg.ndim, eg.dtype))
        return eg[np.newaxis]

    out = list(Dataset.from_tensor_slices(["ab", "c"]).map(fn))
    assert [x.tolist() for x in out] == [[b"ab"], [b"c"]] and out[0].dtype == object
    assert seen[-1] == ((), 0, np.dtype(object))


def test_a_scalar_string_is_still_bytes_inside_functions_and_after():
    def fn(eg):
        assert isinstance(eg, bytes) and eg == b"abc" and eg[1:] == b"bc" and eg.numpy() == b"abc"
        return eg

    out = list(Dataset.from_tensors(b"abc").map(fn))
    assert out == [b"abc"] and type(out[0]) is bytes


def test_parse_example_of_a_record_with_a_new_axis(tmp_path):
    example = tpsd.Example(features=tpsd.Features(feature={"x": tpsd.Feature(int64_list=tpsd.Int64List(value=[7]))}))
    path = str(tmp_path / "r.tfrecord")
    with tpsd.TFRecordWriter(path) as w:
        w.write(example.SerializeToString())
    ds = tpsd.TFRecordDataset(path).map(lambda eg: tpsd.parse_example(eg[np.newaxis], {"x": tpsd.FixedLenFeature([], np.int64)}))
    assert [d["x"].tolist() for d in ds] == [[7]]


def test_tuple_elements_with_strings_reach_functions_as_scalars():
    ds = Dataset.zip((Dataset.from_tensor_slices(["a"]), Dataset.range(1))).map(lambda s, i: (s[None], i))
    ((s, i),) = list(ds)
    assert s.tolist() == [b"a"] and int(i) == 0


def test_padded_batch_of_scalar_strings_holds_bytes():
    out = next(iter(Dataset.from_tensor_slices(["a", "bb", "c"]).padded_batch(3)))
    assert out.dtype == object and out.tolist() == [b"a", b"bb", b"c"]
    assert all(type(v) is bytes for v in out.tolist())
    mixed = next(iter(Dataset.from_tensor_slices(["a", "b"]).map(lambda s: (s, s[None])).padded_batch(2)))
    assert [type(v) for v in mixed[0].tolist()] == [bytes, bytes]
