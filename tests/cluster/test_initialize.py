"""tps.initialize: precedence, validation and the exact call of jax.distributed.initialize."""

from __future__ import annotations

import json
import os
from unittest import mock

import jax
import pytest

import tpustrategy as tps
from tpustrategy._src.cluster import initialize as init_module

FLAG = "--xla_cpu_collective_timeout_seconds"
# tps defaults 300 / 30 / 60 s: JAX gets a later start-up deadline and twice the heartbeat,
# so that tpustrategy names a missing or stuck process before JAX would abort.
TIMEOUTS = {"initialization_timeout": 360, "heartbeat_timeout_seconds": 60,
            "shutdown_timeout_seconds": 60}


def expected(coordinator, num, pid, bind="coordinator", **overrides):
    call = {"coordinator_address": coordinator, "num_processes": num, "process_id": pid,
            "local_device_ids": None, "cluster_detection_method": None, **TIMEOUTS,
            "coordinator_bind_address": coordinator if bind == "coordinator" else bind}
    call.update(overrides)
    return call


@pytest.fixture
def jax_init(monkeypatch):
    fake = mock.Mock(return_value=None)
    monkeypatch.setattr(jax.distributed, "initialize", fake)
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: False)
    return fake


def test_initialize_is_a_top_level_name():
    assert tps.initialize is init_module.initialize


def test_explicit_arguments_reach_jax_exactly(jax_init):
    config = tps.initialize(coordinator_address="10.0.0.1:1234", num_processes=2, process_id=1)
    jax_init.assert_called_once_with(**expected("10.0.0.1:1234", 2, 1))
    assert config.distributed
    assert config.sources == dict.fromkeys(
        ("coordinator_address", "num_processes", "process_id"), "argument")


def test_a_loopback_coordinator_binds_to_loopback_and_drops_proxies(jax_init, monkeypatch):
    monkeypatch.setenv("https_proxy", "http://proxy:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy:3128")
    tps.initialize(coordinator_address="127.0.0.1:5555", num_processes=2, process_id=0,
                   initialization_timeout=20, heartbeat_timeout=10, shutdown_timeout=5)
    jax_init.assert_called_once_with(**expected(
        "127.0.0.1:5555", 2, 0, bind="127.0.0.1:5555", initialization_timeout=30,
        heartbeat_timeout_seconds=20, shutdown_timeout_seconds=5))
    assert "https_proxy" not in os.environ and "HTTP_PROXY" not in os.environ


def test_a_remote_coordinator_keeps_proxies_and_binds_only_its_own_address(jax_init,
                                                                            monkeypatch):
    monkeypatch.setenv("https_proxy", "http://proxy:3128")
    tps.initialize(coordinator_address="10.0.0.1:1234", num_processes=2, process_id=0)
    assert jax_init.call_args.kwargs["coordinator_bind_address"] == "10.0.0.1:1234"
    assert os.environ["https_proxy"] == "http://proxy:3128"


def test_the_tf_config_address_is_what_the_coordinator_binds(jax_init, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"worker": ["10.1.2.3:2222", "10.1.2.4:2222"]},
        "task": {"type": "worker", "index": 0}}))
    tps.initialize()
    assert jax_init.call_args.kwargs["coordinator_bind_address"] == "10.1.2.3:2222"


def test_every_interface_only_when_asked_for(jax_init):
    tps.initialize(coordinator_address="10.0.0.1:1234", num_processes=2, process_id=0,
                   coordinator_bind_address="0.0.0.0:1234")
    assert jax_init.call_args.kwargs["coordinator_bind_address"] == "0.0.0.0:1234"


