"""CheckpointManager: numbering, keeping, finding again after a restart, intervals."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tpustrategy as tps


def test_the_guide_loop_keeps_the_last_three_and_finds_them_after_a_restart(tmp_path):
    directory = str(tmp_path / "tf_ckpts")
    with tps.MirroredStrategy().scope():
        step = tps.Variable(1)
    ckpt = tps.train.Checkpoint(step=step, weights=np.zeros(2))
    manager = tps.train.CheckpointManager(ckpt, directory, max_to_keep=3)
    assert ckpt.restore(manager.latest_checkpoint) is not None and manager.latest_checkpoint is None
    saved = []
    for _ in range(50):
        step.assign_add(1)
        if int(step) % 10 == 0:
            saved.append(manager.save())
    assert saved == [os.path.join(directory, f"ckpt-{i}") for i in range(1, 6)]
    assert manager.checkpoints == saved[-3:]
    assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-3", "ckpt-4", "ckpt-5"]  # TF writes the state file too
    # A new process: a new Checkpoint and manager over the same folder.
    with tps.MirroredStrategy().scope():
        step2 = tps.Variable(1)
    ckpt2 = tps.train.Checkpoint(step=step2, weights=np.zeros(2))
    manager2 = tps.train.CheckpointManager(ckpt2, directory, max_to_keep=3)
    assert manager2.latest_checkpoint == saved[-1] and manager2.checkpoints == saved[-3:]
    ckpt2.restore(manager2.latest_checkpoint).assert_consumed()
    assert int(step2) == 50 and ckpt2.save_counter == 5
    assert tps.train.latest_checkpoint(directory) == saved[-1]
    assert manager2.save() == os.path.join(directory, "ckpt-6")


def test_checkpoint_number_names_the_checkpoint(tmp_path):
    manager = tps.train.CheckpointManager(tps.train.Checkpoint(x=np.ones(1)), str(tmp_path), max_to_keep=None)
    with tps.MirroredStrategy().scope():
        global_step = tps.Variable(1000)
    assert manager.save(checkpoint_number=global_step) == os.path.join(str(tmp_path), "ckpt-1000")
    assert manager.save(checkpoint_number=7) == os.path.join(str(tmp_path), "ckpt-7")
    assert manager.latest_checkpoint.endswith("ckpt-7") and manager.checkpoint.save_counter == 2
    assert len(manager.checkpoints) == 2


def test_checkpoint_interval_skips_saves_until_the_step_advanced_enough(tmp_path):
    ckpt = tps.train.Checkpoint(x=np.ones(1))
    step = {"value": 0}
    manager = tps.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=None,
                                          step_counter=lambda: step["value"], checkpoint_interval=5)
    saved = []
    for i in range(13):
        step["value"] = i
        saved.append(manager.save() is not None)
    assert [i for i, s in enumerate(saved) if s] == [0, 5, 10]
    assert manager.save() is None  # step 12: only 2 steps after the last save
    assert manager.save(check_interval=False).endswith("ckpt-4")  # forced
    assert manager.save(check_interval=False) is None  # but never twice at one step


def test_checkpoint_interval_without_a_step_counter_says_what_to_pass(tmp_path):
    with pytest.raises(ValueError, match="`step_counter` should be passed if `checkpoint_interval` is not None"):
        tps.train.CheckpointManager(tps.train.Checkpoint(x=np.ones(1)), str(tmp_path), checkpoint_interval=10)


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_max_to_keep_must_be_a_positive_int_or_none(tmp_path, bad):
    with pytest.raises(ValueError, match=r"expected a positive integer or `None` for `max_to_keep`"):
        tps.train.CheckpointManager(tps.train.Checkpoint(x=np.ones(1)), str(tmp_path), max_to_keep=bad)


def test_a_manager_needs_a_checkpoint(tmp_path):
    with pytest.raises(TypeError, match="checkpoint must be a tps.train.Checkpoint; received dict"):
        tps.train.CheckpointManager({"x": 1}, str(tmp_path))


def test_restore_or_initialize_runs_init_fn_once_then_restores(tmp_path):
    calls = []
    ckpt = tps.train.Checkpoint(step=0)
    manager = tps.train.CheckpointManager(ckpt, str(tmp_path), init_fn=lambda: calls.append(1))
    assert manager.restore_or_initialize() is None and calls == [1]
    ckpt.step = 9
    path = manager.save()
    ckpt.step = 0
    again = tps.train.CheckpointManager(ckpt, str(tmp_path), init_fn=lambda: calls.append(2))
    assert again.restore_or_initialize() == path and ckpt.step == 9 and calls == [1]


def test_managers_with_different_names_share_a_folder_without_touching_each_other(tmp_path):
    a = tps.train.CheckpointManager(tps.train.Checkpoint(x=np.ones(1)), str(tmp_path), max_to_keep=1,
                                    checkpoint_name="a")
    b = tps.train.CheckpointManager(tps.train.Checkpoint(x=np.ones(1)), str(tmp_path), max_to_keep=1,
                                    checkpoint_name="b")
    for _ in range(3):
        a.save()
    b.save()
    assert sorted(os.listdir(tmp_path)) == ["a-3", "b-1", "checkpoint"]
    assert tps.train.latest_checkpoint(str(tmp_path)) == os.path.join(str(tmp_path), "b-1")


def test_keep_checkpoint_every_n_hours_preserves_old_checkpoints(tmp_path, monkeypatch):
    import tpustrategy._src.checkpoint.manager as manager_lib

    clock = {"t": 1_000_000.0}
    monkeypatch.setattr(manager_lib.time, "time", lambda: clock["t"])
    manager = tps.train.CheckpointManager(tps.train.Checkpoint(x=np.ones(1)), str(tmp_path),
                                          max_to_keep=1, keep_checkpoint_every_n_hours=1)
    for _ in range(6):
        clock["t"] += 1800  # half an hour between saves
        manager.save()
    # ckpt-2 (1 h after start) and ckpt-4 (1 h after ckpt-2) are preserved; ckpt-6 is the latest.
    assert sorted(os.listdir(tmp_path)) == ["checkpoint", "ckpt-2", "ckpt-4", "ckpt-6"]
    assert manager.checkpoints == [os.path.join(str(tmp_path), "ckpt-6")]
