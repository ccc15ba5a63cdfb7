"""The ``checkpoint`` state file: TensorFlow's text format, read and written byte for byte."""

from __future__ import annotations

import os
import shutil

import pytest

import tpustrategy as tps
from tpustrategy._src.checkpoint import state_file

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tf")


def test_a_state_file_written_by_tensorflow_round_trips_byte_for_byte():
    path = os.path.join(FIXTURES, "manager", "checkpoint")  # written by tf.train.CheckpointManager
    text = open(path).read()
    state = state_file.parse(text)
    assert state.model_checkpoint_path == "ckpt-3"
    assert state.all_model_checkpoint_paths == ["ckpt-2", "ckpt-3"]
    assert len(state.all_model_checkpoint_timestamps) == 2 and state.last_preserved_timestamp is not None
    assert state_file.format_state(state) == text


def test_reading_makes_paths_absolute_and_latest_checkpoint_follows_it(tmp_path):
    directory = str(tmp_path / "manager")
    shutil.copytree(os.path.join(FIXTURES, "manager"), directory)
    state = state_file.read(directory)
    assert state.model_checkpoint_path == os.path.join(directory, "ckpt-3")
    assert tps.train.latest_checkpoint(directory) == os.path.join(directory, "ckpt-3")


def test_writing_is_relative_inside_the_folder_and_leaves_no_temporary(tmp_path):
    directory = str(tmp_path)
    elsewhere = "/other/place/ckpt-9"
    state_file.write(directory, os.path.join(directory, "ckpt-2"), [os.path.join(directory, "ckpt-1"), elsewhere],
                     [1.5, 2.5], 0.5)
    assert open(tmp_path / "checkpoint").read() == (
        'model_checkpoint_path: "ckpt-2"\n'
        'all_model_checkpoint_paths: "ckpt-1"\n'
        'all_model_checkpoint_paths: "/other/place/ckpt-9"\n'
        'all_model_checkpoint_paths: "ckpt-2"\n'  # the latest is appended when missing, as in TF
        "all_model_checkpoint_timestamps: 1.5\n"
        "all_model_checkpoint_timestamps: 2.5\n"
        "last_preserved_timestamp: 0.5\n")
    assert os.listdir(directory) == ["checkpoint"]


def test_escapes_round_trip():
    name = 'we"ird\\näme\n'
    text = state_file.format_state(state_file.CheckpointState(name, [name]))
    assert state_file.parse(text).model_checkpoint_path == name
    assert state_file.parse("model_checkpoint_path: 'single'  # a comment\n").model_checkpoint_path == "single"


@pytest.mark.parametrize("text, match", [
    ("model_checkpoint_path ckpt-1\n", "not 'field: value'"),
    ("model_checkpoint_path: ckpt-1\n", "must be a quoted string"),
    ('unknown_field: "x"\n', "unknown field 'unknown_field'"),
    ("all_model_checkpoint_timestamps: soon\n", "bad value 'soon'"),
])
def test_malformed_files_are_named_errors(text, match):
    with pytest.raises(state_file.StateFileError, match=match):
        state_file.parse(text, "the file")
