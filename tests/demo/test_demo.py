"""The demo job keeps working: one epoch with a tiny batch."""

from __future__ import annotations

import os

from tpustrategy._src.demo import dataset
from tpustrategy._src.demo.main import main


def test_demo_runs_one_epoch_and_reports_every_test_example(tmp_path, capsys):
    cache = str(tmp_path / "digits")
    assert main(["--epochs", "1", "--global-batch", "16", "--steps-per-execution", "8", "--cache-dir", cache]) == 0
    out = capsys.readouterr().out
    assert "replicas        8" in out
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
