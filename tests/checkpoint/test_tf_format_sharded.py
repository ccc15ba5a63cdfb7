"""TensorFlow's format from 2 processes: TensorFlow's sharded bundle (``.data-0000k-of-00002`` + one index).

``tools/check_tf_reads_ours.py --sharded`` checks that TensorFlow 2.21 reads
such a bundle back.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from tests.checkpoint.jobs import run_launched
from tpustrategy._src.checkpoint.tf_format import bundle

pytestmark = pytest.mark.timeout(600)


def test_two_processes_write_one_shard_each_and_one_index(tmp_path):
    directory = str(tmp_path)
    results = run_launched("worker_tf_sharded.py", directory)
    managed = os.path.join(directory, "managed")
    for pid in (0, 1):
        assert results[pid]["saved"] == [os.path.join(managed, f"ckpt-{i}") for i in (1, 2, 3)]
        assert results[pid]["latest"] == os.path.join(managed, "ckpt-3")
        w, b, step, counter = results[pid]["restored"]
        assert w == (np.arange(12).reshape(4, 3) * 3).tolist() and b == [-3.0] * 5 and step == 3 and counter == 3
    assert sorted(os.listdir(managed)) == [
        "checkpoint", "ckpt-2.data-00000-of-00002", "ckpt-2.data-00001-of-00002", "ckpt-2.index",
        "ckpt-3.data-00000-of-00002", "ckpt-3.data-00001-of-00002", "ckpt-3.index"]
    reader = bundle.BundleReader(os.path.join(managed, "ckpt-3"))
    shards = {key: entry.shard_id for key, entry in reader.entries.items() if key}
    assert set(shards.values()) == {0, 1}  # both processes wrote values
    np.testing.assert_array_equal(reader.get("model/w/.ATTRIBUTES/VARIABLE_VALUE"),
                                  np.arange(12, dtype=np.float32).reshape(4, 3) * 3)
    np.testing.assert_array_equal(reader.get("model/b/.ATTRIBUTES/VARIABLE_VALUE"), np.full(5, -3, np.float32))
    assert reader.get("save_counter/.ATTRIBUTES/VARIABLE_VALUE") == 3
    lines = open(os.path.join(managed, "checkpoint")).read().splitlines()
    assert lines[:3] == ['model_checkpoint_path: "ckpt-3"', 'all_model_checkpoint_paths: "ckpt-2"',
                         'all_model_checkpoint_paths: "ckpt-3"']
    plain = bundle.BundleReader(os.path.join(directory, "plain"))
    assert plain.get("step/.ATTRIBUTES/VARIABLE_VALUE") == 3
