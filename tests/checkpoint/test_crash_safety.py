"""No completed save is lost at any crash point; leftovers are resolved; the clock never decides.

A crash is simulated at every file operation of a save (rename, replace,
rmtree, makedirs, fsync, copytree): from that call on every such operation
raises, as if the process had died there (not even cleanup code gets to run),
and the folder is then inspected as a restarted job would find it. A real
SIGKILL of a process that overwrites a checkpoint in a loop checks the same
on real timing.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tpustrategy as tps
from tests.checkpoint.crash_points import Crash, Killed
from tests.multiprocess.harness import REPO, clean_env
from tpustrategy._src.checkpoint import files
from tpustrategy.errors import PermissionDeniedError, ResourceExhaustedError

HERE = os.path.dirname(__file__)


def _state(value: float) -> tps.train.Checkpoint:
    return tps.train.Checkpoint(w=np.full(64, value, np.float32), step=int(value))


def _restored(path: str) -> float:
    ckpt = tps.train.Checkpoint(w=np.zeros(64, np.float32), step=-1)
    ckpt.restore(path).assert_consumed()
    assert ckpt.w.min() == ckpt.w.max() == ckpt.step  # never a mix of two saves
    return float(ckpt.step)


def _leftovers(directory: str) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(files.LEFTOVER_SUFFIXES))


def _count_calls(monkeypatch, action) -> int:
    crash = Crash(monkeypatch, None)
    action()
    crash.stop()
    return crash.calls


def _crash_during(monkeypatch, action, at: int) -> bool:
    crash = Crash(monkeypatch, at)
    try:
        action()
        finished = True
    except Killed:
        finished = False
    crash.stop()
    return finished


def test_writing_the_same_path_twice_never_leaves_it_unreachable(tmp_path, monkeypatch):
    path = str(tmp_path / "ckpt")
    _state(1).write(path)
    total = _count_calls(monkeypatch, lambda: _state(1).write(path))
    assert total >= 5
    between_the_renames = 0
    for at in range(1, total + 1):
        _state(1).write(path)
        finished = _crash_during(monkeypatch, lambda: _state(2).write(path), at)
        between_the_renames += not os.path.exists(path) and os.path.isdir(files.old_path(path))
        got = _restored(path)  # the old copy or the new one: never NotFoundError
        assert got == 2 if finished else got in (1, 2), at
        _state(3).write(path)  # the next write resolves every leftover
        assert _restored(path) == 3 and _leftovers(str(tmp_path)) == [], at
    assert between_the_renames >= 1  # the moment the issue found: only path.tps-old on disk


@pytest.mark.parametrize("max_to_keep", [1, 2])
def test_saving_the_same_number_twice_never_loses_it(tmp_path, monkeypatch, max_to_keep):
    directory = str(tmp_path)
    first = tps.train.CheckpointManager(_state(1), directory, max_to_keep=max_to_keep)
    first.save(checkpoint_number=5)
    total = _count_calls(monkeypatch, lambda: first.save(checkpoint_number=5))
    for at in range(1, total + 1):
        tps.train.CheckpointManager(_state(1), directory, max_to_keep=max_to_keep).save(checkpoint_number=5)
        manager = tps.train.CheckpointManager(_state(2), directory, max_to_keep=max_to_keep)
        finished = _crash_during(monkeypatch, lambda m=manager: m.save(checkpoint_number=5), at)
        latest = tps.train.latest_checkpoint(directory)
        assert latest == os.path.join(directory, "ckpt-5"), at
        assert _restored(latest) == 2 if finished else _restored(latest) in (1, 2)
        restarted = tps.train.CheckpointManager(_state(0), directory, max_to_keep=max_to_keep)
        assert _leftovers(directory) == [] and restarted.latest_checkpoint == latest, at
        assert restarted.restore_or_initialize() == latest


def test_a_crash_in_a_save_or_its_cleanup_keeps_the_newest_completed_one(tmp_path, monkeypatch):
    directory = str(tmp_path)

    def fresh() -> tps.train.CheckpointManager:
        shutil.rmtree(directory)
        manager = tps.train.CheckpointManager(_state(1), directory, max_to_keep=2)
        for value in (1, 2, 3):
            manager._checkpoint.w[:] = value
            manager._checkpoint.step = value
            manager.save()
        return manager

    manager = fresh()
    manager._checkpoint.w[:] = 4
    manager._checkpoint.step = 4
    total = _count_calls(monkeypatch, manager.save)
    for at in range(1, total + 1):
        manager = fresh()
        manager._checkpoint.w[:] = 4
        manager._checkpoint.step = 4
        finished = _crash_during(monkeypatch, manager.save, at)
        latest = tps.train.latest_checkpoint(directory)
        assert latest == os.path.join(directory, "ckpt-4" if finished else os.path.basename(latest)), at
        assert os.path.basename(latest) in ("ckpt-3", "ckpt-4")
        assert _restored(latest) == int(latest.rsplit("-", 1)[1])
        restarted = tps.train.CheckpointManager(_state(0), directory, max_to_keep=2)
        assert _leftovers(directory) == [], at
        assert restarted.latest_checkpoint == latest
        restarted._checkpoint.restore(latest)
        assert restarted.save() == os.path.join(directory, f"ckpt-{int(latest.rsplit('-', 1)[1]) + 1}")
        kept = sorted(n for n in os.listdir(directory) if n.startswith("ckpt-"))
        assert len(kept) <= 3 and _leftovers(directory) == []


def test_latest_follows_the_save_order_not_the_clock(tmp_path, monkeypatch):
    import tpustrategy._src.checkpoint.files as files_lib
    import tpustrategy._src.checkpoint.manager as manager_lib

    directory = str(tmp_path)
    manager = tps.train.CheckpointManager(_state(1), directory, max_to_keep=2)
    manager.save()
    manager.save()
    behind = time.time() - 3600
    monkeypatch.setattr(manager_lib.time, "time", lambda: behind)  # the clock jumped back an hour
    monkeypatch.setattr(files_lib.time, "time_ns", lambda: int(behind * 1e9))
    newest = manager.save()
    assert tps.train.latest_checkpoint(directory) == newest == os.path.join(directory, "ckpt-3")
    restarted = tps.train.CheckpointManager(_state(0), directory, max_to_keep=2)
    assert restarted.restore_or_initialize() == newest  # save_counter 3 again
    restarted.save()  # deletes ckpt-2, the oldest kept, never the newest
    assert sorted(n for n in os.listdir(directory) if n.startswith("ckpt")) == ["ckpt-3", "ckpt-4"]
    state = open(os.path.join(directory, "checkpoint")).read()
    assert state.startswith('model_checkpoint_path: "ckpt-4"\nall_model_checkpoint_paths: "ckpt-3"\n'
                            'all_model_checkpoint_paths: "ckpt-4"\n')


def test_without_a_state_file_the_highest_number_is_the_latest(tmp_path):
    directory = str(tmp_path)
    manager = tps.train.CheckpointManager(_state(1), directory, max_to_keep=None)
    for number in (2, 10, 9):
        manager.save(checkpoint_number=number)
    assert tps.train.latest_checkpoint(directory).endswith("ckpt-9")  # the state file names the last save
    os.remove(os.path.join(directory, "checkpoint"))
    assert tps.train.latest_checkpoint(directory).endswith("ckpt-10")
    with open(os.path.join(directory, "checkpoint"), "w") as f:
        f.write("model_checkpoint_path: ckpt-9 garbage\n")  # unreadable: ordered by number, warned
    assert tps.train.latest_checkpoint(directory).endswith("ckpt-10")


def test_a_commit_just_before_a_crash_is_newer_than_the_state_file(tmp_path):
    directory = str(tmp_path)
    manager = tps.train.CheckpointManager(_state(1), directory, max_to_keep=3)
    manager.save()
    state = open(os.path.join(directory, "checkpoint")).read()
    manager.save()  # committed; then the state file is put back as if the crash came before it
    with open(os.path.join(directory, "checkpoint"), "w") as f:
        f.write(state)
    assert tps.train.latest_checkpoint(directory).endswith("ckpt-2")
    assert tps.train.CheckpointManager(_state(0), directory).checkpoints[-1].endswith("ckpt-2")


def test_checkpoint_save_writes_tensorflows_state_file(tmp_path):
    prefix = str(tmp_path / "ckpt")
    ckpt = _state(1)
    ckpt.save(prefix)
    ckpt.save(prefix)
    lines = open(tmp_path / "checkpoint").read().splitlines()
    assert lines[:2] == ['model_checkpoint_path: "ckpt-2"', 'all_model_checkpoint_paths: "ckpt-2"']
    assert len(lines) == 3 and lines[2].startswith("all_model_checkpoint_timestamps: ")
    moved = tmp_path / "moved"
    shutil.copytree(tmp_path, moved, ignore=shutil.ignore_patterns("moved"))
    assert tps.train.latest_checkpoint(str(moved)) == os.path.join(str(moved), "ckpt-2")  # relative paths


def test_leftovers_of_every_kind_are_resolved_at_manager_start(tmp_path):
    directory = str(tmp_path)
    manager = tps.train.CheckpointManager(_state(1), directory, max_to_keep=5)
    for _ in range(3):
        manager.save()
    os.rename(os.path.join(directory, "ckpt-3"), os.path.join(directory, "ckpt-3.tps-old"))  # mid-overwrite
    shutil.copytree(os.path.join(directory, "ckpt-1"), os.path.join(directory, "ckpt-1.tps-old"))  # stale
    os.rename(os.path.join(directory, "ckpt-2"), os.path.join(directory, "ckpt-2.tps-deleting"))
    os.makedirs(os.path.join(directory, "ckpt-4.tps-tmp", "arrays"))
    assert tps.train.latest_checkpoint(directory) == os.path.join(directory, "ckpt-3")
    assert _restored(os.path.join(directory, "ckpt-3")) == 1  # read from ckpt-3.tps-old
    restarted = tps.train.CheckpointManager(_state(0), directory, max_to_keep=5)
    assert _leftovers(directory) == []
    assert restarted.checkpoints == [os.path.join(directory, f"ckpt-{i}") for i in (1, 3)]
    assert _restored(os.path.join(directory, "ckpt-3")) == 1


@pytest.mark.parametrize("code, error", [(errno.ENOSPC, ResourceExhaustedError),
                                         (errno.EDQUOT, ResourceExhaustedError),
                                         (errno.EACCES, PermissionDeniedError),
                                         (errno.EROFS, PermissionDeniedError)])
def test_a_full_disk_or_unwritable_folder_is_named_and_leaves_nothing(tmp_path, monkeypatch, code, error):
    import tpustrategy._src.checkpoint.arrays as arrays_lib

    directory = str(tmp_path)
    manager = tps.train.CheckpointManager(_state(1), directory, max_to_keep=2)
    manager.save()
    real_save = arrays_lib.save

    def failing(folder, data, api):
        real_save(folder, data, api)  # some files are written, then the disk fills up
        raise OSError(code, os.strerror(code), os.path.join(folder, "d"))

    monkeypatch.setattr(arrays_lib, "save", failing)
    manager._checkpoint.step = 2
    with pytest.raises(error, match=rf"(?s)CheckpointManager.save: .*{os.path.join(directory, 'ckpt-2')}.*Fix:"):
        manager.save()
    assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-1"]  # the temporary folder was removed
    assert _restored(manager.latest_checkpoint) == 1


def test_tensorstores_resource_exhausted_is_translated(tmp_path, monkeypatch):
    import tpustrategy._src.checkpoint.arrays as arrays_lib

    def failing(folder, data, api):
        raise ValueError("RESOURCE_EXHAUSTED: Error writing local file \"/x/d/abc\": No space left on device")

    monkeypatch.setattr(arrays_lib, "save", failing)
    with pytest.raises(ResourceExhaustedError, match="disk is full"):
        _state(1).write(str(tmp_path / "c"))
    assert os.listdir(tmp_path) == []


def test_a_read_only_folder_raises_permission_denied(tmp_path):
    directory = tmp_path / "ro"
    directory.mkdir()
    os.chmod(directory, 0o500)
    try:
        if os.access(directory, os.W_OK):
            pytest.skip("running as root: chmod does not stop writes (the patched test covers it)")
        with pytest.raises(PermissionDeniedError, match=str(directory)):
            _state(1).save(str(directory / "ckpt"))
    finally:
        os.chmod(directory, 0o700)


def test_a_real_kill_during_overwrites_never_loses_the_checkpoint(tmp_path):
    path = str(tmp_path / "ckpt")
    env = clean_env()
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    for delay in (0.0, 0.05, 0.3):
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "worker_overwrite.py"), path],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline().strip()
            assert line.startswith("WROTE"), proc.stderr.read()
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline and not os.path.exists(files.old_path(path)):
                time.sleep(0.0005)
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        ckpt = tps.train.Checkpoint(big=np.zeros(4 * 1024 * 1024, np.float32), step=-1)
        ckpt.restore(path).assert_consumed()
        assert ckpt.step >= 1 and ckpt.big.min() == ckpt.big.max() == ckpt.step
