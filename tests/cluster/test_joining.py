"""Start-up deadline: who is missing, by probing each process's configured address."""

from __future__ import annotations

import socket

import pytest

import tpustrategy as tps
from tpustrategy._src.cluster import joining
from tpustrategy._src.cluster.faults import Peer
from tpustrategy._src.cluster.launch import free_port


class Listening:
    """A process that has started: something accepts connections at its address."""

    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.address = f"127.0.0.1:{self.sock.getsockname()[1]}"
        return self

    def __exit__(self, *exc):
        self.sock.close()


class FakeMonitor:
    def __init__(self, peers, probed_by=None):
        self.peers = peers
        self.probed_by = probed_by or {}


def values(num, task=1, coordinator=None):
    return {"coordinator_address": coordinator, "num_processes": num, "process_id": task}


def test_the_process_that_does_not_answer_at_its_address_is_named():
    with Listening() as coordinator, Listening() as two:
        silent = f"127.0.0.1:{free_port()}"
        peers = {0: Peer(task=0, num_processes=4, address=coordinator.address),
                 2: Peer(task=2, num_processes=4, address=two.address, name="worker:2"),
                 3: Peer(task=3, num_processes=4, address=silent, name="worker:3")}
        fault = joining._missing_fault(values(4, 1, coordinator.address), FakeMonitor(peers), 9)
    error = fault.exception()
    assert isinstance(error, tps.errors.DeadlineExceededError)
    assert error.missing == (3,) and error.addresses == (silent,)
    assert str(error).startswith(
        f"process 3 of 4 (worker:3, {silent}) did not join the job within "
        "initialization_timeout=9 s (waited by process 1 of 4): nothing answers at its address")
    assert "Fix: start every process of the job with the same coordinator address" in str(error)


def test_a_peer_that_probed_this_process_is_not_named_after_it_ended():
    # With 3+ processes, a survivor whose deadline came first probes the others and ends:
    # its probe said it was there, so a later survivor must not blame it too.
    silent_one, silent_two = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    peers = {1: Peer(task=1, num_processes=3, address=silent_one, name="worker:1"),
             2: Peer(task=2, num_processes=3, address=silent_two, name="worker:2")}
    dead_coordinator = f"127.0.0.1:{free_port()}"
    fault = joining._missing_fault(values(3, 2, dead_coordinator), FakeMonitor(peers, {1: 0.0}), 9)
    assert fault.culprits == (0,)
    assert str(fault.exception()).startswith("process 0 of 3")
    # the same when this process saw it answer a few seconds before the deadline
    fault = joining._missing_fault(values(3, 2, dead_coordinator), FakeMonitor(peers), 9, seen={1})
    assert fault.culprits == (0,)


def test_the_early_look_finds_the_peers_that_answer():
    with Listening() as coordinator, Listening() as two:
        silent = f"127.0.0.1:{free_port()}"
        peers = {2: Peer(task=2, num_processes=4, address=two.address),
                 3: Peer(task=3, num_processes=4, address=silent)}
        assert joining._answering(values(4, 1, coordinator.address), FakeMonitor(peers)) == {0, 2}


def test_a_missing_coordinator_is_named_as_such():
    silent = f"127.0.0.1:{free_port()}"
    fault = joining._missing_fault(values(2, 1, silent), FakeMonitor({}), 5)
    assert fault.culprits == (0,)
    assert str(fault.exception()).startswith(f"process 0 of 2 ({silent}) (the coordinator) did "
                                             "not join the job")


def test_without_addresses_a_single_other_process_is_named_by_elimination():
    with Listening() as coordinator:
        fault = joining._missing_fault(values(2, 0, coordinator.address), None, 5)
    assert fault.culprits == (1,)
    assert "every other process did" in str(fault.exception())


def test_without_addresses_several_candidates_are_listed_but_not_blamed():
    with Listening() as coordinator:
        fault = joining._missing_fault(values(3, 0, coordinator.address), None, 5)
    message = str(fault.exception())
    assert message.startswith("Some processes of the job did not all join the job within "
                              "initialization_timeout=5 s")
    assert "which of processes 1, 2 are missing is not known here" in message


def test_when_everyone_answers_the_configuration_is_suspected():
    with Listening() as coordinator, Listening() as one:
        peers = {1: Peer(task=1, num_processes=2, address=one.address)}
        fault = joining._missing_fault(values(2, 0, coordinator.address), FakeMonitor(peers), 5)
    assert fault.culprits == ()
    assert "although every process answers at its address" in str(fault.exception())


@pytest.mark.parametrize("seconds", [1, 10, 300])
def test_jax_deadlines_are_always_later_than_ours(seconds):
    assert joining.jax_initialization_timeout(seconds) >= seconds + 10
    assert joining.jax_heartbeat_timeout(seconds) == 2 * seconds
