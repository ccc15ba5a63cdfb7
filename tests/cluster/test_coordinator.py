"""The coordination service's helper process: binds exactly its address, stops when told."""

from __future__ import annotations

import socket

import pytest

from tpustrategy._src.cluster import coordinator
from tpustrategy._src.cluster.launch import free_port

pytestmark = pytest.mark.timeout(60)


def test_the_helper_serves_on_the_given_address_and_stops_when_told():
    port = free_port()
    service = coordinator.start(f"127.0.0.1:{port}", 2, heartbeat_timeout=10,
                                shutdown_timeout=5)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        service.shutdown()
    assert service.proc.wait(10) == 0


def test_the_helper_goes_away_with_the_process_that_started_it():
    port = free_port()
    service = coordinator.start(f"127.0.0.1:{port}", 2, heartbeat_timeout=10,
                                shutdown_timeout=5, linger=30)
    service.proc.stdin.close()  # what the end of process 0 looks like to the helper
    # Nothing is connected to the service, so it does not linger.
    assert service.proc.wait(10) == 0


def test_an_address_that_cannot_be_bound_is_a_clear_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RuntimeError) as info:
            coordinator.start(f"127.0.0.1:{port}", 2, heartbeat_timeout=10, shutdown_timeout=5)
    message = str(info.value)
    assert message.startswith(f"tps.initialize: the coordination service could not listen on "
                              f"127.0.0.1:{port}")
    assert "coordinator_bind_address='0.0.0.0:PORT'" in message and "private network" in message


def test_jax_gets_the_stand_in_only_while_hosting_and_only_without_recoverability():
    from jaxlib import _jax

    original = _jax.get_distributed_runtime_service
    with coordinator.hosted(True):
        assert _jax.get_distributed_runtime_service is not original
    assert _jax.get_distributed_runtime_service is original
    with coordinator.hosted(False):
        assert _jax.get_distributed_runtime_service is original


def _factory_parameters():
    """The keyword parameters of the installed jaxlib's service factory, from its signature line."""
    import re

    from jaxlib import _jax

    doc = _jax.get_distributed_runtime_service.__doc__ or ""
    signature = doc.splitlines()[0]
    names = re.findall(r"(\w+): [^,()]+(?:\[[^\]]*\])?[^,()]*= ", signature)
    assert names[:1] == ["heartbeat_timeout"], signature  # the first keyword after address, num_nodes
    return names


def test_the_stand_in_takes_every_argument_the_installed_jaxlib_factory_has():
    from jaxlib import _jax

    port = free_port()
    defaults = {name: None for name in _factory_parameters()}
    with coordinator.hosted(True):
        service = _jax.get_distributed_runtime_service(
            f"127.0.0.1:{port}", 2, **{**defaults, "heartbeat_timeout": 10, "shutdown_timeout": 5})
    try:
        assert isinstance(service, coordinator.HostedService)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        service.shutdown()
    assert service.proc.wait(10) == 0


def test_arguments_that_are_set_reach_jaxlibs_factory_in_the_helper():
    import json

    port = free_port()
    service = coordinator.start(f"127.0.0.1:{port}", 2, heartbeat_timeout=10, shutdown_timeout=5,
                                cluster_register_timeout=7, mtls_cert_file=None)
    try:
        passed = json.loads(service.proc.args[-3])
        assert passed == {"heartbeat_timeout": 10, "shutdown_timeout": 5, "cluster_register_timeout": 7}
    finally:
        service.shutdown()
    assert service.proc.wait(10) == 0


def test_an_argument_jaxlib_does_not_take_is_named_in_the_error():
    port = free_port()
    with pytest.raises(RuntimeError, match="tps_no_such_argument"):
        coordinator.start(f"127.0.0.1:{port}", 2, heartbeat_timeout=10, tps_no_such_argument=1)
