"""Checkpoints of a 2-process job (2 x 4 fake CPU devices) through the launcher.

Every job runs under ``python -m tpustrategy.launch`` with a timeout; the
launcher stops every process when one fails, and these helpers kill the
launcher itself if it overruns.
"""

from __future__ import annotations

import json
import os
import signal

import pytest

import tpustrategy.data as tpsd
from tests.checkpoint.jobs import by_process, launch_and_signal, run_launched, run_process

pytestmark = pytest.mark.timeout(600)
STEPS = 60


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    results = run_launched("worker_train.py", "straight", str(tmp_path_factory.mktemp("straight")), str(STEPS))
    assert results[0]["losses"] == results[1]["losses"]
    return results[0]["losses"]


def test_two_processes_resume_bit_identically_and_agree_on_the_step(straight, tmp_path):
    directory = str(tmp_path / "ckpts")
    first = run_launched("worker_train.py", "first", directory, "30", "12")
    assert first[0]["saved"] == first[1]["saved"] == os.path.join(directory, "ckpt-12")
    manifest = json.load(open(os.path.join(directory, "ckpt-12", "manifest.json")))
    assert manifest["process_count"] == 2
    assert {"iterators/process-00000-of-00002.json", "iterators/process-00001-of-00002.json"} <= set(manifest["files"])
    second = run_launched("worker_train.py", "resume", directory, "30")
    for pid in (0, 1):
        assert second[pid]["start"] == 12
        resumed = {**first[pid]["losses"], **second[pid]["losses"]}
        assert resumed == {str(i): straight[str(i)] for i in range(30)}


def test_sigterm_to_one_process_saves_on_both_at_the_same_step_and_the_restart_resumes(straight, tmp_path):
    directory = str(tmp_path / "preemption")
    code, out, err = launch_and_signal("worker_train.py", "preempt", directory, str(STEPS),
                                       pid_line="[p1] PID ", trigger="[p1] STEP 3 ", sig=signal.SIGTERM)
    assert code == 42, err[-3000:]
    results = by_process(out)
    assert sorted(results) == [0, 1], out[-3000:] + err[-3000:]
    saved_at = results[0]["saved_at"]
    assert results[0]["exit"] == results[1]["exit"] == 42
    assert results[1]["saved_at"] == saved_at and 3 < saved_at < STEPS
    assert results[0]["latest"] == results[1]["latest"] == os.path.join(directory, "ckpt-1")
    assert "exiting with code 42" in err
    # The same command again: the handler restores the checkpoint and training goes on.
    code, out, err = launch_and_signal("worker_train.py", "preempt", directory, str(STEPS),
                                       pid_line="[p1] PID ", trigger="never", sig=signal.SIGTERM)
    assert code == 0, err[-3000:]
    restarted = by_process(out)
    for pid in (0, 1):
        assert restarted[pid]["start"] == saved_at and restarted[pid]["exit"] == 0
        losses = {**results[pid]["losses"], **restarted[pid]["losses"]}
        assert losses == straight


def _write_files(directory, count, per_file):
    for f in range(count):
        with tpsd.TFRecordWriter(str(directory / f"f{f}.tfrecord")) as writer:
            for i in range(per_file):
                writer.write(str(1000 * f + i).encode())


def test_input_positions_re_split_onto_one_process_when_every_process_read_the_same_stream(tmp_path):
    _write_files(tmp_path, 4, 20)
    saved = run_launched("worker_iterators.py", str(tmp_path))
    global_next = saved[0]["data_next"] + saved[1]["data_next"]
    # The 4 MiB mirrored variable (on 8 devices of 2 processes) is written once.
    manifest = json.load(open(tmp_path / "data-1" / "manifest.json"))
    array_bytes = sum(meta["size"] for name, meta in manifest["files"].items() if name.startswith("arrays/"))
    assert (4 << 20) * 0.8 < array_bytes < (4 << 20) * 1.2  # two copies would be twice as big
    restored = run_process("worker_restore_one.py", str(tmp_path), devices=8)
    assert restored["big_matches"]
    assert restored["data_next"] == global_next
    error = restored["files_error"]
    assert "iterator 'iterator' was saved by a job of 2 process(es), and this job has 1" in error
    assert "Fix: restore with 2 process(es)" in error
