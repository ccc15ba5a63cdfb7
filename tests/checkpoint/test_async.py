"""Asynchronous saves: the call returns before the files are written, and everything waits for it.

The background part is held back with an event (patched into the commit), so
each test knows the save is still in flight: no test depends on timing.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time

import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tests.multiprocess.harness import REPO, clean_env
from tpustrategy._src.checkpoint import asynchronous, files
from tpustrategy.errors import ResourceExhaustedError

HERE = os.path.dirname(__file__)
ASYNC = tps.train.CheckpointOptions(enable_async=True)


@pytest.fixture
def held(monkeypatch):
    """Holds every commit until ``release`` is set; records the commits in order."""
    release, commits = threading.Event(), []
    real = files.commit

    def commit(tmp, path, manifest):
        assert release.wait(120), "the test never released the commit"
        real(tmp, path, manifest)
        commits.append(os.path.basename(path))

    monkeypatch.setattr(files, "commit", commit)
    yield release, commits
    release.set()
    asynchronous.wait_all()


def _model():
    with tps.MirroredStrategy().scope():
        w = tps.Variable(np.arange(64, dtype=np.float32))
    return w


def test_the_save_returns_before_the_checkpoint_is_written(tmp_path, held):
    release, commits = held
    w = _model()
    ckpt = tps.train.Checkpoint(w=w, step=1)
    manager = tps.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=2)
    path = manager.save(options=ASYNC)
    assert path == str(tmp_path / "ckpt-1") and manager.latest_checkpoint == path
    assert not os.path.exists(path) and os.path.isdir(files.tmp_path(path))  # still being written
    assert asynchronous.in_flight()
    w.assign(w * 3)  # the training loop goes on meanwhile
    ckpt.step = 2
    release.set()
    manager.sync()
    assert commits == ["ckpt-1"] and os.path.isdir(path) and not asynchronous.in_flight()
    fresh = tps.train.Checkpoint(w=_model(), step=0)
    fresh.restore(path).assert_consumed()
    assert fresh.w.numpy().tolist() == list(range(64)) and fresh.step == 1  # the values at the save
    assert open(tmp_path / "checkpoint").read().startswith('model_checkpoint_path: "ckpt-1"')


def test_arrays_are_copied_before_the_save_returns(tmp_path, held):
    release, _ = held
    table = np.arange(10.0)
    device = jnp.arange(8.0)
    ckpt = tps.train.Checkpoint(table=table, device=device)
    path = ckpt.save(str(tmp_path / "ckpt"), options=ASYNC)
    table[:] = -1  # changed in place ...
    device.delete()  # ... and freed (as a donated buffer would be) while the files are written
    release.set()
    ckpt.sync()
    fresh = tps.train.Checkpoint(table=np.zeros(10), device=jnp.zeros(8))
    fresh.restore(path)
    assert fresh.table.tolist() == list(np.arange(10.0)) and np.asarray(fresh.device).tolist() == list(range(8))


def test_the_next_save_and_restore_wait_for_the_one_in_flight(tmp_path, held):
    release, commits = held
    ckpt = tps.train.Checkpoint(w=_model(), step=1)
    first = ckpt.save(str(tmp_path / "ckpt"), options=ASYNC)
    threading.Timer(0.05, release.set).start()
    ckpt.step = 2
    second = ckpt.save(str(tmp_path / "ckpt"))  # synchronous: waits for the first, then saves
    assert commits == ["ckpt-1", "ckpt-2"] and second.endswith("ckpt-2")
    release.clear()
    ckpt.step = 3
    third = ckpt.save(str(tmp_path / "ckpt"), options=ASYNC)
    threading.Timer(0.05, release.set).start()
    fresh = tps.train.Checkpoint(w=_model(), step=0)
    fresh.restore(third).assert_consumed()  # waits for it: otherwise NotFoundError
    assert fresh.step == 3 and commits[-1] == "ckpt-3"
    fresh.restore(first)
    assert fresh.step == 1


def test_a_failed_asynchronous_save_loses_only_itself(tmp_path, monkeypatch):
    directory = str(tmp_path)
    ckpt = tps.train.Checkpoint(w=_model(), step=1)
    manager = tps.train.CheckpointManager(ckpt, directory, max_to_keep=1)
    manager.save()
    real = files.commit

    def full(tmp, path, manifest):
        raise OSError(errno.ENOSPC, "No space left on device", os.path.join(tmp, "manifest.json"))

    monkeypatch.setattr(files, "commit", full)
    ckpt.step = 2
    manager.save(options=ASYNC)  # returns; the failure comes later, in the background
    with pytest.raises(ResourceExhaustedError, match=r"(?s)disk is full .*ckpt-2.tps-tmp.*Fix:"):
        manager.sync()
    assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-1"]  # kept; temporary folder gone
    assert manager.latest_checkpoint == os.path.join(directory, "ckpt-1")
    monkeypatch.setattr(files, "commit", real)
    manager.sync()  # the error was raised once
    assert manager.save(options=ASYNC) == os.path.join(directory, "ckpt-3")  # save_counter counts calls
    manager.sync()
    assert sorted(os.listdir(directory)) == ["checkpoint", "ckpt-3"]


def test_write_callbacks_run_after_the_commit(tmp_path):
    seen = []
    options = tps.train.CheckpointOptions(enable_async=True, experimental_write_callbacks=[
        lambda path: seen.append((path, os.path.isfile(os.path.join(path, "manifest.json")))),
        lambda: seen.append("no-argument")])
    ckpt = tps.train.Checkpoint(w=_model(), options=options)  # the Checkpoint's default options
    path = ckpt.save(str(tmp_path / "ckpt"))
    ckpt.sync()
    assert seen == [(path, True), "no-argument"]


def _python(code: str) -> subprocess.Popen:
    env = clean_env()
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    return subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_interpreter_exit_waits_for_the_save(tmp_path):
    proc = _python(
        "import numpy as np, tpustrategy as tps\n"
        f"ckpt = tps.train.Checkpoint(big=np.full(1 << 22, 7, np.float32), step=7)\n"
        f"print(ckpt.save({str(tmp_path / 'ckpt')!r}, options=tps.train.CheckpointOptions(enable_async=True)))\n")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    path = out.strip().splitlines()[-1]
    ckpt = tps.train.Checkpoint(big=np.zeros(1 << 22, np.float32), step=0)
    ckpt.restore(tps.train.latest_checkpoint(str(tmp_path))).assert_consumed()
    assert path.endswith("ckpt-1") and ckpt.step == 7 and ckpt.big.min() == 7


def test_a_program_ending_by_sys_exit_right_after_the_save_finds_it_on_disk(tmp_path):
    # Python 3.12 refuses new threads once finalization begins, and orbax needs some to write:
    # the save must be finished before that, also when the program ends by sys.exit.
    script = tmp_path / "train.py"
    script.write_text(
        "import sys, numpy as np, tpustrategy as tps\n"
        "def main():\n"
        "    ckpt = tps.train.Checkpoint(big=np.full(1 << 22, 5, np.float32), step=5)\n"
        f"    manager = tps.train.CheckpointManager(ckpt, {str(tmp_path / 'ckpts')!r}, max_to_keep=1)\n"
        "    manager.save(options=tps.train.CheckpointOptions(enable_async=True))\n"
        "    return 0\n"
        "sys.exit(main())\n")
    env = clean_env()
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    proc = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0 and "failed" not in proc.stderr, proc.stderr[-3000:]
    ckpt = tps.train.Checkpoint(big=np.zeros(1 << 22, np.float32), step=0)
    ckpt.restore(tps.train.latest_checkpoint(str(tmp_path / "ckpts"))).assert_consumed()
    assert ckpt.step == 5 and ckpt.big.min() == 5


def test_a_kill_during_asynchronous_saves_keeps_the_last_committed_one(tmp_path):
    directory = str(tmp_path)
    proc = _python(
        "import numpy as np, tpustrategy as tps\n"
        "big = np.zeros(1 << 22, np.float32)\n"
        "ckpt = tps.train.Checkpoint(big=big, step=0)\n"
        f"manager = tps.train.CheckpointManager(ckpt, {directory!r}, max_to_keep=2)\n"
        "for i in range(1, 10**6):\n"
        "    big.fill(i); ckpt.step = i\n"
        "    manager.save(options=tps.train.CheckpointOptions(enable_async=True))\n"
        "    print('SAVING', i, flush=True)\n")
    try:
        for line in proc.stdout:
            if line.startswith("SAVING 3"):
                break
        time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    latest = tps.train.latest_checkpoint(directory)
    ckpt = tps.train.Checkpoint(big=np.zeros(1 << 22, np.float32), step=0)
    ckpt.restore(latest).assert_consumed()
    assert ckpt.step >= 2 and ckpt.big.min() == ckpt.big.max() == ckpt.step
    manager = tps.train.CheckpointManager(ckpt, directory, max_to_keep=2)  # resolves the leftovers
    assert not [n for n in os.listdir(directory) if n.endswith(files.LEFTOVER_SUFFIXES)]
    assert manager.latest_checkpoint == latest
