"""TPUClusterResolver against TensorFlow's golden cases, plus the no-network rules."""

from __future__ import annotations

import json

import pytest

import tpustrategy as tps
from tests.golden.cases import case, ids
from tpustrategy._src.cluster import tpu as tpu_module

TPUClusterResolver = tps.cluster_resolver.TPUClusterResolver


def _observe(resolver):
    return {
        "master": resolver.master(),
        "get_master": resolver.get_master(),
        "cluster_spec": resolver.cluster_spec().as_dict(),
        "task_type": resolver.task_type,
        "task_id": resolver.task_id,
        "get_job_name": resolver.get_job_name(),
        "coordination_service_leader": resolver.get_coordination_service_leader(),
        "environment": resolver.environment,
        "rpc_layer": resolver.rpc_layer,
    }


@pytest.mark.parametrize("case_id", ids("tpu_cluster_resolver"))
def test_resolver_matches_tensorflow_golden_case(case_id, monkeypatch):
    golden = case(case_id)
    monkeypatch.setattr(tpu_module, "running_on_tpu_vm", lambda: False)
    for key, value in golden["input"]["env"].items():
        monkeypatch.setenv(key, value)
    kwargs = golden["input"]["kwargs"]
    if "error" in golden:
        error = golden["error"]
        with pytest.raises(Exception) as info:
            TPUClusterResolver(**kwargs)
        assert type(info.value).__name__ == error["type"]
        assert str(info.value) == error["message"]
    else:
        assert _observe(TPUClusterResolver(**kwargs)) == golden["output"]


def test_several_tpus_are_not_implemented():
    with pytest.raises(NotImplementedError, match="multiple TPUs in a single session"):
        TPUClusterResolver(tpu=["grpc://a", "grpc://b"])


def test_a_one_element_list_is_unwrapped():
    resolver = TPUClusterResolver(tpu=["grpc://10.0.0.2"])
    assert resolver.cluster_spec() == {"worker": ["10.0.0.2:8470"]}


def test_tpu_name_env_is_used_when_kube_endpoints_are_absent(monkeypatch):
    monkeypatch.setenv("TPU_NAME", "grpc://10.1.1.1:9000")
    assert TPUClusterResolver().master() == "grpc://10.1.1.1:9000"


def test_explicit_name_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("TPU_NAME", "grpc://10.1.1.1:9000")
    assert TPUClusterResolver("grpc://10.2.2.2").master() == "grpc://10.2.2.2:8470"


def test_job_name_names_the_cluster_spec_job():
    resolver = TPUClusterResolver("grpc://10.0.0.2", job_name="tpu_worker")
    assert resolver.cluster_spec().as_dict() == {"tpu_worker": ["10.0.0.2:8470"]}
    assert resolver.get_coordination_service_leader() == "/job:tpu_worker/task:0"


def test_a_cloud_tpu_name_off_the_tpu_vm_says_the_api_is_not_reachable(monkeypatch):
    monkeypatch.setattr(tpu_module, "running_on_tpu_vm", lambda: False)
    with pytest.raises(RuntimeError) as info:
        TPUClusterResolver("my-tpu", zone="us-central2-b", project="p")
    message = str(info.value)
    assert "Cloud TPU API is not reachable" in message
    assert "grpc://" in message and "TPU VM" in message
    assert "'my-tpu'" in message


def test_a_cloud_tpu_name_from_tpu_config_env_also_fails_clearly(monkeypatch):
    monkeypatch.setattr(tpu_module, "running_on_tpu_vm", lambda: False)
    monkeypatch.setenv("TPU_CONFIG", json.dumps({"tpu_node_name": "n", "project": "p",
                                                 "zone": "z"}))
    with pytest.raises(RuntimeError, match="project='p', zone='z'"):
        TPUClusterResolver()


def test_a_cloud_tpu_name_on_the_tpu_vm_leaves_the_hosts_to_jax(monkeypatch):
    monkeypatch.setattr(tpu_module, "running_on_tpu_vm", lambda: True)
    resolver = TPUClusterResolver("my-tpu")
    assert resolver.cluster_spec() == {}
    assert (resolver.coordinator_address, resolver.num_processes, resolver.process_id) == (
        None, None, None)


def test_bad_tpu_config_json_names_the_variable(monkeypatch):
    monkeypatch.setenv("TPU_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TPU_CONFIG is not valid JSON"):
        TPUClusterResolver()


def test_grpc_endpoints_become_jax_processes_with_a_coordinator_on_the_first_host():
    resolver = TPUClusterResolver("grpc://10.0.0.2:8470,grpc://10.0.0.3:8470")
    assert resolver.coordinator_address == "10.0.0.2:8482"
    assert resolver.num_processes == 2
    assert resolver.process_id is None


def test_tpu_worker_id_env_gives_the_process_id(monkeypatch):
    monkeypatch.setenv("TPU_WORKER_ID", "1")
    resolver = TPUClusterResolver("grpc://10.0.0.2,grpc://10.0.0.3",
                                  coordinator_address="10.0.0.2:1234")
    assert (resolver.coordinator_address, resolver.num_processes, resolver.process_id) == (
        "10.0.0.2:1234", 2, 1)


def test_one_endpoint_is_a_single_process_without_a_coordinator():
    resolver = TPUClusterResolver("grpc://10.0.0.2")
    assert (resolver.coordinator_address, resolver.num_processes, resolver.process_id) == (
        None, 1, 0)


def test_local_off_a_tpu_vm_is_a_single_process(monkeypatch):
    monkeypatch.setattr(tpu_module, "running_on_tpu_vm", lambda: False)
    resolver = TPUClusterResolver("local")
    assert resolver.master() == "" and resolver.cluster_spec() == {}
    assert (resolver.num_processes, resolver.process_id) == (1, 0)


def test_master_of_another_task_and_rpc_layer():
    resolver = TPUClusterResolver("grpc://10.0.0.2,grpc://10.0.0.3")
    assert resolver.master(task_id=1) == "grpc://10.0.0.3:8470"
    assert resolver.master(rpc_layer="http") == "http://10.0.0.2:8470"
