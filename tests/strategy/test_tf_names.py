"""TensorFlow names a custom training loop or a distribute test uses, doing the JAX equivalent."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest

import tpustrategy as tps


def _s(n=4, **kwargs):
    return tps.MirroredStrategy(devices=jax.devices()[:n], **kwargs)


def _per_replica(n=4):
    return tps.PerReplica([np.full(2, float(i + 1), np.float32) for i in range(n)])


@pytest.mark.devices(4)
def test_run_accepts_run_options():
    s = _s()
    out = s.run(lambda x: x * 2, (_per_replica(),),
                options=tps.RunOptions(experimental_enable_dynamic_batch_size=False))
    assert [float(v[0]) for v in s.experimental_local_results(out)] == [2.0, 4.0, 6.0, 8.0]


@pytest.mark.devices(4)
def test_reduce_to_and_batch_reduce_to_give_mirrored_reductions():
    s = _s()
    total = s.extended.reduce_to(tps.ReduceOp.SUM, _per_replica(), destinations=_per_replica())
    assert isinstance(total, tps.Mirrored)
    assert [np.asarray(v).tolist() for v in total.values] == [[10.0, 10.0]] * 4
    mean, summed = s.extended.batch_reduce_to("MEAN", [(_per_replica(), "/cpu:0"), (_per_replica(), "/cpu:1")])
    assert np.asarray(mean).tolist() == [2.5, 2.5]  # one destination device: a plain array, as in TensorFlow
    assert np.asarray(summed).tolist() == [2.5, 2.5]


def test_extended_update_runs_the_update_function_on_the_variable():
    s = _s()
    with s.scope():
        v = tps.Variable(1.0)
    s.extended.update(v, lambda var, d: var.assign_add(d), args=(2.0,))
    assert float(v.read_value()) == 3.0
    assert s.extended.variable_created_in_scope(v)
    assert not s.extended.variable_created_in_scope(tps.Variable(0.0))
    assert s.extended.worker_devices == tuple(jax.devices()[:4])


def test_cluster_resolver_is_what_the_strategy_was_built_with():
    from tpustrategy._src.cluster.cluster_spec import ClusterSpec

    assert _s().cluster_resolver is None  # issue 23: TensorFlow's MirroredStrategy has none
    local = tps.MultiWorkerMirroredStrategy().cluster_resolver  # issue 18: a local resolver, as TF's
    assert local.cluster_spec().as_dict() == {} and (local.task_type, local.task_id) == (None, None)
    resolver = tps.cluster_resolver.SimpleClusterResolver(ClusterSpec({"worker": ["localhost:2222"]}))
    assert tps.TPUStrategy(resolver).cluster_resolver is resolver


@pytest.mark.devices(4)
@pytest.mark.parametrize("ops", [lambda: tps.HierarchicalCopyAllReduce(num_packs=2), lambda: tps.NcclAllReduce(),
                                 lambda: tps.ReductionToOneDevice(reduce_to_device="/cpu:0")])
def test_cross_device_ops_are_accepted_and_give_the_same_all_reduce(ops, caplog):
    caplog.set_level(logging.INFO, logger="tpustrategy")
    s = _s(cross_device_ops=ops())

    def fn(x):
        return tps.get_replica_context().all_reduce("SUM", x)

    out = s.run(fn, (_per_replica(),))
    assert np.asarray(out.values[0]).tolist() == [10.0, 10.0]


def test_communication_options_and_implementation():
    opts = tps.experimental.CommunicationOptions(bytes_per_pack=1024, timeout_seconds=5,
                                                 implementation=tps.experimental.CommunicationImplementation.RING)
    assert opts.implementation is tps.experimental.CommunicationImplementation.RING
    assert tps.experimental.CommunicationOptions(implementation="nccl").implementation.name == "NCCL"


@pytest.mark.devices(4)
def test_an_all_reduce_accepts_communication_options():
    opts = tps.experimental.CommunicationOptions(bytes_per_pack=1024, timeout_seconds=5,
                                                 implementation=tps.experimental.CommunicationImplementation.RING)
    s = _s()
    assert float(s.reduce("SUM", s.run(lambda: tps.get_replica_context().all_reduce("SUM", 1.0,
                                                                                       options=opts)), axis=None)) == 16.0


def test_device_listing_follows_tensorflows_names():
    assert tps.config.list_physical_devices("CPU") == [tps.config.PhysicalDevice("/physical_device:CPU:0", "CPU")]
    logical = tps.config.list_logical_devices("CPU")
    assert [d.name for d in logical] == [f"/device:CPU:{i}" for i in range(len(jax.devices()))]
    assert tps.config.list_logical_devices("GPU") == []


def test_set_logical_device_configuration_before_jax_starts_gives_that_many_cpu_devices():
    script = textwrap.dedent("""
        import tpustrategy as tps
        cpu = tps.config.list_physical_devices("CPU")[0]
        tps.config.set_logical_device_configuration(cpu, [tps.config.LogicalDeviceConfiguration()] * 6)
        s = tps.MirroredStrategy()
        print(s.num_replicas_in_sync, len(tps.config.list_logical_devices("CPU")))
    """)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["6", "6"]


def test_connect_to_cluster_initialises_this_process_as_the_specs_task(monkeypatch):
    from tpustrategy._src.cluster import connect, initialize
    from tpustrategy._src.cluster.cluster_spec import ClusterSpec

    calls = []
    monkeypatch.setattr(initialize, "initialize", lambda resolver: calls.append(resolver) or "started")
    monkeypatch.setattr(connect, "_is_started", lambda: False)
    spec = ClusterSpec({"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]})
    assert tps.config.experimental_connect_to_cluster(spec, task_index=1) == "started"
    assert (calls[0].task_type, calls[0].task_id, calls[0].num_processes) == ("worker", 1, 2)
    with pytest.raises(ValueError, match="job_name"):
        tps.config.experimental_connect_to_cluster(ClusterSpec({"chief": ["a:1"], "worker": ["b:1"]}))
