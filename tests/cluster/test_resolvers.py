"""TFConfig, Simple and Slurm resolvers, and ClusterSpec."""

from __future__ import annotations

import json

import pytest

import tpustrategy as tps

cr = tps.cluster_resolver


def _tf_config(monkeypatch, cluster, task_type="worker", index=0, **extra):
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": cluster, "task": {"type": task_type, "index": index}, **extra}))


# -- ClusterSpec ---------------------------------------------------------------------------

def test_cluster_spec_compares_equal_to_its_dict():
    spec = cr.ClusterSpec({"worker": ["a:1", "b:1"], "chief": ["c:1"]})
    assert spec == {"worker": ["a:1", "b:1"], "chief": ["c:1"]}
    assert spec.num_tasks("worker") == 2 and spec.task_address("chief", 0) == "c:1"
    assert spec.jobs == ["worker", "chief"] and spec.task_indices("worker") == [0, 1]


def test_cluster_spec_accepts_task_index_mappings():
    assert cr.ClusterSpec({"worker": {1: "b:1", 0: "a:1"}}) == {"worker": ["a:1", "b:1"]}


def test_cluster_spec_names_a_missing_job_and_task():
    spec = cr.ClusterSpec({"worker": ["a:1"]})
    with pytest.raises(ValueError, match="no job named 'ps'"):
        spec.num_tasks("ps")
    with pytest.raises(ValueError, match="no task 3 in job 'worker'"):
        spec.task_address("worker", 3)


def test_cluster_spec_rejects_a_bare_string_job():
    with pytest.raises(TypeError, match="must map to a list"):
        cr.ClusterSpec({"worker": "a:1"})


# -- TFConfigClusterResolver ---------------------------------------------------------------

def test_tf_config_gives_spec_task_and_process(monkeypatch):
    _tf_config(monkeypatch, {"worker": ["h0:2222", "h1:2222"]}, "worker", 1, rpc_layer="grpc")
    resolver = cr.TFConfigClusterResolver()
    assert resolver.cluster_spec() == {"worker": ["h0:2222", "h1:2222"]}
    assert (resolver.task_type, resolver.task_id, resolver.rpc_layer) == ("worker", 1, "grpc")
    assert resolver.master() == "grpc://h1:2222"
    assert (resolver.coordinator_address, resolver.num_processes, resolver.process_id) == (
        "h0:2222", 2, 1)


def test_tf_config_chief_is_process_zero_and_the_coordinator(monkeypatch):
    _tf_config(monkeypatch, {"chief": ["c:1"], "worker": ["w0:1", "w1:1"],
                             "evaluator": ["e:1"]}, "worker", 1)
    resolver = cr.TFConfigClusterResolver()
    assert (resolver.coordinator_address, resolver.num_processes, resolver.process_id) == (
        "c:1", 3, 2)


def test_tf_config_is_read_on_every_call(monkeypatch):
    resolver = cr.TFConfigClusterResolver()
    assert resolver.cluster_spec() == {} and resolver.num_processes is None
    _tf_config(monkeypatch, {"worker": ["a:1"]})
    assert resolver.num_processes == 1


def test_tf_config_task_overrides(monkeypatch):
    _tf_config(monkeypatch, {"worker": ["a:1", "b:1"]}, "worker", 0)
    resolver = cr.TFConfigClusterResolver(task_type="worker", task_id=1)
    assert resolver.process_id == 1
    resolver.task_id = 0
    assert resolver.process_id == 0


def test_tf_config_evaluator_is_not_part_of_the_jax_job(monkeypatch):
    _tf_config(monkeypatch, {"worker": ["a:1"], "evaluator": ["e:1"]}, "evaluator", 0)
    with pytest.raises(ValueError, match="task_type='evaluator' does not take part"):
        cr.TFConfigClusterResolver().process_id  # noqa: B018


