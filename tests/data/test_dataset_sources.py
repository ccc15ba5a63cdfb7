"""Tests of the source datasets: range, from_tensors, from_tensor_slices, from_generator, list_files, zip."""

from __future__ import annotations

import collections
import os
import pathlib
import re

import numpy as np
import pytest

import tpustrategy.data as tpsd

Dataset = tpsd.Dataset
Point = collections.namedtuple("Point", ["x", "y"])


def values(ds):
    return [x.tolist() if isinstance(x, (np.ndarray, np.generic)) else x for x in ds]


def test_range_yields_int64_scalars_like_python_range():
    out = list(Dataset.range(5))
    assert [int(x) for x in out] == [0, 1, 2, 3, 4]
    assert all(isinstance(x, np.int64) for x in out)
    assert values(Dataset.range(2, 10, 3)) == [2, 5, 8]
    assert values(Dataset.range(5, 0, -2)) == [5, 3, 1]
    assert values(Dataset.range(3, 3)) == []
    assert values(Dataset.range(2, stop=5)) == values(Dataset.range(start=2, stop=5, step=1)) == [2, 3, 4]
    assert Dataset.range(3, output_type=np.int32).element_spec.dtype == np.int32


def test_range_with_zero_step_names_the_argument():
    with pytest.raises(ValueError, match="step must be a non-zero integer"):
        Dataset.range(0, 10, 0)


def test_range_rejects_non_int_bounds_and_too_many_arguments():
    with pytest.raises(TypeError, match="stop must be an int; received float"):
        Dataset.range(2.5)
    with pytest.raises(TypeError, match="expected 1 to 3 positional arguments"):
        Dataset.range(1, 2, 3, 4)


def test_range_element_spec_is_an_int64_scalar():
    assert Dataset.range(3).element_spec == tpsd.TensorSpec((), np.int64)


def test_from_tensors_yields_one_element_with_python_types_converted_like_tensorflow():
    (elem,) = list(Dataset.from_tensors((1, 2.5, "a", [1, 2])))
    assert elem[0].dtype == np.int32 and elem[1].dtype == np.float32
    assert elem[2] == b"a"
    assert elem[3].dtype == np.int32 and elem[3].tolist() == [1, 2]


def test_from_tensors_keeps_numpy_dtypes_and_dict_structure():
    (elem,) = list(Dataset.from_tensors({"a": np.arange(3, dtype=np.int64), "b": np.float64(1.5)}))
    assert elem["a"].dtype == np.int64 and elem["b"].dtype == np.float64


def test_from_tensors_elements_cannot_be_modified_in_place():
    (elem,) = list(Dataset.from_tensors(np.zeros(3)))
    with pytest.raises(ValueError, match="read-only"):
        elem[0] = 1.0


def test_from_tensor_slices_slices_every_component_along_the_first_dimension():
    ds = Dataset.from_tensor_slices({"x": np.arange(6).reshape(3, 2), "y": ["a", "b", "c"]})
    out = list(ds)
    assert [e["x"].tolist() for e in out] == [[0, 1], [2, 3], [4, 5]]
    assert [e["y"] for e in out] == [b"a", b"b", b"c"]
    assert ds.element_spec == {
        "x": tpsd.TensorSpec((2,), np.int64),
        "y": tpsd.TensorSpec((), object),
    }


def test_from_tensor_slices_keeps_namedtuples():
    out = list(Dataset.from_tensor_slices(Point(np.arange(2), np.arange(2) * 10)))
    assert isinstance(out[0], Point) and int(out[1].y) == 10


def test_from_tensor_slices_of_bytes_keeps_trailing_zero_bytes():
    records = [b"a\x00\x00", b"\x00", b""]
    assert list(Dataset.from_tensor_slices(records)) == records
    batch = next(iter(Dataset.from_tensor_slices(records).batch(3)))
    assert batch.dtype == object and batch.tolist() == records


def test_from_tensor_slices_with_mismatched_first_dimensions_lists_the_sizes():
    with pytest.raises(ValueError, match=r"same size in their first dimension.*\['a'\]: 3.*\['b'\]: 2"):
        Dataset.from_tensor_slices({"a": np.arange(3), "b": np.arange(2)})


def test_from_tensor_slices_of_a_scalar_says_to_use_from_tensors():
    with pytest.raises(ValueError, match="(?s)scalar.*Dataset.from_tensors"):
        Dataset.from_tensor_slices(5)


def test_from_tensor_slices_of_a_ragged_list_explains_the_fix():
    with pytest.raises(ValueError, match="ragged"):
        Dataset.from_tensor_slices([[1], [2, 3]])


def test_from_generator_converts_to_the_output_signature():
    def gen():
        yield 1, [1.0, 2.0]
        yield 2, [3.0, 4.0]

    sig = (tpsd.TensorSpec((), np.int64), tpsd.TensorSpec((2,), np.float32))
    ds = Dataset.from_generator(gen, output_signature=sig)
    out = list(ds)
    assert out[0][0].dtype == np.int64 and out[1][1].dtype == np.float32
    assert out[1][1].tolist() == [3.0, 4.0]
    assert ds.element_spec == sig
    assert ds.cardinality() == tpsd.UNKNOWN_CARDINALITY


def test_from_generator_calls_the_generator_again_for_every_iteration():
    ds = Dataset.from_generator(lambda: iter(range(3)), output_signature=tpsd.TensorSpec((), np.int64))
    assert values(ds) == [0, 1, 2]
    assert values(ds) == [0, 1, 2]