def test_the_cpu_collective_timeout_is_set_unless_xla_flags_has_one(jax_init, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    tps.initialize(coordinator_address="127.0.0.1:5555", num_processes=2, process_id=0,
                   collective_timeout=45)
    assert os.environ["XLA_FLAGS"].split() == [
        "--xla_force_host_platform_device_count=4", f"{FLAG}=45"]
    init_module._reset_for_tests()
    monkeypatch.setenv("XLA_FLAGS", f"{FLAG}=7")
    tps.initialize(coordinator_address="127.0.0.1:5555", num_processes=2, process_id=0)
    assert os.environ["XLA_FLAGS"] == f"{FLAG}=7"


def test_tps_environment_variables_are_used_without_arguments(jax_init, monkeypatch):
    monkeypatch.setenv("TPS_COORDINATOR_ADDRESS", "127.0.0.1:4000")
    monkeypatch.setenv("TPS_NUM_PROCESSES", "3")
    monkeypatch.setenv("TPS_PROCESS_ID", "2")
    config = tps.initialize()
    jax_init.assert_called_once_with(**expected("127.0.0.1:4000", 3, 2, bind="127.0.0.1:4000"))
    assert config.sources["process_id"] == "TPS_PROCESS_ID"


def test_an_explicit_argument_beats_the_environment_field_by_field(jax_init, monkeypatch):
    monkeypatch.setenv("TPS_COORDINATOR_ADDRESS", "127.0.0.1:4000")
    monkeypatch.setenv("TPS_NUM_PROCESSES", "2")
    monkeypatch.setenv("TPS_PROCESS_ID", "0")
    config = tps.initialize(process_id=1)
    jax_init.assert_called_once_with(**expected("127.0.0.1:4000", 2, 1, bind="127.0.0.1:4000"))
    assert config.sources == {"coordinator_address": "TPS_COORDINATOR_ADDRESS",
                              "num_processes": "TPS_NUM_PROCESSES", "process_id": "argument"}


def test_a_resolver_beats_the_environment_and_arguments_beat_the_resolver(jax_init,
                                                                          monkeypatch):
    monkeypatch.setenv("TPS_COORDINATOR_ADDRESS", "127.0.0.1:4000")
    monkeypatch.setenv("TPS_NUM_PROCESSES", "9")
    resolver = tps.cluster_resolver.SimpleClusterResolver(
        {"worker": ["10.0.0.1:7000", "10.0.0.2:7000"]}, task_type="worker", task_id=1)
    config = tps.initialize(resolver, coordinator_address="10.0.0.9:7777")
    jax_init.assert_called_once_with(**expected("10.0.0.9:7777", 2, 1))
    assert config.sources == {"coordinator_address": "argument",
                              "num_processes": "SimpleClusterResolver",
                              "process_id": "SimpleClusterResolver"}


def test_tf_config_is_used_and_tps_variables_beat_it(jax_init, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"chief": ["c:2222"], "worker": ["w:2222"]},
        "task": {"type": "worker", "index": 0}}))
    monkeypatch.setenv("TPS_PROCESS_ID", "0")
    config = tps.initialize()
    jax_init.assert_called_once_with(**expected("c:2222", 2, 0))
    assert config.sources == {"coordinator_address": "TF_CONFIG",
                              "num_processes": "TF_CONFIG", "process_id": "TPS_PROCESS_ID"}


def test_nothing_configured_leaves_everything_to_jax_detection(jax_init):
    config = tps.initialize(heartbeat_timeout=5)
    jax_init.assert_called_once_with(**expected(None, None, None, heartbeat_timeout_seconds=10))
    assert config.sources == {}


def test_when_jax_detection_finds_nothing_the_error_says_where_we_looked(monkeypatch):
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(jax.distributed, "initialize", mock.Mock(
        side_effect=ValueError("coordinator_address should be defined.")))
    with pytest.raises(ValueError) as info:
        tps.initialize(num_processes=2)
    message = str(info.value)
    assert "could not find coordinator_address, process_id" in message
    assert "TPS_COORDINATOR_ADDRESS" in message and "tpustrategy.launch" in message
    assert isinstance(info.value.__cause__, ValueError)


def test_initialize_after_the_backend_started_says_to_call_it_first(monkeypatch):
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(jax.distributed, "initialize", mock.Mock(side_effect=RuntimeError(
        "jax.distributed.initialize() must be called before any JAX calls")))
    with pytest.raises(RuntimeError, match="call tps.initialize\\(\\) first thing"):
        tps.initialize(coordinator_address="10.0.0.1:1", num_processes=2, process_id=0)


def test_a_single_process_without_coordinator_does_not_start_jax_distributed(jax_init):
    config = tps.initialize(num_processes=1)
    jax_init.assert_not_called()
    assert not config.distributed and config.process_id is None


