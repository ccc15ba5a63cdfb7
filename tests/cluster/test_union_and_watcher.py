"""UnionResolver (TensorFlow's merging rules) and PreemptionWatcher (a notice to any process)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

import tpustrategy as tps
from tpustrategy._src.cluster import preemption_watcher

ClusterSpec = tps.train.ClusterSpec
Simple = tps.cluster_resolver.SimpleClusterResolver


def test_union_of_list_jobs_concatenates_them_in_resolver_order():
    # cluster_resolver_test.UnionClusterResolverTest.testOverlapClusterSpecMerge's lists
    a = Simple(ClusterSpec({"worker": ["worker0:2222", "worker1:2222"], "ps": ["ps0:2222"]}))
    b = Simple(ClusterSpec({"worker": ["worker2:2222"], "chief": ["chief:2222"]}))
    union = tps.cluster_resolver.UnionResolver(a, b)
    assert union.cluster_spec().as_dict() == {
        "worker": ["worker0:2222", "worker1:2222", "worker2:2222"], "ps": ["ps0:2222"], "chief": ["chief:2222"]}
    assert union.master("worker", 2, rpc_layer="grpc") == "grpc://worker2:2222"


def test_union_takes_task_and_rpc_layer_from_kwargs_else_from_the_first_resolver():
    a = Simple(ClusterSpec({"worker": ["w0:1", "w1:1"]}), task_type="worker", task_id=1, rpc_layer="grpc",
               master="grpc://w0:1")
    b = Simple(ClusterSpec({"ps": ["p0:1"]}))
    union = tps.cluster_resolver.UnionResolver(a, b)
    assert (union.task_type, union.task_id, union.rpc_layer, union.master()) == ("worker", 1, "grpc", "grpc://w0:1")
    assert union.process_id == 1 and union.num_processes == 2
    other = tps.cluster_resolver.UnionResolver(a, b, task_type="ps", task_id=0, rpc_layer="http")
    assert (other.task_type, other.task_id, other.rpc_layer) == ("ps", 0, "http")
    other.task_id = 3
    assert other.task_id == 3


def test_union_rejects_no_resolver_a_non_resolver_and_unknown_kwargs():
    with pytest.raises(ValueError, match="At least one ClusterResolver is required"):
        tps.cluster_resolver.UnionResolver()
    with pytest.raises(TypeError, match="(?s)All arguments must be a sub-class of `ClusterResolver.`.*SimpleClusterResolver"):
        tps.cluster_resolver.UnionResolver(ClusterSpec({"worker": ["a:1"]}))
    with pytest.raises(ValueError, match="unexpected keyword arguments \\['job'\\]"):
        tps.cluster_resolver.UnionResolver(Simple({"worker": ["a:1"]}), job="x")


@pytest.fixture
def python_sigterm_handler():
    calls = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    yield calls
    signal.signal(signal.SIGTERM, previous)


def test_watcher_has_no_message_until_sigterm_then_names_the_process_and_calls_the_previous_handler(
        python_sigterm_handler):
    watcher = tps.experimental.PreemptionWatcher()
    try:
        assert watcher.preemption_message is None
        os.kill(os.getpid(), signal.SIGTERM)
        watcher.block_until_worker_exit(timeout=30)
        assert "SIGTERM" in watcher.preemption_message and "process 0" in watcher.preemption_message
        assert python_sigterm_handler == [signal.SIGTERM]
    finally:
        watcher.close()
    assert signal.getsignal(signal.SIGTERM) is not watcher._on_sigterm


def test_watcher_reads_a_notice_another_process_published_in_the_coordination_service(monkeypatch):
    published = threading.Event()

    class Client:
        def blocking_key_value_get(self, key, timeout_ms):
            assert key == preemption_watcher.PREEMPTION_KEY
            if not published.is_set():
                raise RuntimeError("DEADLINE_EXCEEDED")
            return "preemption notice (SIGTERM) received by process 1 (pid 7)"

    monkeypatch.setattr(preemption_watcher, "_client", lambda: Client())
    watcher = tps.experimental.PreemptionWatcher()
    try:
        assert watcher.preemption_message is None
        published.set()
        watcher.block_until_worker_exit(timeout=30)
        assert watcher.preemption_message.endswith("process 1 (pid 7)")
    finally:
        watcher.close()


def test_block_until_worker_exit_waits_at_most_the_timeout_without_a_notice():
    watcher = tps.experimental.PreemptionWatcher()
    try:
        watcher.block_until_worker_exit(timeout=0.01)
        assert watcher.preemption_message is None
    finally:
        watcher.close()


# What TensorFlow 2.21 gives for the same calls (tf.train.ClusterSpec, UnionResolver).
def test_a_sparse_job_keeps_its_indices_as_tensorflow():
    spec = ClusterSpec({"worker": {1: "w1:2222", 3: "w3:2222"}, "ps": ["p0:1", "p1:1"]})
    assert spec.as_dict() == {"worker": {1: "w1:2222", 3: "w3:2222"}, "ps": ["p0:1", "p1:1"]}
    assert (spec.num_tasks("worker"), spec.task_indices("worker")) == (2, [1, 3])
    assert spec.job_tasks("worker") == [None, "w1:2222", None, "w3:2222"]
    assert spec.task_address("worker", 3) == "w3:2222" and spec.jobs == ["worker", "ps"]
    with pytest.raises(ValueError, match="No task with index 2 in job 'worker'"):
        spec.task_address("worker", 2)
    with pytest.raises(ValueError, match="No such job in cluster: 'nojob'"):
        spec.num_tasks("nojob")
    assert spec == ClusterSpec(spec.as_dict()) and not ClusterSpec({})
    assert ClusterSpec({"worker": {0: "a:1", 1: "b:1"}}).as_dict() == {"worker": ["a:1", "b:1"]}


def test_union_merges_a_sparse_job_by_index_and_refuses_an_index_given_twice():
    lists = Simple(ClusterSpec({"worker": ["x0:1", "x1:1"]}))
    sparse = Simple(ClusterSpec({"worker": {3: "w3:1", 5: "w5:1"}}))
    union = tps.cluster_resolver.UnionResolver(lists, sparse)
    assert union.cluster_spec().as_dict() == {"worker": {0: "x0:1", 1: "x1:1", 3: "w3:1", 5: "w5:1"}}
    clash = Simple(ClusterSpec({"worker": {0: "w0:1", 2: "w2:1"}}))
    with pytest.raises(KeyError, match=r"Duplicate keys detected when merging two ClusterSpecs: \{0\}"):
        tps.cluster_resolver.UnionResolver(clash, lists).cluster_spec()
    assert tps.cluster_resolver.UnionResolver(lists, lists).cluster_spec().as_dict() == {
        "worker": ["x0:1", "x1:1", "x0:1", "x1:1"]}


def test_with_sigterms_default_action_the_watcher_still_ends_the_process():
    import subprocess
    import sys

    code = ("import os, signal, tpustrategy as tps\n"
            "w = tps.experimental.PreemptionWatcher()\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "import time; time.sleep(30)\n"
            "raise SystemExit(3)\n")
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([sys.executable, "-c", code], env=env, timeout=120, capture_output=True, text=True)
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert "preemption notice (SIGTERM) received by process 0" in done.stderr
