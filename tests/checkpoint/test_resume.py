"""Exact resume in a new process, and restoring onto a different replica count."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tests.checkpoint.jobs import run_process

pytestmark = pytest.mark.timeout(600)


def test_training_resumed_in_a_new_process_gives_bit_identical_losses(tmp_path):
    straight = run_process("worker_train.py", "straight", str(tmp_path / "straight"), "30")
    first = run_process("worker_train.py", "first", str(tmp_path / "resumed"), "30", "12")
    second = run_process("worker_train.py", "resume", str(tmp_path / "resumed"), "30")
    assert first["saved"].endswith("ckpt-12") and second["restored"] == first["saved"]
    assert second["start"] == 12
    assert second["pid"] != first["pid"]
    resumed = {**first["losses"], **second["losses"]}
    assert list(resumed) == [str(i) for i in range(30)]
    assert resumed == straight["losses"]  # exact float equality, step by step


@pytest.mark.devices(8)
def test_variables_and_input_saved_with_8_replicas_restore_onto_4(tmp_path):
    strategy = tps.MirroredStrategy()
    ON_READ, Agg = tps.VariableSynchronization.ON_READ, tps.VariableAggregation
    with strategy.scope():
        w = tps.Variable(np.arange(3, dtype=np.float32) / 3)
        total = tps.Variable(0.0, synchronization=ON_READ, aggregation=Agg.SUM)
        mean = tps.Variable(0.0, synchronization=ON_READ, aggregation=Agg.MEAN)
        first = tps.Variable(0.0, synchronization=ON_READ, aggregation=Agg.ONLY_FIRST_REPLICA)
        none = tps.Variable(0.0, synchronization=ON_READ, aggregation=Agg.NONE)
    for var, parts in ((total, [i / 7 for i in range(8)]), (mean, list(range(8))),
                       (first, [5.0 + i for i in range(8)]), (none, [1.0] * 8)):
        var.assign(tps.PerReplica([np.float32(p) for p in parts]))
    iterator = iter(strategy.experimental_distribute_dataset(tpsd.Dataset.range(64).batch(8)))
    next(iterator), next(iterator)
    path = tps.train.Checkpoint(w=w, total=total, mean=mean, first=first, iterator=iterator).save(
        str(tmp_path / "eight"))
    none_path = tps.train.Checkpoint(none=none).save(str(tmp_path / "none"))
    got = run_process("worker_replicas.py", path, none_path, devices=4)
    assert got["devices"] == got["replicas"] == 4 and got["w_devices"] == [0, 1, 2, 3]
    assert got["w"] == w.numpy().tolist()
    # Reading a restored sync-on-read variable gives exactly the value that was saved.
    # TensorFlow's rule (values_util.get_on_read_restore_ops): SUM's saved value / 4 on every replica.
    assert got["total"] == pytest.approx(float(total.numpy()), rel=1e-6)
    assert got["total_components"] == pytest.approx([float(total.numpy()) / 4] * 4, rel=1e-6)
    assert got["mean"] == 3.5 and got["mean_components"] == [3.5] * 4
    assert got["first"] == 5.0
    assert got["next_batch"] == list(range(16, 24))  # the third global batch, split over 4 replicas
    assert "only its 8 per-replica components were saved, and this strategy has 4 replicas" in got["none_error"]
