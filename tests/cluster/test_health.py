"""The health monitor, in one process: two monitors linked through a stand-in KV store."""

from __future__ import annotations

import socket
import threading
import time

import jax
import pytest

import tpustrategy as tps
from tpustrategy._src.cluster import current, diagnosis, faults, health, peerlink
from tpustrategy._src.cluster.faults import Peer

pytestmark = pytest.mark.timeout(60)


class FakeClient:
    """The two calls of JAX's DistributedRuntimeClient that the monitor uses."""

    def __init__(self):
        self.values: dict[str, str] = {}
        self.changed = threading.Condition()

    def key_value_set(self, key: str, value: str) -> None:
        with self.changed:
            self.values[key] = value
            self.changed.notify_all()

    def blocking_key_value_get(self, key: str, timeout_ms: int) -> str:
        with self.changed:
            if not self.changed.wait_for(lambda: key in self.values, timeout_ms / 1000):
                raise RuntimeError(f"DEADLINE_EXCEEDED: {key}")
            return self.values[key]


def monitor(task, heartbeat=1.0, num=2):
    peers = {t: Peer(task=t, num_processes=num, address=f"10.9.9.{t}:2222", name=f"worker:{t}")
             for t in range(num)}
    m = health.Monitor(task=task, num_processes=num, heartbeat_timeout=heartbeat,
                       shutdown_timeout=5, peers=peers, listen_address=None,
                       coordinator="127.0.0.1:1")
    m.grace = 3600.0  # never end the test process
    m.start()
    return m


@pytest.fixture
def pair():
    client = FakeClient()
    monitors = [monitor(0), monitor(1)]
    threads = [threading.Thread(target=m.join_links, args=(client, 10)) for m in monitors]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    yield monitors
    for m in monitors:
        m.stop()


def wait_for_fault(m, seconds=5.0):
    deadline = time.monotonic() + seconds
    while m.fault is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return m.fault


def kill(m):
    """What the kernel does to a killed process's sockets (no goodbye)."""
    m.links.stopping = True
    for link in list(m.links.links.values()):
        link.sock.close()


def test_linked_monitors_know_each_other_and_stay_quiet(pair):
    m0, m1 = pair
    assert sorted(m0.links.links) == [1] and sorted(m1.links.links) == [0]
    time.sleep(1.5)  # longer than the heartbeat timeout: the heartbeats keep both alive
    assert m0.fault is None and m1.fault is None
    assert m0.peers[1].pid is not None and m0.peers[1].address == "10.9.9.1:2222"


def test_a_peer_whose_link_closes_without_goodbye_is_lost_and_named(pair):
    m0, m1 = pair
    kill(m1)
    found = wait_for_fault(m0)
    assert found is not None and found.kind == "lost" and found.culprits == (1,)
    error = found.exception()
    assert isinstance(error, tps.errors.UnavailableError) and error.task == 1
    assert str(error).startswith("process 1 of 2 (worker:1, 10.9.9.1:2222, pid ")
    assert "was lost: its connection to this process closed without a goodbye" in str(error)
    assert error.address == "10.9.9.1:2222"


def test_a_silent_peer_is_stuck_after_the_heartbeat_timeout(pair):
    m0, m1 = pair
    m1.links.send = lambda links, message: None  # a stopped process sends nothing
    start = time.monotonic()
    found = wait_for_fault(m0, 6)
    assert found is not None and found.kind == "stuck" and found.culprits == (1,)
    assert 0.9 < time.monotonic() - start < 6  # the thread may pause on a loaded machine
    error = found.exception()
    assert isinstance(error, tps.errors.DeadlineExceededError) and error.missing == (1,)
    assert "has not answered for 1 s (heartbeat_timeout=1 s)" in str(error)


