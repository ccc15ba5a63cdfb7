"""make_csv_dataset / make_batched_features_dataset / parse_example_dataset against TensorFlow 2.21's output.

References: ``tests/data/fixtures/data_source_references.json`` (tools/make_data_source_references.py).
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.testing import assert_iterator_checkpointing

X = tpsd.experimental
REFS = json.loads((pathlib.Path(__file__).parent / "fixtures" / "data_source_references.json").read_text())


def py(x):
    if isinstance(x, dict):
        return {k: py(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return [py(v) for v in x]
    a = np.asarray(x)
    if a.dtype == object:
        return [v.decode() for v in a.reshape(-1).tolist()]
    return a.tolist()


def close(a, b):
    if isinstance(a, dict):
        return sorted(a) == sorted(b) and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and a and isinstance(a[0], str):
        return a == b
    if isinstance(a, list) and a and isinstance(a[0], (dict, list)):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


@pytest.fixture
def csv_files(tmp_path):
    names = []
    for i, text in enumerate(REFS["csv_files"]):
        p = tmp_path / f"f{i}.csv"
        p.write_text(text)
        names.append(str(p))
    return names


def test_make_csv_dataset_with_defaults_matches_tensorflow(csv_files):
    ds = X.make_csv_dataset(csv_files, batch_size=2, shuffle=False, num_epochs=1, column_defaults=["", 0, 0.0, 0])
    got = [py(b) for b in ds]
    assert close(got, REFS["make_csv_dataset"]["defaults_given"])
    assert list(next(iter(ds))) == ["name", "age", "height", "label"]


def test_make_csv_dataset_label_select_and_inference_match_tensorflow(csv_files):
    ds = X.make_csv_dataset(csv_files, batch_size=3, shuffle=False, num_epochs=1, label_name="label",
                            select_columns=["name", "height", "label"])
    got = [[py(f), py(lbl)] for f, lbl in ds]
    assert close(got, REFS["make_csv_dataset"]["label_and_select"])
    dtypes = {k: ("string" if v.dtype == object else v.dtype.name) for k, v in ds.element_spec[0].items()}
    assert dtypes == REFS["make_csv_dataset"]["label_and_select_dtypes"]
    inferred = X.make_csv_dataset(csv_files[1:], batch_size=2, shuffle=False, num_epochs=1).element_spec
    assert {k: ("string" if v.dtype == object else v.dtype.name) for k, v in inferred.items()} == \
        REFS["make_csv_dataset"]["inferred_dtypes"]


def test_make_csv_dataset_repeats_forever_with_full_batches_and_shuffles_by_seed(csv_files):
    ds = X.make_csv_dataset(csv_files, batch_size=4, shuffle=True, shuffle_seed=3, column_defaults=["", 0, 0.0, 0])
    assert ds.cardinality() == tpsd.INFINITE_CARDINALITY
    it = iter(ds)
    batches = [next(it) for _ in range(5)]
    assert all(len(b["name"]) == 4 for b in batches)
    names = sorted(n for b in batches for n in py(b["name"]))
    assert set(names) == {"ann", "bob", "cid", "d,q", "eve"}
    again = iter(X.make_csv_dataset(csv_files, batch_size=4, shuffle=True, shuffle_seed=3,
                                    column_defaults=["", 0, 0.0, 0]))
    assert py(next(again)["name"]) == py(batches[0]["name"])


def test_make_csv_dataset_resumes_and_names_bad_arguments(csv_files, tmp_path):
    ds = X.make_csv_dataset(csv_files, batch_size=2, num_epochs=3, shuffle=True, shuffle_seed=1,
                            column_defaults=["", 0, 0.0, 0])
    assert_iterator_checkpointing(ds, num_checkpoints=None)
    with pytest.raises(ValueError, match="no files match"):
        X.make_csv_dataset(str(tmp_path / "none-*.csv"), batch_size=2)
    with pytest.raises(ValueError, match="`label_name` 'nope' must be one of the columns"):
        X.make_csv_dataset(csv_files, batch_size=2, label_name="nope")
    with pytest.raises(ValueError, match="column_names must be given when header=False"):
        X.make_csv_dataset(csv_files, batch_size=2, header=False)


@pytest.fixture
def example_files(tmp_path):
    paths = []
    for f in range(2):
        p = str(tmp_path / f"e{f}.tfrecord")
        with tpsd.TFRecordWriter(p) as w:
            for i in range(5):
                v = f * 10 + i
                w.write(tpsd.make_example({"x": np.array([v, v + 0.5], np.float32), "y": np.int64(v % 3),
                                           "w": b"w%d" % v}).SerializeToString())
        paths.append(p)
    return paths


FEATURES = {"x": tpsd.FixedLenFeature([2], np.float32), "y": tpsd.FixedLenFeature([], np.int64),
            "w": tpsd.FixedLenFeature([], object)}


def test_make_batched_features_dataset_matches_tensorflow(example_files):
    ds = X.make_batched_features_dataset(example_files, 4, FEATURES, label_key="y", num_epochs=1, shuffle=False)
    got = [[py(f), py(lbl)] for f, lbl in ds]
    assert close(got, REFS["make_batched_features"]["batches"])


def test_make_batched_features_dataset_resumes_and_shards_by_file(example_files):
    ds = X.make_batched_features_dataset(example_files, 3, FEATURES, num_epochs=2, shuffle=True, shuffle_seed=5,
                                         shuffle_buffer_size=4)
    assert_iterator_checkpointing(ds, num_checkpoints=None)
    one = X.make_batched_features_dataset(example_files, 5, FEATURES, num_epochs=1, shuffle=False)
    parts = [[int(y) for b in X.auto_shard_dataset(one, 2, i) for y in b["y"]] for i in range(2)]
    assert parts == [[0, 1, 2, 0, 1], [1, 2, 0, 1, 2]]
    with pytest.raises(ValueError, match="`label_key` 'z' provided is not one of the `features` keys"):
        X.make_batched_features_dataset(example_files, 4, FEATURES, label_key="z")


def test_parse_example_dataset_parses_batches(example_files):
    ds = tpsd.TFRecordDataset(example_files).batch(4).apply(X.parse_example_dataset(
        {"y": tpsd.FixedLenFeature([], np.int64), "x": tpsd.VarLenFeature(np.float32)}, num_parallel_calls=2))
    first = next(iter(ds))
    assert first["y"].tolist() == [0, 1, 2, 0]
    values, lengths = first["x"]
    assert lengths.tolist() == [2, 2, 2, 2] and values[:2].tolist() == [0.0, 0.5]


def test_inferred_columns_take_a_default_for_missing_values_like_tensorflow(tmp_path):
    path = tmp_path / "na.csv"
    path.write_text(REFS["na_csv"])
    ds = X.make_csv_dataset(str(path), batch_size=5, na_value="?", num_epochs=1, shuffle=False, label_name="c")
    got = [[py(f), py(lbl)] for f, lbl in ds]
    assert close(got, REFS["make_csv_dataset"]["na_inferred"])
