"""``CheckpointManager(..., format="tensorflow")``: numbered TensorFlow checkpoints with TF's state file.

TensorFlow 2.21's ``CheckpointManager(ckpt, d, max_to_keep=2)`` after three
saves leaves ``ckpt-2`` and ``ckpt-3`` (``.index`` + ``.data-00000-of-00001``)
and a ``checkpoint`` file listing both, oldest first, with their timestamps and
``last_preserved_timestamp`` (``tools/check_tf_reads_ours.py`` checks that
TensorFlow reads ours so and saves on after them).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.checkpoint import manager as manager_lib
from tpustrategy._src.checkpoint.tf_format import bundle


def _objects():
    step = tps.Variable(np.int32(0))
    weights = tps.Variable(np.zeros(3, np.float32))
    return tps.train.Checkpoint(step=step, weights=weights), step, weights


def _saved(directory, count, **kwargs):
    ckpt, step, weights = _objects()
    manager = tps.train.CheckpointManager(ckpt, directory, format="tensorflow", **kwargs)
    for i in range(1, count + 1):
        step.assign(np.int32(i))
        weights.assign(np.full(3, i / 4, np.float32))
        manager.save()
    return manager


def test_numbered_saves_keep_tensorflows_history_and_max_to_keep(tmp_path):
    directory = str(tmp_path)
    manager = _saved(directory, 3, max_to_keep=2)
    assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
                                             "ckpt-3.data-00000-of-00001", "ckpt-3.index"]
    assert manager.checkpoints == [os.path.join(directory, "ckpt-2"), os.path.join(directory, "ckpt-3")]
    lines = open(os.path.join(directory, "checkpoint")).read().splitlines()
    assert lines[:3] == ['model_checkpoint_path: "ckpt-3"', 'all_model_checkpoint_paths: "ckpt-2"',
                         'all_model_checkpoint_paths: "ckpt-3"']
    assert [line.split(":")[0] for line in lines[3:]] == ["all_model_checkpoint_timestamps"] * 2 + [
        "last_preserved_timestamp"]
    state = tps.train.get_checkpoint_state(directory)
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-2", "ckpt-3"]
    assert tps.train.latest_checkpoint(directory) == os.path.join(directory, "ckpt-3")
    # TensorFlow's files: the values and the save counter under TensorFlow's keys
    reader = bundle.BundleReader(os.path.join(directory, "ckpt-3"))
    assert reader.get("step/.ATTRIBUTES/VARIABLE_VALUE") == 3
    assert reader.get("save_counter/.ATTRIBUTES/VARIABLE_VALUE") == 3
    np.testing.assert_array_equal(reader.get("weights/.ATTRIBUTES/VARIABLE_VALUE"), np.full(3, 0.75, np.float32))


def test_a_restarted_manager_finds_the_history_and_restores(tmp_path):
    directory = str(tmp_path)
    _saved(directory, 3, max_to_keep=2)
    ckpt, step, weights = _objects()
    restarted = tps.train.CheckpointManager(ckpt, directory, max_to_keep=2, format="tensorflow")
    assert restarted.checkpoints == [os.path.join(directory, "ckpt-2"), os.path.join(directory, "ckpt-3")]
    assert restarted.restore_or_initialize() == os.path.join(directory, "ckpt-3")
    assert int(step.numpy()) == 3 and ckpt.save_counter == 3
    np.testing.assert_array_equal(weights.numpy(), np.full(3, 0.75, np.float32))
    assert restarted.save() == os.path.join(directory, "ckpt-4")  # numbering goes on, ckpt-2 goes
    assert sorted(n for n in os.listdir(directory) if n.endswith(".index")) == ["ckpt-3.index", "ckpt-4.index"]


def test_keep_checkpoint_every_n_hours_preserves_tensorflow_checkpoints(tmp_path, monkeypatch):
    directory = str(tmp_path)
    now = [1_000_000.0]
    monkeypatch.setattr(manager_lib.time, "time", lambda: now[0])
    ckpt, step, _ = _objects()
    manager = tps.train.CheckpointManager(ckpt, directory, max_to_keep=1, keep_checkpoint_every_n_hours=1,
                                          format="tensorflow")
    for _ in range(4):  # saves 30 minutes apart: every second one is kept for good
        now[0] += 1800
        step.assign_add(1)
        manager.save()
    kept = sorted(n[: -len(".index")] for n in os.listdir(directory) if n.endswith(".index"))
    assert kept == ["ckpt-2", "ckpt-4"]  # ckpt-2 is an hour after the manager started; ckpt-4 the newest
    assert manager.checkpoints == [os.path.join(directory, "ckpt-4")]
    assert float(tps.train.get_checkpoint_state(directory).last_preserved_timestamp) == 1_000_000.0 + 3600


def test_the_format_per_save_overrides_the_managers(tmp_path):
    directory = str(tmp_path)
    ckpt, _, _ = _objects()
    manager = tps.train.CheckpointManager(ckpt, directory, max_to_keep=3)
    first = manager.save(format="tensorflow")
    second = manager.save()
    assert os.path.isfile(first + ".index") and os.path.isdir(second)
    assert manager.checkpoints == [first, second]
    ckpt.restore(first).assert_consumed()
    with pytest.raises(ValueError, match=r"format must be one of \('tpustrategy', 'tensorflow'\); received 'tf'"):
        manager.save(format="tf")
    with pytest.raises(ValueError, match="format must be one of"):
        tps.train.CheckpointManager(ckpt, directory, format="TensorFlow")


def test_data_left_without_its_index_is_removed_at_manager_start(tmp_path):
    directory = str(tmp_path)
    _saved(directory, 2, max_to_keep=3)
    os.remove(os.path.join(directory, "ckpt-2.index"))  # a save or deletion interrupted after the data
    open(os.path.join(directory, "ckpt-3.index.tps-tmp"), "wb").close()
    ckpt, _, _ = _objects()
    restarted = tps.train.CheckpointManager(ckpt, directory, max_to_keep=3, format="tensorflow")
    assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-1.data-00000-of-00001", "ckpt-1.index"]
    assert restarted.latest_checkpoint == os.path.join(directory, "ckpt-1")
