"""tf.data.experimental function forms (TensorFlow's from_list_test, at, get_structure, cardinality, lookup helpers)."""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.errors import OutOfRangeError
from tpustrategy.testing import assert_iterator_checkpointing

X = tpsd.experimental
D = tpsd.Dataset
REFS = json.loads((pathlib.Path(__file__).parent / "fixtures" / "data_source_references.json").read_text())


def test_cardinalities_match_tensorflow():
    c = REFS["cardinality"]
    assert X.cardinality(D.sample_from_datasets([D.range(3), D.range(4)])) == c["sample_two_finite"]
    assert X.cardinality(D.sample_from_datasets([D.range(3), D.range(4).repeat()])) == c["sample_one_infinite"]
    assert X.cardinality(D.choose_from_datasets([D.range(3), D.range(4)], D.range(2))) == c["choose"]
    assert X.cardinality(D.counter()) == c["counter"] and X.cardinality(D.random()) == c["random"]
    assert X.cardinality(X.from_list([1, 2, 3])) == c["from_list"]
    assert isinstance(X.cardinality(D.range(3)), np.int64)


def test_from_list_gives_one_element_per_item_even_when_ragged():
    got = [(int(a), b) for a, b in X.from_list([(1, "a"), (2, "b")])]
    assert got == [(n, s.encode()) for n, s in REFS["from_list"]]
    ragged = [x.tolist() for x in X.from_list([[1, 2], [3], [4, 5, 6]])]
    assert ragged == [[1, 2], [3], [4, 5, 6]]
    dicts = list(X.from_list([{"a": 1.0, "b": [1]}, {"a": 2.0, "b": [2]}]))
    assert [float(d["a"]) for d in dicts] == [1.0, 2.0]
    assert_iterator_checkpointing(X.from_list(list(range(30))), num_checkpoints=None)
    with pytest.raises(ValueError, match="must be a non-empty list"):
        X.from_list([])
    with pytest.raises(ValueError, match="structure of element 0"):
        X.from_list([(1, 2), 3])


def test_at_and_get_structure():
    assert int(X.at(D.range(10), 3)) == REFS["at"]
    with pytest.raises(OutOfRangeError, match="out of range"):
        X.at(D.range(3), 3)
    with pytest.raises(OutOfRangeError, match="out of range"):
        X.at(D.range(10).filter(lambda x: x < 2), 5)
    assert X.get_structure(D.range(3)) == tpsd.TensorSpec((), np.int64)
    assert X.get_structure(iter(D.range(3))) == tpsd.TensorSpec((), np.int64)
    with pytest.raises(TypeError, match="expected a Dataset or an iterator"):
        X.get_structure(3)


def test_transformation_forms_apply_like_the_methods():
    ds = D.range(6)
    assert [int(x) for x in ds.apply(X.shuffle_and_repeat(6, count=2, seed=1))] != list(range(6)) * 2
    assert sorted(int(x) for x in ds.apply(X.shuffle_and_repeat(6, count=2, seed=1))) == sorted(list(range(6)) * 2)
    assert [int(x) for x in ds.batch(4).apply(X.unbatch())] == list(range(6))
    assert [int(x) for x in ds.apply(X.prefetch_to_device("/cpu:0"))] == list(range(6))
    assert [int(x) for x in ds.apply(X.copy_to_device("/cpu:0"))] == list(range(6))
    X.enable_debug_mode()
    got = [int(x) for x in X.sample_from_datasets([D.range(3), D.range(10, 13)], seed=1)]
    assert sorted(got) == [0, 1, 2, 10, 11, 12]
    assert [int(x) for x in X.choose_from_datasets([D.range(2), D.range(5, 7)], D.range(2).repeat(2))] == [0, 5, 1, 6]
    # The function form's stop_on_empty_dataset defaults to False (the method's to True), as in TensorFlow.
    short = [D.range(1), D.range(5, 7)]
    assert [int(x) for x in X.choose_from_datasets(short, D.range(2).repeat(2))] == [0, 5, 6]
    assert [int(x) for x in D.choose_from_datasets(short, D.range(2).repeat(2))] == [0, 5]
    assert [int(x) for x in X.Counter(2, 3).take(2)] == [2, 5]
    assert [int(x) for x in X.RandomDataset(seed=3).take(2)] == [int(x) for x in D.random(seed=3).take(2)]


def test_tables_from_datasets():
    keys = D.from_tensor_slices(np.array([b"a", b"b", b"c"], dtype=object))
    table = X.index_table_from_dataset(keys)
    assert table.lookup(np.array([b"b", b"z"], dtype=object)).tolist() == [1, -1]
    oov = X.index_table_from_dataset(keys, num_oov_buckets=2, vocab_size=2)
    ids = oov.lookup(np.array([b"a", b"b", b"c"], dtype=object)).tolist()
    assert ids[:2] == [0, 1] and 2 <= ids[2] < 4
    pairs = D.zip((keys, D.range(10, 13)))
    table = X.table_from_dataset(pairs, default_value=-1)
    assert table.lookup(np.array([b"c", b"q"], dtype=object)).tolist() == [12, -1]
    init = X.DatasetInitializer(pairs)
    import tpustrategy.lookup as lookup

    assert lookup.StaticHashTable(init, -1).lookup(np.array([b"a"], dtype=object)).tolist() == [10]
    with pytest.raises(ValueError, match="default_value is required"):
        X.table_from_dataset(pairs)
    with pytest.raises(ValueError, match=r"must produce \(key, value\) pairs"):
        X.DatasetInitializer(keys)


def test_fingerprint_is_stable_and_tells_pipelines_apart():
    def make(n):
        return D.range(n).map(lambda x: x * 2).batch(3)

    assert make(10).fingerprint() == make(10).fingerprint()
    assert make(10).fingerprint() != make(11).fingerprint()
    assert isinstance(make(10).fingerprint(), np.uint64)
    assert D.range(3).map(lambda x: x + 1).fingerprint() != D.range(3).map(lambda x: x + 2).fingerprint()


# TensorFlow's fingerprint_test, ported.
_SAME = {
    "range1": lambda: D.range(10),
    "flat_map1": lambda: D.range(10).flat_map(D.range),
    "tfrecord1": lambda: tpsd.TFRecordDataset(["f1.txt", "f2.txt"]),
    "tfrecord2": lambda: tpsd.TFRecordDataset(["f1.txt", "f2.txt"]).repeat(2),
}
_PAIRS = {
    "range1": lambda: (D.range(10), D.range(11)),
    "flat_map1": lambda: (D.range(10).flat_map(D.range), D.range(10).flat_map(lambda x: D.range(x + 1))),
    "tfrecord1": lambda: (tpsd.TFRecordDataset(["f1.txt", "f2.txt"]), tpsd.TFRecordDataset(["f1.txt", "f3.txt"])),
    "tfrecord2": lambda: (tpsd.TFRecordDataset(["f1.txt", "f2.txt"]).repeat(2),
                          tpsd.TFRecordDataset(["f1.txt", "f3.txt"]).repeat(2)),
}


@pytest.mark.parametrize("name", sorted(_SAME))
def test_the_same_dataset_has_the_same_fingerprint(name):
    assert _SAME[name]().fingerprint() == _SAME[name]().fingerprint()


@pytest.mark.parametrize("name", sorted(_PAIRS))
def test_different_datasets_have_different_fingerprints(name):
    lhs, rhs = _PAIRS[name]()
    assert lhs.fingerprint() != rhs.fingerprint()