def test_a_local_tpu_resolver_off_a_tpu_vm_is_a_single_process(jax_init, monkeypatch):
    from tpustrategy._src.cluster import tpu as tpu_module

    monkeypatch.setattr(tpu_module, "running_on_tpu_vm", lambda: False)
    config = tps.initialize(tps.cluster_resolver.TPUClusterResolver("local"))
    jax_init.assert_not_called()
    assert (config.num_processes, config.process_id) == (1, 0)


def test_a_second_identical_call_is_a_no_op(jax_init):
    first = tps.initialize(coordinator_address="10.0.0.1:1234", num_processes=2, process_id=0)
    second = tps.initialize(coordinator_address="10.0.0.1:1234", num_processes=2, process_id=0)
    assert first is second
    jax_init.assert_called_once()


def test_a_second_different_call_shows_both(jax_init):
    tps.initialize(coordinator_address="10.0.0.1:1234", num_processes=2, process_id=0)
    with pytest.raises(RuntimeError) as info:
        tps.initialize(coordinator_address="10.0.0.1:1234", num_processes=2, process_id=1)
    message = str(info.value)
    assert "already called with different arguments" in message
    assert "process_id=0" in message and "process_id=1" in message
    jax_init.assert_called_once()


def test_jax_initialized_directly_with_other_values_is_an_error(jax_init, monkeypatch):
    from jax._src import distributed

    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed.global_state, "process_id", 0)
    monkeypatch.setattr(distributed.global_state, "num_processes", 4)
    monkeypatch.setattr(distributed.global_state, "coordinator_address", "10.0.0.1:1")
    with pytest.raises(RuntimeError, match="already initialized \\(directly through JAX\\)"):
        tps.initialize(coordinator_address="10.0.0.1:1", num_processes=2, process_id=0)
    config = tps.initialize(coordinator_address="10.0.0.1:1", num_processes=4, process_id=0)
    jax_init.assert_not_called()
    assert config.num_processes == 4


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"process_id": "1"}, TypeError,
     "process_id must be a nonnegative int. Got process_id='1' of type str"),
    ({"process_id": -1}, ValueError, "process_id must be a nonnegative int. Got process_id=-1"),
    ({"process_id": True}, TypeError, "process_id must be a nonnegative int. Got process_id=True"),
    ({"num_processes": 0}, ValueError,
     "num_processes must be a positive int. Got num_processes=0"),
    ({"num_processes": 2.0}, TypeError,
     "num_processes must be a positive int. Got num_processes=2.0 of type float"),
    ({"num_processes": 2, "process_id": 2}, ValueError,
     "process_id must be smaller than num_processes. Got process_id=2 and num_processes=2"),
    ({"coordinator_address": "localhost"}, ValueError,
     "coordinator_address must be 'host:port' with a port in 1..65535. "
     "Got coordinator_address='localhost'"),
    ({"coordinator_address": 1234}, TypeError, "coordinator_address must be a 'host:port' string"),
    ({"initialization_timeout": 0}, ValueError,
     "initialization_timeout must be a positive int \\(seconds\\). Got initialization_timeout=0"),
    ({"heartbeat_timeout": -5}, ValueError, "heartbeat_timeout must be a positive int"),
    ({"collective_timeout": 0}, ValueError, "collective_timeout must be a positive int"),
    ({"local_device_ids": "0"}, TypeError, "local_device_ids must be an int or a sequence"),
])
def test_invalid_values_name_the_argument_and_what_was_received(jax_init, kwargs, error,
                                                                message):
    with pytest.raises(error, match=message) as info:
        tps.initialize(**kwargs)
    assert "tps.initialize" in str(info.value) and "Fix:" in str(info.value)
    jax_init.assert_not_called()


def test_an_invalid_environment_value_names_the_variable(jax_init, monkeypatch):
    monkeypatch.setenv("TPS_NUM_PROCESSES", "two")
    with pytest.raises(ValueError, match="environment variable TPS_NUM_PROCESSES='two' is not"):
        tps.initialize()
    monkeypatch.setenv("TPS_NUM_PROCESSES", "2")
    monkeypatch.setenv("TPS_PROCESS_ID", "5")
    with pytest.raises(ValueError, match=r"process_id=5 \(from TPS_PROCESS_ID\) and "
                                         r"num_processes=2 \(from TPS_NUM_PROCESSES\)"):
        tps.initialize()


