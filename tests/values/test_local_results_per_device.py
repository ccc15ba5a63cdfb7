"""``experimental_local_results``: one component per local replica, on that replica's device(s).

TensorFlow's tests check ``experimental_local_results(x)[i].device`` for dataset elements,
``run`` results and variables; with several cores per replica each component must be the
replica's whole logical value.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


def _model_parallel(replicas, cores):
    grid = np.array(jax.devices()[: replicas * cores]).reshape(replicas, cores)
    return tps.TPUStrategy(device_assignment=tps.tpu.DeviceAssignment.from_devices(grid))


def _replica_id():
    return jnp.float32(tps.get_replica_context().replica_id_in_sync_group)


@pytest.mark.devices(4)
def test_dataset_elements_and_run_results_have_one_component_on_each_replica_device():
    devices = jax.devices()[:4]
    strategy = tps.MirroredStrategy(devices)
    element = next(iter(strategy.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(8))))
    per_replica = strategy.run(_replica_id)
    mirrored = strategy.run(lambda: tps.get_replica_context().all_reduce("SUM", 1.0))
    for value in (element, per_replica, mirrored):
        parts = strategy.experimental_local_results(value)
        assert [p.devices() for p in parts] == [{d} for d in devices]
    assert [list(np.asarray(p)) for p in strategy.experimental_local_results(element)] == [
        [0, 1], [2, 3], [4, 5], [6, 7]]
    assert [float(p) for p in strategy.experimental_local_results(per_replica)] == [0.0, 1.0, 2.0, 3.0]
    assert [float(p) for p in strategy.experimental_local_results(mirrored)] == [4.0] * 4


@pytest.mark.devices(4)
def test_a_partial_last_batch_gives_each_replica_its_true_piece():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    batches = list(strategy.experimental_distribute_dataset(tpsd.Dataset.range(7).batch(7)))
    parts = strategy.experimental_local_results(batches[0])
    assert [list(np.asarray(p)) for p in parts] == [[0, 1], [2, 3], [4, 5], [6]]
    assert [p.devices() for p in parts] == [{d} for d in jax.devices()[:4]]


@pytest.mark.devices(4)
def test_variable_components_are_per_replica_handles_with_device_and_read_value():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    with strategy.scope():
        v = tps.Variable(np.arange(3, dtype=np.float32), name="v")
    parts = strategy.experimental_local_results(v)
    assert parts == tuple(parts)
    assert len(parts) == 4 and len(v.values) == 4
    assert [p.device for p in parts] == list(jax.devices()[:4])
    assert [p.name for p in parts] == ["v:0", "v/replica_1:0", "v/replica_2:0", "v/replica_3:0"]
    for p in parts:
        np.testing.assert_array_equal(p.read_value(), [0.0, 1.0, 2.0])
        np.testing.assert_array_equal(np.asarray(jnp.sum(p)), 3.0)
        assert p.primary is v
    assert v.distribute_strategy is strategy


@pytest.mark.devices(2)
def test_writing_one_copy_of_a_mirrored_variable_is_refused_with_the_fix():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with strategy.scope():
        v = tps.Variable(1.0, name="w")
    with pytest.raises(ValueError, match=r"diverge[\s\S]*Fix: write the variable itself"):
        v.values[1].assign(5.0)
    assert [float(p) for p in v.values] == [1.0, 1.0]


@pytest.mark.devices(4)
def test_a_sync_on_read_component_assign_sets_only_that_replica():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    with strategy.scope():
        v = tps.Variable(0.0, synchronization=tps.VariableSynchronization.ON_READ,
                         aggregation=tps.VariableAggregation.SUM)
    v.values[2].assign(5.0)
    v.values[0].assign_add(1.5)
    assert [float(p) for p in v.values] == [1.5, 0.0, 5.0, 0.0]
    assert float(v.read_value()) == 6.5


@pytest.mark.devices(8)
def test_several_cores_per_replica_give_each_replica_its_whole_value():
    strategy = _model_parallel(4, 2)
    w0 = np.arange(16, dtype=np.float32).reshape(4, 4)
    with strategy.scope():
        w = tps.Variable(w0)
    strategy.experimental_split_to_logical_devices(w, [1, 2])
    grid = np.array(jax.devices()[:8]).reshape(4, 2)
    for r, part in enumerate(strategy.experimental_local_results(w)):
        assert part.shape == (4, 4)
        assert part.devices() == set(grid[r])
        np.testing.assert_array_equal(np.asarray(part), w0)

    def split_step():
        value = w.read_value() + _replica_id()
        return strategy.experimental_split_to_logical_devices(value, [1, 2])

    for r, part in enumerate(strategy.experimental_local_results(strategy.run(split_step))):
        assert part.shape == (4, 4)
        assert part.sharding.device_set == set(grid[r])
        np.testing.assert_array_equal(np.asarray(part), w0 + r)


def test_one_local_component_per_process_reads_like_tensorflows_tensor(monkeypatch):
    value = tps.PerReplica([jnp.float32(3.5)])
    with pytest.raises(TypeError, match="one value per replica"):
        value.numpy()
    monkeypatch.setattr(jax, "process_count", lambda: 2)  # a worker with one device of a 2-worker job
    assert value.numpy() == 3.5 and float(value) == 3.5
    two = tps.PerReplica([jnp.float32(1.0), jnp.float32(2.0)])
    with pytest.raises(TypeError, match="experimental_local_results"):
        np.asarray(two)


@pytest.mark.devices(4)
def test_a_mirrored_value_reads_as_its_one_value():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    total = strategy.run(lambda: tps.get_replica_context().all_reduce("SUM", 1.5))
    assert float(total) == 6.0 and total.numpy() == 6.0


@pytest.mark.devices(4)
def test_local_results_of_a_small_run_result_are_views_made_by_the_program(monkeypatch):
    from tpustrategy._src.values import movement

    strategy = tps.MirroredStrategy(jax.devices()[:4])
    loss = strategy.run(lambda: _replica_id() * 2.0)

    def no_relayout(*args):
        raise AssertionError("local results of a program's small result needed another program")

    monkeypatch.setattr(movement, "relayout", no_relayout)
    parts = strategy.experimental_local_results(loss)
    assert [float(p) for p in parts] == [0.0, 2.0, 4.0, 6.0]
    assert [p.devices() for p in parts] == [{d} for d in jax.devices()[:4]]
    # The stacked form is still there for the next program (reduce reads it).
    assert float(strategy.reduce("SUM", loss, axis=None)) == 12.0
