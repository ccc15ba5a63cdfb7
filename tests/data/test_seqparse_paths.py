"""The composite feature kinds and SequenceExample parsing: paths agree, specs are checked.

* The vectorised SequenceExample walk (``_sequence_walk``) reads what protobuf
  reads, record by record, on random SequenceExamples (hypothesis), and takes
  plain batches (it does not step aside on them).
* A batch parse equals the single-record parses of its records, for every
  composite kind (FixedLenSequence padding, SparseTensor rows, ragged rows).
* Spec constructors reject what TensorFlow rejects, with a fix.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tpustrategy.data as tpsd
from tpustrategy._src.data.parsing import _sequence_walk, composite
from tpustrategy._src.data.parsing.sequence_example import _lists_by_protobuf
from tpustrategy.errors import InvalidArgumentError

KEYS = {"i": np.dtype(np.int64), "f": np.dtype(np.float32), "s": np.dtype(object)}

_step_values = {
    "i": st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
    "f": st.lists(st.floats(width=32, allow_nan=False), max_size=5),
    "s": st.lists(st.binary(max_size=140), max_size=5),
}


@st.composite
def sequence_examples(draw: st.DrawFn) -> bytes:
    seq = tpsd.SequenceExample()
    if draw(st.booleans()):
        seq.context.feature["c"].int64_list.value.extend(draw(_step_values["i"]))
    for key in draw(st.sets(st.sampled_from(sorted(KEYS)))):
        steps = seq.feature_lists.feature_list[key].feature
        for values in draw(st.lists(st.one_of(st.none(), _step_values[key]), max_size=6)):
            step = steps.add()
            if values is None:
                continue  # a step with no kind
            field = {"i": step.int64_list, "f": step.float_list, "s": step.bytes_list}[key]
            field.value.extend(values)
    return seq.SerializeToString()


def _same_lists(a: dict, b: dict) -> None:
    for key in KEYS:
        for field in ("values", "step_counts", "steps", "present"):
            x, y = getattr(a[key], field), getattr(b[key], field)
            assert x.dtype == y.dtype and x.tolist() == y.tolist(), (key, field, x, y)


@settings(max_examples=60, deadline=None)
@given(st.lists(sequence_examples(), min_size=1, max_size=12))
def test_the_walk_reads_what_protobuf_reads(batch: list[bytes]) -> None:
    walked = _sequence_walk.walk(batch, KEYS)
    assert walked is not None, "the walk stepped aside on records protobuf wrote"
    contexts, lists = walked
    want_contexts, want_lists = _lists_by_protobuf(batch, KEYS, None)
    _same_lists(lists, want_lists)
    for ours, theirs in zip(contexts, want_contexts):
        assert tpsd.Example.FromString(ours) == tpsd.Example.FromString(theirs)


def test_the_walk_steps_aside_where_protobuf_must_decide() -> None:
    seq = tpsd.SequenceExample()
    seq.feature_lists.feature_list["i"].feature.add().float_list.value.append(1.0)  # another kind
    assert _sequence_walk.walk([seq.SerializeToString()], {"i": KEYS["i"]}) is None
    assert _sequence_walk.walk([b"\x0a\x05\x0a"], {"i": KEYS["i"]}) is None  # runs past its end
    with pytest.raises(InvalidArgumentError, match="Could not parse example input"):
        tpsd.parse_sequence_example([b"\x0a\x05\x0a"], sequence_features={"i": tpsd.VarLenFeature("int64")})


def _example(rng: np.random.Generator) -> bytes:
    n = int(rng.integers(0, 4))
    lens = rng.integers(0, 3, n)
    k = int(lens.sum())
    feats = {"vals": tpsd.Feature(float_list=tpsd.FloatList(value=rng.standard_normal(k).tolist())),
             "lens": tpsd.Feature(int64_list=tpsd.Int64List(value=lens.tolist())),
             "idx": tpsd.Feature(int64_list=tpsd.Int64List(value=rng.permutation(10)[:k].tolist())),
             "pairs": tpsd.Feature(int64_list=tpsd.Int64List(value=rng.integers(-9, 9, 2 * n).tolist()))}
    keep = {k: v for k, v in feats.items() if k != "pairs" or rng.random() < 0.7}
    return tpsd.Example(features=tpsd.Features(feature=keep)).SerializeToString()


@pytest.mark.parametrize("size", [3, 40])  # the record-by-record walk, and the batch walks
def test_a_batch_is_its_records_parsed_one_by_one(size: int) -> None:
    rng = np.random.default_rng(size)
    batch = [_example(rng) for _ in range(size)]
    specs = {"sp": tpsd.SparseFeature("idx", "vals", "float32", 10),
             "pairs": tpsd.FixedLenSequenceFeature([2], "int64", allow_missing=True, default_value=-1)}
    ragged = {"r": tpsd.RaggedFeature("float32", value_key="vals",
                                      partitions=[tpsd.RaggedFeature.RowLengths("lens")], row_splits_dtype="int64")}
    out, rout = tpsd.parse_example(batch, specs), tpsd.parse_example(batch, ragged)
    pairs_rows = 0
    for b, record in enumerate(batch):
        one, rone = tpsd.parse_single_example(record, specs), tpsd.parse_single_example(record, ragged)
        rows = one["pairs"].shape[0]
        pairs_rows = max(pairs_rows, rows)
        assert out["pairs"][b, :rows].tolist() == one["pairs"].tolist()
        assert (out["pairs"][b, rows:] == -1).all()  # padded with the default_value
        mine = out["sp"].indices[:, 0] == b
        assert out["sp"].indices[mine, 1:].tolist() == one["sp"].indices.tolist()
        assert out["sp"].values[mine].tolist() == one["sp"].values.tolist()
        assert one["sp"].indices[:, 0].tolist() == sorted(one["sp"].indices[:, 0].tolist())  # sorted by index
        per_record = rout["r"].to_list()[b]
        assert isinstance(rone["r"], tpsd.RaggedBatch)  # one example's rows: one ragged dimension
        assert per_record == [row.tolist() for row in rone["r"].to_list()]
    assert out["pairs"].shape == (size, pairs_rows, 2)
    assert out["sp"].dense_shape.tolist() == [size, 10]
    assert rout["r"].nested_row_splits[0].dtype == np.int64


def test_ragged_tensor_value_reads_like_tensorflow_s() -> None:
    rt = tpsd.RaggedTensorValue(tpsd.RaggedTensorValue(np.arange(4.0), np.array([0, 1, 4])), np.array([0, 2, 2]))
    assert rt.to_list() == [[[0.0], [1.0, 2.0, 3.0]], []]
    assert rt.ragged_rank == 2 and rt.nrows() == 2 and rt.row_lengths().tolist() == [2, 0]
    assert rt.flat_values.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert [s.tolist() for s in rt.nested_row_splits] == [[0, 2, 2], [0, 1, 4]]


def test_parse_example_dataset_takes_the_composite_kinds() -> None:
    rng = np.random.default_rng(1)
    records = np.array([_example(rng) for _ in range(6)], dtype=object)
    spec = {"pairs": tpsd.FixedLenSequenceFeature([2], "int64", allow_missing=True)}
    ds = tpsd.Dataset.from_tensor_slices(records).batch(3).apply(tpsd.experimental.parse_example_dataset(spec))
    got = [b["pairs"] for b in ds.as_numpy_iterator()]
    want = [tpsd.parse_example(list(records[i:i + 3]), spec)["pairs"] for i in (0, 3)]
    assert [g.tolist() for g in got] == [w.tolist() for w in want]


@pytest.mark.parametrize("make, match", [
    (lambda: tpsd.FixedLenSequenceFeature([0], "float32"), "dimensions must be positive"),
    (lambda: tpsd.FixedLenSequenceFeature([-1], "float32"), "Dimension -1 must be >= 0"),
    (lambda: tpsd.FixedLenSequenceFeature([2], "float32", default_value=[1, 2]), "must be one value"),
    (lambda: tpsd.SparseFeature("", "v", "int64", 3), "Missing index_key"),
    (lambda: tpsd.SparseFeature("i", "", "int64", 3), "Missing value_key"),
    (lambda: tpsd.SparseFeature(["i", "j"], "v", "int64", 3), "one non-negative int per index key"),
    (lambda: tpsd.RaggedFeature("float64"), "Argument `dtype` must be int64, float32, or bytes"),
    (lambda: tpsd.RaggedFeature("float32", row_splits_dtype="int16"), "`row_splits_dtype` must be int32 or int64"),
    (lambda: tpsd.RaggedFeature("float32", partitions="x"), "`partitions` must be a list or tuple"),
    (lambda: tpsd.RaggedFeature("float32", partitions=["x"]), "must be a list of partition objects"),
    (lambda: tpsd.RaggedFeature("float32", validate=1), "`validate` must be a bool"),
])
def test_specs_reject_what_tensorflow_rejects(make, match) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_a_sparse_feature_in_an_example_without_its_index_key_has_no_entries() -> None:
    rec = tpsd.Example(features=tpsd.Features(feature={
        "v": tpsd.Feature(float_list=tpsd.FloatList(value=[1.0]))})).SerializeToString()
    with pytest.raises(InvalidArgumentError, match="Fix:"):
        tpsd.parse_example([rec], {"sp": tpsd.SparseFeature("i", "v", "float32", 4)})


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_sparse_entries_are_ordered_as_lexsort_orders_them(data) -> None:
    # SparseFeature (already_sorted=False) orders each example's entries by index; the folded
    # single-key sort must give np.lexsort's stable order, duplicates and negative / wide ranges included.
    n = data.draw(st.integers(2, 40))
    dims = data.draw(st.integers(1, 3))
    bound = data.draw(st.sampled_from([4, 1000, 2**40, 2**62]))
    unit = np.sort(np.asarray(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), np.int64))
    cols = [np.asarray(data.draw(st.lists(st.integers(-bound, bound), min_size=n, max_size=n)), np.int64)
            for _ in range(dims)]
    want = np.lexsort([*reversed(cols), unit])
    got = composite.sort_order(unit, cols)
    np.testing.assert_array_equal(np.arange(n) if got is None else got, want)