def test_a_resolver_of_the_wrong_type_is_named(jax_init):
    with pytest.raises(TypeError, match="cluster_resolver must be a tps.cluster_resolver"):
        tps.initialize(object())


def test_local_device_ids_and_detection_method_pass_through(jax_init):
    tps.initialize(coordinator_address="10.0.0.1:1", num_processes=2, process_id=0,
                   local_device_ids=3, cluster_detection_method="deactivate")
    jax_init.assert_called_once_with(**expected(
        "10.0.0.1:1", 2, 0, local_device_ids=[3], cluster_detection_method="deactivate"))


def test_jax_waits_longer_than_tpustrategy_at_start_up_and_for_heartbeats():
    from tpustrategy._src.cluster import joining

    assert joining.jax_initialization_timeout(10) == 20
    assert joining.jax_initialization_timeout(300) == 360
    assert joining.jax_heartbeat_timeout(30) == 60


def test_the_launcher_addresses_name_every_process(monkeypatch):
    monkeypatch.setenv("TPS_PROCESS_ADDRESSES", "127.0.0.1:1,127.0.0.1:2")
    values = {"coordinator_address": "127.0.0.1:1", "num_processes": 2, "process_id": 1}
    peers = init_module.peers_of(values, {"process_id": "TPS_PROCESS_ID"})
    assert [peers[i].describe() for i in (0, 1)] == ["process 0 of 2 (127.0.0.1:1)",
                                                     "process 1 of 2 (127.0.0.1:2)"]


def test_tf_config_task_names_and_addresses_name_every_process(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"chief": ["c:1"], "worker": ["w0:2", "w1:3"]},
        "task": {"type": "worker", "index": 1}}))
    values = {"coordinator_address": "c:1", "num_processes": 3, "process_id": 2}
    peers = init_module.peers_of(values, {"process_id": "TF_CONFIG"})
    assert peers[0].describe() == "process 0 of 3 (chief:0, c:1)"
    assert peers[2].describe() == "process 2 of 3 (worker:1, w1:3)"
    assert init_module.peers_of({**values, "num_processes": 5}, {}) == {}


TWO_WORKERS = {"cluster": {"worker": ["127.0.0.1:7001", "127.0.0.1:7002"]},
               "task": {"type": "worker", "index": 1}}


def test_a_strategy_joins_the_tf_config_job_itself_when_jax_has_not_started(jax_init,
                                                                              monkeypatch):
    from tpustrategy._src.jax_shims import backend

    monkeypatch.setenv("TF_CONFIG", json.dumps(TWO_WORKERS))
    monkeypatch.setattr(backend, "backends_started", lambda: False)
    init_module.join_for_strategy()
    jax_init.assert_called_once_with(**expected("127.0.0.1:7001", 2, 1))


def test_a_strategy_too_late_to_join_says_to_call_initialize_first(jax_init, monkeypatch):
    from tpustrategy._src.jax_shims import backend

    monkeypatch.setenv("TF_CONFIG", json.dumps(TWO_WORKERS))
    monkeypatch.setattr(backend, "backends_started", lambda: True)
    with pytest.raises(RuntimeError) as info:
        tps.MultiWorkerMirroredStrategy()
    message = str(info.value)
    assert message.startswith("MultiWorkerMirroredStrategy: TF_CONFIG describes a job of 2 "
                              "processes (this is process 1), but JAX already started")
    assert "Fix: call tps.initialize() first thing" in message
    jax_init.assert_not_called()


def test_a_strategy_in_a_job_of_another_size_is_refused(jax_init, monkeypatch):
    from jax._src import distributed

    monkeypatch.setenv("TF_CONFIG", json.dumps(TWO_WORKERS))
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(distributed.global_state, "num_processes", 3)
    with pytest.raises(RuntimeError, match="describes a job of 2 processes, but this process "
                                           "joined a job of 3"):
        init_module.join_for_strategy()
    monkeypatch.setattr(distributed.global_state, "num_processes", 2)
    init_module.join_for_strategy()
    jax_init.assert_not_called()


def test_a_strategy_without_a_cluster_does_nothing(jax_init):
    init_module.join_for_strategy()
    strategy = tps.MultiWorkerMirroredStrategy()
    jax_init.assert_not_called()
    assert strategy.num_replicas_in_sync == jax.device_count()
