"""TerminationConfig's options as TensorFlow documents them: save_fn replaces the save, exit_fn
replaces the exit, grace_period saves at once and again before the deadline (SIGTERM sent)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.checkpoint.preemption import TerminationConfig


@pytest.fixture(autouse=True)
def sigterm_restored():
    previous = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, previous)


class Exited(Exception):
    pass


def _train(handler, steps, weights, sigterm_at, sleep=0.0):
    def train_step():
        np.add(weights, 1.0, out=weights)
        if sleep:
            time.sleep(sleep)

    for i in range(steps):
        if i == sigterm_at:
            os.kill(os.getpid(), signal.SIGTERM)
        handler.run(train_step)


def test_save_fn_replaces_the_managers_save(tmp_path):
    calls = []
    exits = []
    weights = np.zeros(1, np.float32)
    ckpt = tps.train.Checkpoint(weights=weights)
    manager = tps.train.CheckpointManager(ckpt, str(tmp_path), max_to_keep=3)
    handler = tps.experimental.PreemptionCheckpointHandler(
        None, manager, termination_config=tps.experimental.TerminationConfig(
            save_fn=lambda: calls.append((handler.total_run_calls, float(weights[0]))),
            exit_fn=lambda: exits.append(True)))
    _train(handler, 6, weights, sigterm_at=3)
    assert calls == [(3, 3.0)]  # once, before the 4th step ran
    assert exits == [True]
    assert manager.latest_checkpoint is None  # the handler did not save a checkpoint itself


def test_when_exit_fn_returns_training_goes_on_and_further_notices_are_ignored(tmp_path):
    exits = []
    weights = np.zeros(1, np.float32)
    manager = tps.train.CheckpointManager(tps.train.Checkpoint(weights=weights), str(tmp_path),
                                          max_to_keep=5)
    handler = tps.experimental.PreemptionCheckpointHandler(
        None, manager, termination_config=TerminationConfig(exit_fn=lambda: exits.append(1)))
    _train(handler, 5, weights, sigterm_at=2)
    os.kill(os.getpid(), signal.SIGTERM)
    for _ in range(3):
        handler.run(lambda: None)
    assert exits == [1] and handler.total_run_calls == 8
    assert [os.path.basename(p) for p in manager.checkpoints] == ["ckpt-1"]


def test_a_grace_period_saves_at_once_keeps_training_and_saves_again_before_exiting(tmp_path):
    saves = []
    weights = np.zeros(1, np.float32)
    manager = tps.train.CheckpointManager(tps.train.Checkpoint(weights=weights), str(tmp_path),
                                          max_to_keep=5)

    def exit_fn():
        raise Exited()

    handler = tps.experimental.PreemptionCheckpointHandler(
        None, manager, termination_config=TerminationConfig(grace_period=1.0, exit_fn=exit_fn))
    original_save = manager.save

    def counting_save(*args, **kwargs):
        saves.append(handler.total_run_calls)
        return original_save(*args, **kwargs)

    manager.save = counting_save
    with pytest.raises(Exited):
        _train(handler, 100_000, weights, sigterm_at=3, sleep=0.005)
    assert len(saves) == 2 and saves[0] == 3 and saves[1] > saves[0]  # trained on in between
    assert [os.path.basename(p) for p in manager.checkpoints] == ["ckpt-1", "ckpt-2"]
    reader = tps.train.load_checkpoint(manager.latest_checkpoint)
    assert float(reader.get_tensor("weights")[0]) == saves[1]  # the final save has the last step


def test_a_grace_period_with_save_fn_calls_it_twice(tmp_path):
    calls = []

    def exit_fn():
        raise Exited()

    handler = tps.experimental.PreemptionCheckpointHandler(
        None, tps.train.Checkpoint(step=0), str(tmp_path), TerminationConfig(
            grace_period=0.2, save_fn=lambda: calls.append(handler.total_run_calls), exit_fn=exit_fn))
    with pytest.raises(Exited):
        _train(handler, 100_000, np.zeros(1), sigterm_at=1, sleep=0.005)
    assert len(calls) == 2 and calls[0] == 1 < calls[1]
    assert tps.train.latest_checkpoint(str(tmp_path)) is None


def test_termination_config_takes_tensorflows_positional_order_and_checks_values():
    watcher, exit_fn = (lambda: False), (lambda: None)
    config = TerminationConfig(watcher, exit_fn, 5)
    assert (config.termination_watcher_fn, config.exit_fn, config.grace_period) == (watcher, exit_fn, 5)
    with pytest.raises(ValueError, match=r"grace_period must be a number of seconds >= 0.*received int: -1"):
        TerminationConfig(grace_period=-1)
    with pytest.raises(ValueError, match="received str: '10'"):
        TerminationConfig(grace_period="10")
    with pytest.raises(TypeError, match=r"(?s)save_fn must be callable or None; received str.*Fix"):
        TerminationConfig(save_fn="save")