def test_a_fault_told_by_a_peer_is_adopted_with_its_original_culprit(pair):
    m0, m1 = pair
    m1.tell_peers(m1.own_error(ValueError("boom\nsecond line")))
    found = wait_for_fault(m0)
    assert found.kind == "error" and found.culprits == (1,) and found.reporter == 1
    error = found.exception()
    assert error.peer_error == "ValueError: boom"
    assert "failed: its own code raised ValueError: boom" in str(error)


def test_only_the_first_fault_counts_and_is_relayed_to_the_others(pair):
    m0, m1 = pair
    first = diagnosis.fault(m0.peers, 0, faults.STUCK, [1], "first")
    assert m0.report(first) and not m0.report(diagnosis.fault(m0.peers, 0, faults.LOST, [1], "second"))
    assert m0.fault == first


def test_goodbye_then_close_is_a_departure_not_a_fault(pair):
    m0, m1 = pair
    m1.say_bye()
    time.sleep(0.3)
    m1.stop()
    deadline = time.monotonic() + 5
    while 1 not in m0.links.departed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert m0.fault is None and m0.links.departed == {1}
    # A collective that still needed it fails; the monitor says who left.
    left = m0.explain(faults.LOST, wait=0.1)
    assert left.kind == "left" and left.culprits == (1,)


def test_a_collective_timeout_names_the_peers_that_went_silent(pair):
    m0, m1 = pair
    assert m0.explain("timeout") is None  # everyone answers: no one to blame
    m1.links.send = lambda links, message: None
    time.sleep(0.8)
    found = m0.explain("timeout")
    assert found.kind == "stuck" and found.culprits == (1,)
    assert "did not reach a collective within the collective timeout" in found.detail


def test_a_probe_is_answered_but_does_not_become_a_link(pair):
    m0, _ = pair
    assert peerlink.probe(m0.link_address)
    time.sleep(0.2)
    assert sorted(m0.links.links) == [1] and m0.fault is None
    assert not peerlink.probe("127.0.0.1:1", timeout=0.5)


def test_a_probe_that_says_who_sent_it_is_remembered(pair):
    m0, _ = pair
    assert peerlink.probe(m0.link_address, sender=1)
    deadline = time.monotonic() + 5
    while 1 not in m0.probed_by and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(m0.probed_by) == [1] and sorted(m0.links.links) == [1] and m0.fault is None


def test_a_connection_with_the_wrong_token_is_refused(pair):
    m0, _ = pair
    stranger = peerlink.connect(m0.link_address, hello=1, token="guess", timeout=2)
    time.sleep(0.3)
    stranger.sock.settimeout(2)
    assert stranger.sock.recv(10) in (b"", b"\n")  # closed by m0 (or one stray heartbeat)
    assert m0.links.links[1] is not stranger
    stranger.close()


def test_a_peer_that_never_publishes_its_link_fails_the_join():
    m0 = monitor(0, num=2)
    try:
        with pytest.raises(tps.errors.UnavailableError, match="did not publish its health link"):
            m0.join_links(FakeClient(), 0.5)
        assert m0.fault.kind == "lost" and m0.fault.culprits == (1,)
    finally:
        m0.stop()


def test_the_listener_prefers_the_configured_address_and_else_the_route_to_the_coordinator():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    sock = peerlink.listen(f"127.0.0.1:{free}", None)
    assert sock.getsockname()[1] == free
    sock.close()
    sock = peerlink.listen("10.255.255.1:1", "127.0.0.1:9")  # not an address of this host
    assert sock.getsockname()[0] == "127.0.0.1"
    sock.close()


def test_translate_uses_the_monitor_to_name_the_lost_process(pair):
    m0, m1 = pair
    current.put(m0)
    try:
        kill(m1)
        error = health.translate(jax.errors.JaxRuntimeError(
            "UNKNOWN: Gloo all-reduce failed: Connection reset by peer"))
        assert isinstance(error, tps.errors.UnavailableError) and error.task == 1
        assert isinstance(error.__cause__, jax.errors.JaxRuntimeError)
    finally:
        current.put(None)
