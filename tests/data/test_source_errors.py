"""Every user-facing error of the new sources names the API and argument, what it got and the fix."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.errors import InvalidArgumentError

D = tpsd.Dataset
X = tpsd.experimental


def test_counter_and_random_reject_bad_arguments():
    with pytest.raises(TypeError, match="Dataset.counter: start must be an int; received str"):
        D.counter("0")
    with pytest.raises(TypeError, match="Dataset.counter: dtype must be a numeric dtype"):
        D.counter(dtype=object)
    with pytest.raises(TypeError, match="Dataset.random: seed must be an int or None; received float"):
        D.random(seed=1.5)
    with pytest.raises(TypeError, match="rerandomize_each_iteration must be a bool or None"):
        D.random(seed=1, rerandomize_each_iteration="yes")


def test_sampling_rejects_bad_weights_and_datasets():
    with pytest.raises(ValueError, match="shape of `weights` should be compatible"):
        D.sample_from_datasets([D.range(2), D.range(3)], weights=np.ones((2, 1)))
    with pytest.raises(ValueError, match="Every weight must be finite"):
        D.sample_from_datasets([D.range(2), D.range(3)], weights=[np.inf, 1.0])
    with pytest.raises(TypeError, match=r"datasets\[1\] must be a Dataset; received int"):
        D.sample_from_datasets([D.range(2), 3])
    with pytest.raises(TypeError, match="`datasets` must be a list of Datasets"):
        D.sample_from_datasets(D.range(2))
    with pytest.raises(TypeError, match="choice dataset must produce int64 scalars"):
        list(D.choose_from_datasets([D.range(2)], D.from_generator(lambda: iter([b"x"]))))


def test_a_foreign_state_is_refused_with_the_fix():
    it = iter(D.sample_from_datasets([D.range(3), D.range(3)], seed=1))
    state = it.get_state()
    state["pipeline"]["inputs"] = state["pipeline"]["inputs"][:1]
    with pytest.raises(ValueError, match="the state has 1 inputs but this Dataset.sample_from_datasets has 2"):
        iter(D.sample_from_datasets([D.range(3), D.range(3)], seed=1)).set_state(state)
    with pytest.raises(ValueError, match="set_state: the state for the random iterator must be a dict"):
        iter(D.random(seed=1)).set_state({"iteration": 0, "done": False, "pipeline": {"x": 1}})


def test_csv_arguments_are_checked(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("1,2\n")
    with pytest.raises(ValueError, match="field_delim must be one character"):
        X.CsvDataset(str(path), record_defaults=[[0]] * 2, field_delim=";;")
    with pytest.raises(ValueError, match="record_defaults must be a non-empty list"):
        X.CsvDataset(str(path), record_defaults=[])
    with pytest.raises(ValueError, match=r"record_defaults\[0\] must have at most one element"):
        X.CsvDataset(str(path), record_defaults=[[1, 2]])
    with pytest.raises(TypeError, match=r"record_defaults\[0\] must be int, float or string; received a bool"):
        X.CsvDataset(str(path), record_defaults=[True])
    with pytest.raises(TypeError, match=r"record_defaults\[0\] must be a one-element list"):
        X.CsvDataset(str(path), record_defaults=[object()])
    with pytest.raises(TypeError, match=r"record_defaults\[0\] has dtype complex64"):
        X.CsvDataset(str(path), record_defaults=[np.complex64])
    with pytest.raises(ValueError, match="select_cols has 1 columns but record_defaults has 2 entries"):
        X.CsvDataset(str(path), record_defaults=[[0]] * 2, select_cols=[0])
    with pytest.raises(InvalidArgumentError, match="select_cols must be non-negative and strictly increasing"):
        X.CsvDataset(str(path), record_defaults=[[0]] * 2, select_cols=[1, 0])
    with pytest.raises(InvalidArgumentError, match="Quoted field has to end with quote"):
        p2 = tmp_path / "b.csv"
        p2.write_text('"abc\n')
        list(X.CsvDataset(str(p2), record_defaults=[[""]]))


def test_make_csv_dataset_checks_its_columns(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("a,a\n1,2\n")
    with pytest.raises(ValueError, match="column names must be unique"):
        X.make_csv_dataset(str(path), batch_size=1)
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="select_columns .* name columns that are not in"):
        X.make_csv_dataset(str(path), batch_size=1, select_columns=["z"])
    with pytest.raises(ValueError, match="column_defaults has 1 entries for 2 columns"):
        X.make_csv_dataset(str(path), batch_size=1, column_defaults=[0])
    empty = tmp_path / "e.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="cannot read the header of .*: the file is empty"):
        X.make_csv_dataset(str(empty), batch_size=1)


def test_save_load_and_snapshot_arguments_are_checked(tmp_path):
    with pytest.raises(TypeError, match="Dataset.save: path must be a str or os.PathLike; received int"):
        D.range(2).save(3)
    with pytest.raises(ValueError, match="shard_func returned -1; shard indices must be >= 0"):
        D.range(2).save(str(tmp_path / "neg"), shard_func=lambda x: np.int64(-1))
    with pytest.raises(TypeError, match="Dataset.load: path must be a str or os.PathLike"):
        D.load(None)
    D.range(2).save(str(tmp_path / "ok"))
    with pytest.raises(TypeError, match="reader_func must return a Dataset; received list"):
        D.load(str(tmp_path / "ok"), reader_func=lambda shards: [])
    meta = json.loads((tmp_path / "ok" / "dataset_spec.json").read_text())
    meta["format"] = "other-9"
    (tmp_path / "ok" / "dataset_spec.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="holds format 'other-9'; this version reads 'tpsd-save-1'"):
        D.load(str(tmp_path / "ok"))
    with pytest.raises(TypeError, match="Dataset.snapshot: path must be a str or os.PathLike"):
        D.range(2).snapshot(5)


def test_optional_helpers_and_tables_report_misuse():
    with pytest.raises(ValueError, match="at: index must be a non-negative int; received -1"):
        X.at(D.range(3), -1)
    with pytest.raises(TypeError, match="cardinality: `dataset` must be a Dataset; received list"):
        X.cardinality([1, 2])
    with pytest.raises(TypeError, match="rejection_resample: class_func must be callable"):
        D.range(3).rejection_resample(3, [0.5, 0.5])
    with pytest.raises(TypeError, match="class_func must return an integer scalar"):
        list(D.range(3).rejection_resample(lambda x: 0.5, [0.5, 0.5], initial_dist=[0.5, 0.5]))
