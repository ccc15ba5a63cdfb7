"""The demo job keeps working: one epoch with a tiny batch."""

from __future__ import annotations

import os

import jax

from tpustrategy._src.demo import dataset
from tpustrategy._src.demo.main import main


def test_demo_runs_one_epoch_and_reports_every_test_example(tmp_path, capsys):
    cache = str(tmp_path / "digits")
    assert main(["--epochs", "1", "--global-batch", "16", "--steps-per-execution", "8", "--cache-dir", cache]) == 0
    out = capsys.readouterr().out
    assert f"replicas        {jax.device_count()}" in out  # TPUStrategy() takes every device
    assert "/359 test examples" in out
    assert "examples/s" in out
    assert os.path.exists(tmp_path / "digits_training_curve.png")
    files = sorted(os.listdir(cache))
    assert files[-1] == "train-00007-of-00008.tfrecord" and "test-00000-of-00002.tfrecord" in files


def test_demo_records_round_trip_through_the_pipeline(tmp_path):
    cache = str(tmp_path / "digits")
    info = dataset.write_tfrecords(cache)
    images, labels = zip(*dataset.test_dataset(cache, 64).unbatch())
    assert len(labels) == info["test"] == 359
    assert all(img.shape == (64,) and 0.0 <= img.min() and img.max() <= 1.0 for img in images)
    assert set(int(y) for y in labels) == set(range(10))


def _saved_state(directory, like):
    import tpustrategy as tps

    path = tps.train.latest_checkpoint(directory)
    return path, tps.train.Checkpoint().read(path, like=like)


def test_the_demo_saves_each_epoch_and_resume_continues_bit_identically(tmp_path, capsys):
    import json

    import numpy as np

    from tpustrategy._src.demo import model

    cache = str(tmp_path / "digits")
    common = ["--global-batch", "64", "--steps-per-execution", "8", "--cache-dir", cache]
    assert main(["--epochs", "2", "--checkpoint-dir", str(tmp_path / "straight"), *common]) == 0
    # The checkpoints, and the state file naming the latest (TensorFlow's `checkpoint` file).
    assert sorted(os.listdir(tmp_path / "straight")) == ["checkpoint", "ckpt-1", "ckpt-2"]
    assert main(["--epochs", "1", "--checkpoint-dir", str(tmp_path / "stopped"), *common]) == 0
    capsys.readouterr()
    assert main(["--epochs", "2", "--resume", "--checkpoint-dir", str(tmp_path / "stopped"), *common]) == 0
    out = capsys.readouterr().out
    assert "resumed from " + str(tmp_path / "stopped" / "ckpt-1") + " (epoch 1)" in out
    assert "epoch   1" not in out and "epoch   2" in out
    assert "checkpoint" in out and "KiB; save" in out and "resumed from ckpt-1 in" in out
    like = {"loss_curve": "", "epoch": 0, "params": {k: np.zeros(v.shape, np.float32)
                                                      for k, v in model.init_params(0).items()}}
    straight_path, straight = _saved_state(str(tmp_path / "straight"), like)
    resumed_path, resumed = _saved_state(str(tmp_path / "stopped"), like)
    assert straight_path.endswith("ckpt-2") and resumed_path.endswith("ckpt-2")
    assert resumed["epoch"] == straight["epoch"] == 2
    curve = json.loads(straight["loss_curve"])
    assert len(curve) == 2 * (1438 // 64) and json.loads(resumed["loss_curve"]) == curve  # bit for bit
    for name, value in straight["params"].items():
        assert value.tobytes() == resumed["params"][name].tobytes()


def test_without_orbax_the_demo_trains_and_says_how_to_turn_checkpoints_on(tmp_path, capsys, monkeypatch):
    from tpustrategy._src.demo import checkpointing

    monkeypatch.setattr(checkpointing, "available", lambda: False)
    argv = ["--epochs", "1", "--global-batch", "128", "--cache-dir", str(tmp_path / "digits"),
            "--checkpoint-dir", str(tmp_path / "ckpts")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "checkpoints are off: pip install 'tpustrategy[checkpoint]'" in out
    assert "(off: orbax-checkpoint is not installed)" in out and not os.path.exists(tmp_path / "ckpts")
