"""An overwrite killed at any file operation leaves the previous or the new checkpoint, complete.

Every kill point of ``Checkpoint.write(path)`` over an existing checkpoint
(and of ``CheckpointManager.save(checkpoint_number=N)`` over ``ckpt-N``) is
enumerated: from that operation on every file operation raises, as if the
process had died there -- including the single unlinks and rmdirs inside a
folder's deletion, so half-deleted folders are among the states. After each,
``restore(path)``, ``load_checkpoint(path)`` and ``latest_checkpoint`` must
find one complete checkpoint (never a mix, never nothing), reading must
change nothing on disk, and the next write must resolve every leftover. A
real ``os._exit`` at points of the commit checks the same across processes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tpustrategy as tps
from tests.checkpoint import crash_points
from tests.checkpoint.crash_points import Killed
from tests.multiprocess.harness import REPO, clean_env
from tpustrategy._src.checkpoint import files

HERE = os.path.dirname(__file__)


class Crash(crash_points.Crash):
    """Also the single unlinks and rmdirs inside a folder's deletion."""

    OPS = [(os, "rename"), (os, "replace"), (os, "makedirs"), (os, "mkdir"), (os, "fsync"),
           (os, "unlink"), (os, "remove"), (os, "rmdir"), (shutil, "rmtree"), (shutil, "copytree")]


def _state(value: int) -> tps.train.Checkpoint:
    return tps.train.Checkpoint(w=np.full(256, value, np.float32), v=np.arange(7) * value, step=value)


def _restored(path: str) -> int:
    ckpt = tps.train.Checkpoint(w=np.zeros(256, np.float32), v=np.zeros(7, np.int64), step=-1)
    ckpt.restore(path).assert_consumed()
    step = ckpt.step
    assert step in (1, 2, 3)
    np.testing.assert_array_equal(ckpt.w, np.full(256, step, np.float32))  # never a mix of two saves
    np.testing.assert_array_equal(ckpt.v, np.arange(7) * step)
    reader = tps.train.load_checkpoint(path)  # TensorFlow's reader finds the same copy
    assert int(reader.get_tensor("step")) == step
    return step


def _listing(directory: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, n), directory)
                  for d, dirs, names in os.walk(directory) for n in names + dirs)


def _leftovers(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(files.LEFTOVER_SUFFIXES))


def _crash_during(monkeypatch, action, at: int | None) -> tuple[bool, int]:
    crash = Crash(monkeypatch, at)
    try:
        action()
        finished = True
    except Killed:
        finished = False
    crash.stop()
    return finished, crash.calls


def test_every_kill_point_of_an_overwrite_leaves_one_complete_checkpoint(tmp_path, monkeypatch):
    path = str(tmp_path / "latest")
    _state(1).write(path)
    finished, total = _crash_during(monkeypatch, lambda: _state(1).write(path), None)
    assert finished and total >= 15  # renames, fsyncs and the old copy's files one by one
    states = set()
    for at in range(1, total + 2):
        shutil.rmtree(tmp_path)
        os.makedirs(tmp_path)
        _state(1).write(path)
        finished, _ = _crash_during(monkeypatch, lambda: _state(2).write(path), at)
        states.add(tuple(n for n in os.listdir(tmp_path)))
        before = _listing(str(tmp_path))
        got = _restored(path)
        assert got == 2 if finished else got in (1, 2), at
        assert _listing(str(tmp_path)) == before, at  # reading changed nothing
        _state(3).write(path)  # the next write resolves every leftover
        assert _restored(path) == 3 and _leftovers(str(tmp_path)) == [], at
    # the states that matter were reached: only the old copy, both copies, a half-deleted old one
    assert ("latest.tps-old", "latest.tps-tmp") in {tuple(sorted(s)) for s in states}
    assert ("latest", "latest.tps-old") in {tuple(sorted(s)) for s in states}


def test_every_kill_point_of_a_numbered_overwrite_keeps_latest_checkpoint(tmp_path, monkeypatch):
    directory = str(tmp_path)
    path = os.path.join(directory, "ckpt-5")
    tps.train.CheckpointManager(_state(1), directory, max_to_keep=2).save(checkpoint_number=5)
    manager = tps.train.CheckpointManager(_state(1), directory, max_to_keep=2)
    finished, total = _crash_during(monkeypatch, lambda: manager.save(checkpoint_number=5), None)
    assert finished
    for at in range(1, total + 2):
        tps.train.CheckpointManager(_state(1), directory, max_to_keep=2).save(checkpoint_number=5)
        manager = tps.train.CheckpointManager(_state(2), directory, max_to_keep=2)
        finished, _ = _crash_during(monkeypatch, lambda m=manager: m.save(checkpoint_number=5), at)
        assert tps.train.latest_checkpoint(directory) == path, at
        got = _restored(path)
        assert got == 2 if finished else got in (1, 2), at
        restarted = tps.train.CheckpointManager(_state(0), directory, max_to_keep=2)  # resolves leftovers
        assert _leftovers(directory) == [] and restarted.latest_checkpoint == path, at
        assert _restored(path) == got, at  # the copy kept is the one that was read


def test_a_commit_that_only_left_its_temporary_copy_is_found_and_kept(tmp_path, monkeypatch):
    # the previous copy is gone (deleted by hand, say) and the new one sits committed in .tps-tmp
    path = str(tmp_path / "latest")
    _state(2).write(path)
    os.rename(path, files.tmp_path(path))
    assert _restored(path) == 2 and tps.train.list_variables(path)
    assert os.listdir(tmp_path) == ["latest.tps-tmp"]  # reading left it where it is
    snapshot = str(tmp_path.parent / "snapshot")
    shutil.copytree(tmp_path, snapshot)
    for at in range(1, 8):  # a write killed early must not delete the only copy
        shutil.rmtree(tmp_path)
        shutil.copytree(snapshot, tmp_path)
        finished, _ = _crash_during(monkeypatch, lambda: _state(3).write(path), at)
        assert not finished and _restored(path) == 2, at
    shutil.rmtree(snapshot)


@pytest.mark.parametrize("at", [5, 6, 7, 10])
def test_a_real_kill_in_the_commit_leaves_one_complete_checkpoint(tmp_path, at):
    # commit operations (worker_kill_point.py, AT=0 lists them): 1-3 the manifest and its fsyncs,
    # 4 the rename of the previous copy to .tps-old, 5 its fsync, 6 the rename of .tps-tmp into
    # place, 7 its fsync, 8 on: the previous copy's deletion (manifest first, then file by file)
    path = str(tmp_path / "latest")
    env = clean_env()
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    proc = subprocess.run([sys.executable, os.path.join(HERE, "worker_kill_point.py"), path, str(at)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 75 and "DONE" not in proc.stdout, (proc.returncode, proc.stderr[-2000:])
    before = _listing(str(tmp_path))
    got = _restored(path)
    assert got in (1, 2)
    if at <= 6:
        assert got == 1 and "latest.tps-tmp" in os.listdir(tmp_path)
    else:
        assert got == 2
    assert _listing(str(tmp_path)) == before
    _state(3).write(path)
    assert _restored(path) == 3 and _leftovers(str(tmp_path)) == []
