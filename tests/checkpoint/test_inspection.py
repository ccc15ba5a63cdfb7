"""tps.train.load_checkpoint / CheckpointReader / list_variables read a checkpoint by name,
with TensorFlow's names, without the objects it was saved from."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


@pytest.fixture
def saved(tmp_path):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        kernel = tps.Variable(np.arange(10, dtype=np.float32).reshape(2, 5))
        total = tps.Variable(0.0, synchronization=tps.VariableSynchronization.ON_READ,
                             aggregation=tps.VariableAggregation.SUM)
    total.assign(tps.PerReplica([np.float32(i + 1) for i in range(strategy.num_replicas_in_sync)]))
    it = iter(tpsd.Dataset.range(10))
    next(it)
    layer = tps.train.Checkpoint(kernel=kernel)
    ckpt = tps.train.Checkpoint(net=tps.train.Checkpoint(l1=layer), total=total, iterator=it,
                                table=np.array([3, 1, 4], np.int64), epoch=2)
    ckpt.save(str(tmp_path / "ckpts" / "ckpt"))
    return ckpt.save(str(tmp_path / "ckpts" / "ckpt")), tmp_path / "ckpts"


def test_the_reader_lists_tensorflows_names_with_shapes_and_dtypes(saved):
    _, folder = saved
    reader = tps.train.load_checkpoint(str(folder))  # a folder: its newest checkpoint
    shapes = reader.get_variable_to_shape_map()
    assert sorted(shapes) == [
        "epoch/.ATTRIBUTES/VARIABLE_VALUE", "iterator/.ATTRIBUTES/ITERATOR_STATE",
        "net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE", "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
        "table/.ATTRIBUTES/VARIABLE_VALUE", "total/.ATTRIBUTES/VARIABLE_VALUE"]
    assert shapes["net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE"] == [2, 5]
    assert shapes["total/.ATTRIBUTES/VARIABLE_VALUE"] == []
    dtypes = reader.get_variable_to_dtype_map()
    assert dtypes["net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE"] == np.float32
    assert dtypes["table/.ATTRIBUTES/VARIABLE_VALUE"] == np.int64


def test_get_tensor_returns_the_saved_values(saved):
    path, _ = saved
    reader = tps.train.load_checkpoint(path)
    np.testing.assert_array_equal(reader.get_tensor("net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE"),
                                  np.arange(10, dtype=np.float32).reshape(2, 5))
    np.testing.assert_array_equal(reader.get_tensor("net/l1/kernel"), np.arange(10).reshape(2, 5))
    replicas = len(jax.devices())  # the fixture saved with MirroredStrategy(): one replica per device
    assert float(reader.get_tensor("total")) == sum(range(1, replicas + 1))  # the aggregate, as TF saves it
    assert reader.get_tensor("table").tolist() == [3, 1, 4]
    assert int(reader.get_tensor("epoch")) == 2
    assert int(reader.get_tensor("save_counter/.ATTRIBUTES/VARIABLE_VALUE")) == 2
    assert isinstance(json.loads(str(reader.get_tensor("iterator"))), dict)
    assert reader.has_tensor("net/l1/kernel") and not reader.has_tensor("net/l2")


def test_list_variables_gives_sorted_names_and_shapes(saved):
    path, _ = saved
    listed = tps.train.list_variables(path)
    assert [name for name, _ in listed] == sorted(name for name, _ in listed)
    assert ("net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE", [2, 5]) in listed


def test_a_missing_name_raises_not_found_listing_the_names(saved):
    reader = tps.train.load_checkpoint(saved[0])
    with pytest.raises(tps.errors.NotFoundError, match=r"(?s)Key net/l2 not found.*net/l1/kernel"):
        reader.get_tensor("net/l2")


def test_bad_paths_say_what_is_there(tmp_path):
    with pytest.raises(tps.errors.NotFoundError, match="no checkpoint or folder"):
        tps.train.load_checkpoint(str(tmp_path / "nope"))
    with pytest.raises(ValueError, match="couldn't find a checkpoint in the folder"):
        tps.train.list_variables(str(tmp_path))
    with pytest.raises(TypeError, match=r"ckpt_dir_or_file must be .*received int: 3"):
        tps.train.load_checkpoint(3)