def test_tf_config_task_outside_the_spec_is_named(monkeypatch):
    _tf_config(monkeypatch, {"worker": ["a:1"]}, "worker", 4)
    with pytest.raises(ValueError, match="task worker:4 is not in the cluster spec"):
        cr.TFConfigClusterResolver().process_id  # noqa: B018


def test_tf_config_that_is_not_json_says_so(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{cluster: ")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        cr.TFConfigClusterResolver().cluster_spec()


# -- SimpleClusterResolver -----------------------------------------------------------------

def test_simple_resolver_returns_what_it_was_given():
    resolver = cr.SimpleClusterResolver({"worker": ["a:1", "b:1"]}, master="grpc://a:1",
                                        task_type="worker", task_id=1, rpc_layer="grpc",
                                        num_accelerators={"TPU": 8})
    assert resolver.master() == "grpc://a:1"
    assert resolver.master("worker", 1) == "grpc://b:1"
    assert resolver.num_accelerators() == {"TPU": 8}
    assert (resolver.coordinator_address, resolver.num_processes, resolver.process_id) == (
        "a:1", 2, 1)


def test_simple_resolver_without_a_task_leaves_process_id_unknown():
    resolver = cr.SimpleClusterResolver(cr.ClusterSpec({"worker": ["a:1", "b:1"]}))
    assert resolver.process_id is None and resolver.num_processes == 2


def test_simple_resolver_rejects_a_negative_task_id():
    with pytest.raises(TypeError, match="task_id must be a nonnegative int. Got task_id=-1"):
        cr.SimpleClusterResolver({"worker": ["a:1"]}, task_type="worker", task_id=-1)


# -- SlurmClusterResolver ------------------------------------------------------------------

def _slurm(monkeypatch, procid, ntasks, nodelist, per_node=None):
    monkeypatch.setenv("SLURM_PROCID", str(procid))
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", str(ntasks))
    monkeypatch.setenv("SLURM_STEP_NODELIST", nodelist)
    if per_node is not None:
        monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", per_node)


def test_slurm_hostlists_and_task_counts_expand():
    from tpustrategy._src.cluster.slurm import expand_hostlist, expand_tasks_per_node

    assert expand_hostlist("n[1-2],m5,o[3-4,6,7-9]") == [
        "n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9"]
    assert expand_hostlist("node[001-003]") == ["node001", "node002", "node003"]
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]


def test_slurm_resolver_builds_the_spec_from_the_step(monkeypatch):
    _slurm(monkeypatch, 3, 4, "node[01-02]", "2(x2)")
    resolver = cr.SlurmClusterResolver(port_base=9000)
    assert resolver.cluster_spec() == {
        "worker": ["node01:9000", "node01:9001", "node02:9000", "node02:9001"]}
    assert (resolver.task_type, resolver.task_id) == ("worker", 3)
    assert resolver.master() == "grpc://node02:9001"
    assert (resolver.coordinator_address, resolver.num_processes, resolver.process_id) == (
        "node01:9000", 4, 3)


def test_slurm_resolver_assigns_tasks_to_jobs_in_order(monkeypatch):
    _slurm(monkeypatch, 0, 3, "a,b,c", "1(x3)")
    resolver = cr.SlurmClusterResolver(jobs={"chief": 1, "worker": 2})
    assert resolver.cluster_spec() == {"chief": ["a:8888"], "worker": ["b:8888", "c:8888"]}
    assert resolver.get_task_info() == ("chief", 0) and resolver.process_id == 0


def test_slurm_resolver_outside_slurm_lists_the_missing_variables():
    with pytest.raises(ValueError, match="SLURM_PROCID, SLURM_STEP_NUM_TASKS, "
                                         "SLURM_STEP_NODELIST are not set"):
        cr.SlurmClusterResolver()


def test_slurm_resolver_jobs_must_add_up(monkeypatch):
    _slurm(monkeypatch, 0, 2, "a,b", "1(x2)")
    with pytest.raises(ValueError, match="ask for 3 tasks, but the Slurm step has 2"):
        cr.SlurmClusterResolver(jobs={"worker": 3})