def test_from_generator_passes_args():
    ds = Dataset.from_generator(lambda n: range(n), args=(3,), output_types=np.int64)
    assert values(ds) == [0, 1, 2]


def test_from_generator_without_signature_infers_the_spec_from_the_first_element():
    ds = Dataset.from_generator(lambda: iter([np.zeros((2, 3), np.float32)]))
    assert ds.element_spec == tpsd.TensorSpec((2, 3), np.float32)


def test_from_generator_with_a_wrong_shape_names_both_shapes():
    ds = Dataset.from_generator(lambda: iter([[1, 2, 3]]), output_signature=tpsd.TensorSpec((2,), np.int64))
    with pytest.raises(ValueError, match=r"yielded an element of shape \(3,\) where an element of shape \(2,\)"):
        list(ds)


def test_from_generator_with_a_wrong_structure_shows_the_expected_structure():
    sig = (tpsd.TensorSpec((), np.int64), tpsd.TensorSpec((), np.int64))
    ds = Dataset.from_generator(lambda: iter([3]), output_signature=sig)
    with pytest.raises(TypeError, match="did not match the expected structure"):
        list(ds)


def test_from_generator_with_an_unconvertible_value_names_the_type():
    ds = Dataset.from_generator(lambda: iter(["x"]), output_signature=tpsd.TensorSpec((), np.int64))
    with pytest.raises(TypeError, match="expected type was int64"):
        list(ds)


def test_from_generator_argument_errors():
    with pytest.raises(TypeError, match="must be a Python callable"):
        Dataset.from_generator(iter([1]))
    with pytest.raises(TypeError, match="can not be used together with `output_signature`"):
        Dataset.from_generator(lambda: iter([]), output_types=np.int64, output_signature=tpsd.TensorSpec((), np.int64))
    with pytest.raises(TypeError, match="must be a TensorSpec"):
        Dataset.from_generator(lambda: iter([]), output_signature=(np.int64,))


def test_list_files_sorts_matches_and_does_not_shuffle_when_asked(tmp_path):
    for name in ["b.txt", "a.txt", "c.txt", "skip.bin"]:
        (tmp_path / name).write_text("x")
    ds = Dataset.list_files(str(tmp_path / "*.txt"), shuffle=False)
    assert list(ds) == [os.fsencode(tmp_path / n) for n in ["a.txt", "b.txt", "c.txt"]]
    assert ds.cardinality() == 3


def test_list_files_shuffles_by_default_with_a_seed_reproducibly(tmp_path):
    for i in range(20):
        (tmp_path / f"f{i:02d}").write_text("x")
    pattern = str(tmp_path / "f*")
    a = list(Dataset.list_files(pattern, seed=7))
    b = list(Dataset.list_files(pattern, seed=7))
    assert a == b
    assert sorted(a) == list(Dataset.list_files(pattern, shuffle=False))
    assert a != sorted(a)


def test_list_files_accepts_several_patterns_and_pathlike(tmp_path):
    (tmp_path / "a.x").write_text("x")
    (tmp_path / "b.y").write_text("x")
    ds = Dataset.list_files([tmp_path / "*.y", str(tmp_path / "*.x")], shuffle=False)
    assert [pathlib.Path(os.fsdecode(p)).name for p in ds] == ["a.x", "b.y"]


def test_list_files_with_no_match_names_the_pattern(tmp_path):
    pattern = str(tmp_path / "nothing-*.tfrecord")
    with pytest.raises(ValueError, match=re.escape(f"No files matched pattern: {pattern}")):
        Dataset.list_files(pattern)


def test_zip_pairs_elements_and_stops_at_the_shortest():
    ds = Dataset.zip((Dataset.range(3), Dataset.range(10, 20)))
    assert values(ds) == [(0, 10), (1, 11), (2, 12)]
    assert values(Dataset.zip(Dataset.range(2), Dataset.range(5))) == [(0, 0), (1, 1)]


def test_zip_of_a_dict_and_nested_tuples_keeps_the_structure():
    ds = Dataset.zip({"a": Dataset.range(2), "b": (Dataset.range(2), Dataset.from_tensor_slices(["x", "y"]))})
    out = list(ds)
    assert int(out[1]["a"]) == 1 and out[1]["b"][1] == b"y"
    assert ds.element_spec["b"][1] == tpsd.TensorSpec((), object)


def test_zip_of_a_list_says_to_use_a_tuple():
    with pytest.raises(TypeError, match="(?s)list.*pass a tuple"):
        Dataset.zip([Dataset.range(1), Dataset.range(1)])
    with pytest.raises(TypeError, match="must be a \\(nested\\) tuple or dict of Dataset"):
        Dataset.zip((Dataset.range(1), 3))


def test_zip_then_batch_stacks_each_component():
    ds = Dataset.zip((Dataset.range(5), Dataset.from_tensor_slices(["a", "b", "c", "d", "e"]))).batch(2)
    first = next(iter(ds))
    assert first[0].tolist() == [0, 1] and first[1].tolist() == [b"a", b"b"]


def test_tensor_spec_normalizes_shapes_and_dtypes_and_prints_like_tensorflow():
    spec = tpsd.TensorSpec([None, 3], "string")
    assert spec.shape == (None, 3) and spec.dtype == np.dtype(object)
    assert repr(tpsd.TensorSpec((), np.int64)) == "TensorSpec(shape=(), dtype=int64, name=None)"
    assert spec.is_compatible_with(np.array([[b"a", b"b", b"c"]], dtype=object))
    assert not spec.is_compatible_with(np.zeros((1, 2)))
