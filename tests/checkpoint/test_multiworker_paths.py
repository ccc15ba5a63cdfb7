"""TensorFlow's multi-worker checkpoint pattern (each worker its own folder) on 2 processes."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tpustrategy as tps
from tests.checkpoint.jobs import run_launched

pytestmark = pytest.mark.timeout(600)


def test_workers_save_into_their_own_folders_and_the_chiefs_is_the_checkpoint(tmp_path):
    directory = str(tmp_path)
    results = run_launched("worker_multiworker_paths.py", directory, timeout=300)
    chief_dir = os.path.join(directory, "ckpt")
    chief, worker = results[0], results[1]
    assert chief["task"] == ["worker", 0] and worker["task"] == ["worker", 1]
    assert chief["saved"] == [os.path.join(chief_dir, "ckpt-1"), os.path.join(chief_dir, "ckpt-2")]
    worker_dir = os.path.join(directory, "workertemp_1", "ckpt")  # the tutorial's write_filepath
    assert worker["saved"] == [os.path.join(worker_dir, "ckpt-1"), os.path.join(worker_dir, "ckpt-2")]
    assert worker["own_latest"] == worker["saved"] and chief["own_latest"] == chief["saved"]  # complete copies
    assert chief["worker_dir_after"] == [True, True] and worker["worker_dir_after"] == [False, False]
    assert chief["chief_dir"] == ["checkpoint", "ckpt-2"]  # max_to_keep=1, the worker's copy removed
    for result in (chief, worker):
        assert result["latest"] == os.path.join(chief_dir, "ckpt-2") and result["restored"] == [2.0, 2]
        assert result["async"] == [os.path.join(directory, "shared", "ckpt-7"), 7.0]
        assert "disagree on the checkpoint's name" in result["names_error"]
    manifest_dir = os.path.join(chief_dir, "ckpt-2")
    assert sorted(os.listdir(os.path.join(manifest_dir, "iterators"))) == [
        "process-00000-of-00002.json", "process-00001-of-00002.json"]
    with tps.MirroredStrategy().scope():
        w = tps.Variable(np.zeros(8, np.float32))
    tps.train.Checkpoint(w=w).restore(os.path.join(directory, "shared", "ckpt-7")).expect_partial()
    assert w.numpy().tolist() == [7.0] * 8  # restorable on one process too
