"""Relative checkpoint paths work as in TensorFlow (orbax itself takes absolute paths only):
the path the user gave is the path the library reports."""

from __future__ import annotations

import numpy as np

import tpustrategy as tps


def test_write_restore_and_manager_with_relative_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        v = tps.Variable(np.arange(3, dtype=np.float32))
    ckpt = tps.train.Checkpoint(v=v)
    assert ckpt.write("rel_ckpt") == "rel_ckpt"
    v.assign(np.zeros(3, np.float32))
    ckpt.restore("rel_ckpt")
    np.testing.assert_array_equal(v.numpy(), [0, 1, 2])

    manager = tps.train.CheckpointManager(ckpt, "ckpts", max_to_keep=2)
    v.assign(np.full(3, 7, np.float32))
    assert manager.save() == "ckpts/ckpt-1"
    assert manager.latest_checkpoint == "ckpts/ckpt-1"
    assert tps.train.latest_checkpoint("ckpts") == "ckpts/ckpt-1"
    v.assign(np.zeros(3, np.float32))
    ckpt.restore(manager.latest_checkpoint)
    np.testing.assert_array_equal(v.numpy(), [7, 7, 7])
    assert (tmp_path / "ckpts").is_dir() and (tmp_path / "rel_ckpt").exists()
