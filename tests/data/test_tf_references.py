"""The transformations against values TensorFlow 2.21 computed (tools/make_data_references.py)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset
REFS = json.loads((pathlib.Path(__file__).parent / "fixtures" / "data_transformation_references.json").read_text())["cases"]


def check_numerics(x):
    if np.isnan(x):
        raise ValueError("message : Tensor had NaN values")
    return x


def lengths(n):
    return np.arange(int(n) % 9 + 1, dtype=np.int32)


def _window(size, shift, stride, drop):
    return Dataset.range(20).window(size, shift, stride, drop)


WINDOWS = {f"window_{a}_{b}_{c}_{d}": (a, b, c, d) for a, b, c, d in
           [(3, 2, 1, False), (3, 2, 1, True), (4, 1, 2, False), (2, 5, 3, False), (5, 3, 2, True), (3, None, 1, False)]}

SMALL = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0], np.int64)
IMM = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0, 2, 2, 0, 0], np.int64)
Reducer = tpsd.experimental.Reducer

PIPELINES = {
    **{name: (lambda p=p: _window(*p).flat_map(lambda x, size=p[0]: x.batch(size))) for name, p in WINDOWS.items()},
    "window_zip": lambda: Dataset.zip((Dataset.range(7), Dataset.range(7).map(lambda x: x * 10))).window(3, 2).flat_map(
        lambda a, b: Dataset.zip((a.batch(3), b.batch(3)))),
    "group_by_window_small_groups": lambda: Dataset.from_tensor_slices(SMALL).group_by_window(
        lambda x: x % 2, lambda _, xs: xs.batch(4), window_size=4),
    "group_by_window_size_func": lambda: Dataset.range(30).group_by_window(
        lambda x: x % 3, lambda _, xs: xs.batch(10), window_size_func=lambda k: k + 2),
    "group_by_window_infinite": lambda: Dataset.from_tensor_slices(IMM).repeat().group_by_window(
        lambda x: x % 3, lambda _, xs: xs.batch(4), window_size=4),
    "bucket_mixed": lambda: Dataset.range(1, 25).map(lengths).bucket_by_sequence_length(lambda x: x.shape[0], [3, 6], [3, 2, 2]),
    "bucket_pad_to_boundary": lambda: Dataset.range(1, 11).map(lambda n: np.ones([int(n)], np.int64)).bucket_by_sequence_length(
        lambda x: x.shape[0], [3, 7, 11], [2, 2, 2, 2], pad_to_bucket_boundary=True),
    "bucket_drop_remainder": lambda: Dataset.range(1, 25).map(lengths).bucket_by_sequence_length(
        lambda x: x.shape[0], [3, 6], [3, 2, 2], drop_remainder=True),
    "scan_fibonacci": lambda: Dataset.from_tensors(1).repeat(10).scan([0, 1], lambda a, _: ([a[1], a[0] + a[1]], a[1])),
    "scan_running_sum_and_count": lambda: Dataset.range(8).scan(
        (np.int64(0), np.int64(0)), lambda s, x: ((s[0] + x, s[1] + 1), (s[0], s[1]))),
    "scan_growing_state": lambda: Dataset.from_tensors(0).repeat(4).scan(np.array([0], np.int32), lambda s, x: (np.concatenate([s, s]), (s, x))),
    "unique_ints": lambda: Dataset.from_tensor_slices(np.array([1, 2, 4, 3, 2, 1, 2, 3, 4], np.int64)).unique(),
    "unique_strings": lambda: Dataset.from_tensor_slices(["foo", "bar", "baz", "baz", "bar", "foo"]).unique(),
    "take_while_range": lambda: Dataset.range(16).take_while(lambda x: x < 7),
    "ragged_batch_vectors": lambda: Dataset.range(7).map(lambda x: np.full([int(x)], x)).ragged_batch(3),
    "ragged_batch_2_by_x": lambda: Dataset.range(5).map(lambda x: np.full([2, int(x)], x)).ragged_batch(2, drop_remainder=True),
    "ragged_batch_scalars": lambda: Dataset.range(5).ragged_batch(2),
    "sparse_batch": lambda: Dataset.from_tensor_slices(np.array([3, 0, 5, 1, 2, 4, 4], np.int32)).map(
        lambda x: np.full([int(x)], x)).sparse_batch(3, [5]),
    "sparse_batch_unknown_dim": lambda: Dataset.from_tensor_slices(np.array([2, 1, 3], np.int32)).map(
        lambda x: np.full([int(x), int(x)], x)).sparse_batch(2, [3, None]),
    "ignore_errors": lambda: Dataset.from_tensor_slices(np.array([1.0, np.nan, 2.0, np.nan, np.nan, 3.0], np.float32)).map(
        check_numerics).ignore_errors(),
    "group_by_reducer_sum": lambda: Dataset.range(20).apply(tpsd.experimental.group_by_reducer(
        lambda x: (x * 7) % 3, Reducer(lambda _: np.int64(0), lambda s, x: s + x, lambda s: s))),
    "pad_to_cardinality": lambda: Dataset.from_tensor_slices({"a": [1, 2, 3]}).apply(tpsd.experimental.pad_to_cardinality(5)),
    "assert_cardinality": lambda: Dataset.range(6).filter(lambda x: True).apply(tpsd.experimental.assert_cardinality(6)),
}


def to_py(x):
    if isinstance(x, tpsd.RaggedBatch):
        return {"ragged": [to_py(r) for r in x.to_list()], "row_lengths": np.asarray(x.row_lengths).tolist()}
    if isinstance(x, tpsd.SparseBatch):
        return {"indices": x.indices.tolist(), "values": to_py(x.values), "dense_shape": x.dense_shape.tolist()}
    if isinstance(x, dict):
        return {k: to_py(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return [to_py(v) for v in x]
    if isinstance(x, bytes):
        return x.decode("latin-1")
    a = np.asarray(x)
    if a.dtype == object:
        return [to_py(v) for v in a]
    return a.tolist()


def spec_shapes(spec):
    if isinstance(spec, tpsd.RaggedBatch):
        return "RaggedTensorSpec"
    if isinstance(spec, tpsd.SparseBatch):
        return "SparseTensorSpec"
    if isinstance(spec, dict):
        return {k: spec_shapes(v) for k, v in spec.items()}
    if isinstance(spec, tuple):
        return [spec_shapes(v) for v in spec]
    return list(spec.shape)


def test_every_reference_case_has_a_pipeline():
    assert sorted(PIPELINES) == sorted(REFS)


@pytest.mark.parametrize("name", sorted(REFS))
def test_elements_match_tensorflow(name):
    ref = REFS[name]
    ds = PIPELINES[name]()
    limit = len(ref["values"]) if ref["shapes"] is None else None
    got = [to_py(e) for e in (ds.take(limit) if limit else ds)]
    assert got == ref["values"]


@pytest.mark.parametrize("name", sorted(REFS))
def test_cardinality_matches_tensorflow(name):
    assert PIPELINES[name]().cardinality() == REFS[name]["cardinality"]
    if "window_cardinality" in REFS[name]:
        assert _window(*WINDOWS[name]).cardinality() == REFS[name]["window_cardinality"]


@pytest.mark.parametrize("name", sorted(n for n in REFS if REFS[n]["shapes"] is not None))
def test_element_shapes_match_tensorflow(name):
    assert spec_shapes(PIPELINES[name]().element_spec) == REFS[name]["shapes"]


@pytest.mark.parametrize("name", sorted(n for n in REFS if n != "group_by_window_infinite"))
def test_resuming_from_every_position_gives_tensorflows_sequence(name):
    assert [to_py(e) for e in assert_iterator_checkpointing(PIPELINES[name](), num_checkpoints=None)] == REFS[name]["values"]
