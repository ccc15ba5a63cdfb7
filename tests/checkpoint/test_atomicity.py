"""A checkpoint is visible only when complete; damage is reported, never half-loaded."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tpustrategy as tps
from tests.multiprocess.harness import REPO, clean_env
from tpustrategy.errors import DataLossError

HERE = os.path.dirname(__file__)


def test_a_save_killed_half_way_leaves_the_previous_checkpoint_loadable(tmp_path):
    prefix = str(tmp_path / "ckpt")
    env = clean_env()
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=1"
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "worker_slow_save.py"), prefix],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "SAVED 1", proc.stderr.read()
        deadline = time.monotonic() + 120
        while not any(n.endswith(".tps-tmp") for n in os.listdir(tmp_path)):  # save 2 (or later) started
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    partial = [n for n in os.listdir(tmp_path) if n.endswith(".tps-tmp")]
    assert len(partial) == 1  # the killed save left its folder, unlisted
    latest = tps.train.latest_checkpoint(str(tmp_path))
    number = int(latest.rsplit("-", 1)[1])
    assert latest == f"{prefix}-{number}" and partial[0] == f"ckpt-{number + 1}.tps-tmp"
    big = np.zeros(24 * 1024 * 1024, np.float32)
    ckpt = tps.train.Checkpoint(big=big, step=0)
    ckpt.restore(latest).assert_consumed()
    assert ckpt.step == number and big.min() == big.max() == number
    with pytest.raises(DataLossError, match=r"(?s)is not a complete checkpoint.*manifest.json is missing.*interrupted"):
        ckpt.restore(str(tmp_path / partial[0]))
    assert ckpt.step == number


@pytest.fixture
def saved(tmp_path):
    with tps.MirroredStrategy().scope():
        w = tps.Variable(np.arange(4, dtype=np.float32))
    it = iter(tps.data.Dataset.range(10))
    next(it)
    ckpt = tps.train.Checkpoint(w=w, it=it, step=3)
    return ckpt, ckpt.save(str(tmp_path / "ckpt"))


def _array_files(path):
    found = []
    for folder, _, names in os.walk(os.path.join(path, "arrays")):
        found += [os.path.join(folder, n) for n in names if os.path.getsize(os.path.join(folder, n)) > 0]
    return sorted(found)


def test_a_truncated_data_file_is_named_and_nothing_is_restored(saved):
    ckpt, path = saved
    victim = max(_array_files(path), key=os.path.getsize)
    with open(victim, "r+b") as f:
        f.truncate(os.path.getsize(victim) - 1)
    ckpt.w.assign(np.zeros(4, np.float32))
    ckpt.step = 0
    with pytest.raises(DataLossError, match=r"(?s)is damaged; nothing was restored.*bytes, but \d+ were written") as err:
        ckpt.restore(path)
    assert err.value.filename == victim
    assert ckpt.w.numpy().tolist() == [0.0] * 4 and ckpt.step == 0


def test_a_flipped_byte_is_caught_by_the_checksum(saved):
    ckpt, path = saved
    victim = max(_array_files(path), key=os.path.getsize)
    data = bytearray(open(victim, "rb").read())
    data[len(data) // 2] ^= 0xFF
    open(victim, "wb").write(bytes(data))
    with pytest.raises(DataLossError, match="is corrupted \\(CRC32C"):
        ckpt.restore(path)


def test_a_missing_iterator_file_is_named(saved):
    ckpt, path = saved
    victim = os.path.join(path, "iterators", "process-00000-of-00001.json")
    os.remove(victim)
    with pytest.raises(DataLossError, match=r"process-00000-of-00001.json is missing") as err:
        ckpt.restore(path)
    assert err.value.filename == victim


def test_a_damaged_manifest_is_reported(saved):
    ckpt, path = saved
    with open(os.path.join(path, "manifest.json"), "w") as f:
        f.write('{"format": "tpustrategy-checkpoint", "objects": {')
    with pytest.raises(DataLossError, match="manifest.json is unreadable or not valid JSON"):
        ckpt.restore(path)


def test_a_missing_path_lists_what_the_folder_holds(saved, tmp_path):
    ckpt, path = saved
    with pytest.raises(FileNotFoundError, match=r"(?s)no checkpoint at .*ckpt'.*holds: ckpt-1.*latest_checkpoint"):
        ckpt.restore(str(tmp_path / "ckpt"))


def test_a_folder_of_checkpoints_is_not_a_checkpoint(saved, tmp_path):
    ckpt, _ = saved
    with pytest.raises(FileNotFoundError, match=r"(?s)is a folder of checkpoints, not a checkpoint \(it holds ckpt-1\).*latest_checkpoint"):
        ckpt.restore(str(tmp_path))


def test_the_manifest_lists_every_file_with_its_size_and_checksum(saved):
    _, path = saved
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    on_disk = {os.path.relpath(os.path.join(d, n), path) for d, _, ns in os.walk(path) for n in ns}
    assert set(manifest["files"]) == on_disk - {"manifest.json"}
    assert manifest["process_count"] == 1 and manifest["objects"]["step"] == {"kind": "value", "type": "int", "value": 3}
    assert all(set(meta) == {"size", "crc32c"} for meta in manifest["files"].values())
