"""PreemptionCheckpointHandler: save on a termination notice, exit 42, resume on restart."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

import tpustrategy as tps
from tests.checkpoint.jobs import process_and_signal, results_of, run_process
from tpustrategy._src.checkpoint.preemption import PREEMPTION_EXIT_CODE, TerminationConfig

STEPS = 30


def test_sigterm_to_a_single_process_job_saves_exits_42_and_the_restart_resumes(tmp_path):
    directory = str(tmp_path / "preemption")
    straight = run_process("worker_train.py", "straight", str(tmp_path / "straight"), str(STEPS))
    code, out, err = process_and_signal("worker_train.py", "preempt", directory, str(STEPS),
                                        trigger="STEP 3 ", sig=signal.SIGTERM)
    assert code == PREEMPTION_EXIT_CODE == 42, err[-3000:]
    (stopped,) = results_of(out)
    assert stopped["exit"] == 42 and 3 < stopped["saved_at"] < STEPS
    assert stopped["latest"] == os.path.join(directory, "ckpt-1")
    code, out, err = process_and_signal("worker_train.py", "preempt", directory, str(STEPS),
                                        trigger="never", sig=signal.SIGTERM)
    assert code == 0, err[-3000:]
    (restarted,) = results_of(out)
    assert restarted["start"] == stopped["saved_at"]
    assert {**stopped["losses"], **restarted["losses"]} == straight["losses"]


@pytest.fixture
def sigterm_restored():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


class Exited(Exception):
    pass


def _exit():
    raise Exited()


def test_the_handler_counts_run_calls_and_a_new_handler_continues_the_count(tmp_path, sigterm_restored):
    weights = np.zeros(2, np.float32)
    ckpt = tps.train.Checkpoint(weights=weights)
    config = TerminationConfig(exit_fn=_exit)
    handler = tps.experimental.PreemptionCheckpointHandler(None, ckpt, str(tmp_path), config)

    def train_step(delta):
        np.add(weights, delta, out=weights)
        return float(weights.sum())

    assert [handler.run(train_step, 1.0) for _ in range(3)] == [2.0, 4.0, 6.0]
    assert handler.total_run_calls == 3
    os.kill(os.getpid(), signal.SIGTERM)
    with pytest.raises(Exited):
        handler.run(train_step, 1.0)
    assert handler.total_run_calls == 3 and weights.tolist() == [3.0, 3.0]  # saved before the 4th call
    assert tps.train.latest_checkpoint(str(tmp_path)) == os.path.join(str(tmp_path), "ckpt-1")
    weights[:] = 0
    again = tps.experimental.PreemptionCheckpointHandler(None, tps.train.Checkpoint(weights=weights),
                                                         str(tmp_path), config)
    assert again.total_run_calls == 3 and weights.tolist() == [3.0, 3.0]


def test_the_run_count_is_in_every_save_of_the_manager_not_only_preemption_saves(tmp_path, sigterm_restored):
    ckpt = tps.train.Checkpoint(step=0)
    manager = tps.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=1)
    handler = tps.experimental.PreemptionCheckpointHandler(None, manager)
    for _ in range(5):
        handler.run(lambda: None)
    manager.save()  # a regular save, e.g. each epoch; then the job crashes
    restarted = tps.experimental.PreemptionCheckpointHandler(
        None, tps.train.CheckpointManager(tps.train.Checkpoint(step=0), str(tmp_path), max_to_keep=1))
    assert restarted.total_run_calls == 5


def test_a_termination_watcher_function_is_a_notice_too(tmp_path, sigterm_restored):
    import threading

    notice = threading.Event()
    saved = threading.Event()
    config = TerminationConfig(termination_watcher_fn=notice.is_set, exit_fn=saved.set)
    manager = tps.train.CheckpointManager(tps.train.Checkpoint(step=0), str(tmp_path), max_to_keep=2)
    handler = tps.experimental.PreemptionCheckpointHandler(None, manager, termination_config=config)
    handler.run(lambda: None)
    notice.set()
    for _ in range(100):
        handler.run(lambda: None)
        if saved.is_set():
            break
        saved.wait(0.05)
    assert saved.is_set() and manager.latest_checkpoint is not None


def test_losing_a_peer_inside_the_watch_scope_exits_with_the_restart_code(tmp_path, sigterm_restored):
    codes = []
    config = TerminationConfig(exit_fn=lambda: codes.append(PREEMPTION_EXIT_CODE))
    handler = tps.experimental.PreemptionCheckpointHandler(None, tps.train.Checkpoint(step=0),
                                                           str(tmp_path), config)
    with handler.watch_preemption_scope():
        raise tps.errors.UnavailableError("peer 1 is gone", task=1)
    assert codes == [42]
    with pytest.raises(KeyError, match="not a lost peer"):
        with handler.watch_preemption_scope():
            raise KeyError("not a lost peer")
    assert codes == [42]


def test_a_checkpoint_without_a_folder_is_refused(sigterm_restored):
    with pytest.raises(ValueError, match=r"(?s)a Checkpoint was passed, so checkpoint_dir is needed.*Fix: "):
        tps.experimental.PreemptionCheckpointHandler(None, tps.train.Checkpoint(step=0))
    with pytest.raises(TypeError, match="must be a tps.train.Checkpoint or tps.train.CheckpointManager; received NoneType"):
        tps.experimental.PreemptionCheckpointHandler(None, None, "/tmp/x")
