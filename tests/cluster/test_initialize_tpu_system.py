"""initialize_tpu_system without TPUs logs once and returns a topology of the available devices,
so the TPU guide's first cells run on CPU and GPU."""

from __future__ import annotations

import logging

import jax

import tpustrategy as tps
from tpustrategy._src.cluster import connect


def test_without_tpus_it_returns_a_line_of_the_devices_and_logs_once(caplog, monkeypatch):
    monkeypatch.setattr(connect, "_logged_no_tpu", False)
    with caplog.at_level(logging.WARNING, logger="tpustrategy"):
        topology = tps.tpu.experimental.initialize_tpu_system()
        again = tps.tpu.experimental.initialize_tpu_system()
    n = len(jax.devices())
    assert topology.mesh_shape.tolist() == [n, 1, 1, 1] == again.mesh_shape.tolist()
    assert (topology.num_tasks, topology.num_tpus_per_task) == (1, n)
    assert topology.device_coordinates[0, :, 0].tolist() == list(range(n))
    assert caplog.text.count("no TPU found; returning a topology") == 1


def test_the_tpu_guides_first_cells_run_on_cpu():
    resolver = tps.cluster_resolver.TPUClusterResolver(tpu="local")
    tps.config.experimental_connect_to_cluster(resolver)
    topology = tps.tpu.experimental.initialize_tpu_system(resolver)
    assignment = tps.tpu.experimental.DeviceAssignment.build(topology, num_replicas=4)
    strategy = tps.TPUStrategy(resolver, experimental_device_assignment=assignment)
    assert strategy.num_replicas_in_sync == 4
    out = strategy.run(tps.function(lambda: tps.get_replica_context().replica_id_in_sync_group))
    assert [int(v) for v in strategy.experimental_local_results(out)] == [0, 1, 2, 3]
