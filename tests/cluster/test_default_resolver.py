"""strategy.cluster_resolver as TensorFlow builds it: from TF_CONFIG, the launcher's variables,
a multi-process JAX job, or a local resolver — for the TPU and multi-worker strategies (the
single-host ones have none, as in TensorFlow)."""

from __future__ import annotations

import json
import signal

import jax
import pytest

import tpustrategy as tps
from tpustrategy._src.cluster.default import default_resolver

_ENV = ("TF_CONFIG", "TPS_NUM_PROCESSES", "TPS_PROCESS_ID", "TPS_PROCESS_ADDRESSES",
        "TPS_COORDINATOR_ADDRESS")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("make", [
    lambda: tps.MultiWorkerMirroredStrategy(),
])
def test_a_local_strategy_has_a_resolver_with_an_empty_cluster_and_no_task(make):
    resolver = make().cluster_resolver
    assert resolver is not None
    assert resolver.cluster_spec().as_dict() == {}
    assert (resolver.task_type, resolver.task_id) == (None, None)
    assert resolver.num_accelerators() == {}  # CPU devices only


@pytest.mark.parametrize("make", [
    lambda: tps.MirroredStrategy(),
    lambda: tps.OneDeviceStrategy(jax.devices()[0]),
])
def test_single_host_strategies_have_no_resolver_as_tensorflow(make):
    # issue 23: TensorFlow builds a resolver for TPU and multi-worker strategies only
    assert make().cluster_resolver is None


def test_tpu_strategy_without_a_resolver_builds_the_local_tpu_resolver():
    resolver = tps.TPUStrategy().cluster_resolver
    assert isinstance(resolver, tps.cluster_resolver.TPUClusterResolver)
    assert (resolver.task_type, resolver.task_id, resolver.tpu) == ("worker", 0, "local")
    assert resolver.num_accelerators() == {}


def test_a_given_resolver_is_kept():
    resolver = tps.cluster_resolver.SimpleClusterResolver({"worker": ["a:1"]}, task_type="worker",
                                                          task_id=0)
    assert tps.MultiWorkerMirroredStrategy(resolver).cluster_resolver is resolver


def test_tf_config_gives_a_tf_config_resolver_with_its_task(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": {"worker": ["localhost:12345"]},
                                                "task": {"type": "worker", "index": 0}}))
    resolver = tps.MultiWorkerMirroredStrategy().cluster_resolver
    assert isinstance(resolver, tps.cluster_resolver.TFConfigClusterResolver)
    assert resolver.cluster_spec().as_dict() == {"worker": ["localhost:12345"]}
    assert (resolver.task_type, resolver.task_id) == ("worker", 0)


def test_the_launchers_variables_give_one_worker_task_per_process(monkeypatch):
    monkeypatch.setenv("TPS_NUM_PROCESSES", "2")
    monkeypatch.setenv("TPS_PROCESS_ID", "1")
    monkeypatch.setenv("TPS_PROCESS_ADDRESSES", "127.0.0.1:9000,127.0.0.1:9001")
    resolver = default_resolver()
    assert resolver.cluster_spec().as_dict() == {"worker": ["127.0.0.1:9000", "127.0.0.1:9001"]}
    assert (resolver.task_type, resolver.task_id) == ("worker", 1)
    assert resolver.master("worker", 0) == "grpc://127.0.0.1:9000"
    assert (resolver.num_processes, resolver.process_id) == (2, 1)


def test_without_addresses_the_processes_get_placeholder_names(monkeypatch):
    monkeypatch.setenv("TPS_NUM_PROCESSES", "3")
    monkeypatch.setenv("TPS_PROCESS_ID", "2")
    resolver = default_resolver(tpu=True)
    assert resolver.cluster_spec().as_dict() == {"worker": ["process-0", "process-1", "process-2"]}
    assert resolver.task_id == 2


def test_the_preemption_handler_takes_the_strategys_resolver(tmp_path):
    previous = signal.getsignal(signal.SIGTERM)
    try:
        _handler_with_the_strategys_resolver(tmp_path)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _handler_with_the_strategys_resolver(tmp_path):
    strategy = tps.MultiWorkerMirroredStrategy()
    manager = tps.train.CheckpointManager(tps.train.Checkpoint(step=0), str(tmp_path), max_to_keep=1)
    handler = tps.experimental.PreemptionCheckpointHandler(strategy.cluster_resolver, manager)
    assert handler.total_run_calls == 0
    assert strategy.cluster_resolver.cluster_spec().as_dict() == {}
