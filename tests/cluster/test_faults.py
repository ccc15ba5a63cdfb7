"""Faults: their messages, exceptions, exit codes, wire form and the launcher's marker line."""

from __future__ import annotations

import jax
import pytest

import tpustrategy as tps
from tpustrategy._src.cluster import faults, health
from tpustrategy._src.cluster.faults import Fault, Peer


def fault(kind, culprits=(1,), **extra):
    peers = {1: Peer(task=1, num_processes=2, address="10.0.0.2:2222", name="worker:1",
                     pid=42, host="h1"),
             2: Peer(task=2, num_processes=3)}
    return Fault(kind=kind, culprits=tuple(culprits),
                 described=tuple(peers[p].describe() for p in culprits),
                 addresses=tuple(peers[p].address for p in culprits),
                 detail="did something", reporter=0, **extra)


def test_a_peer_is_described_by_index_task_name_address_and_pid():
    peer = Peer(task=1, num_processes=2, address="10.0.0.2:2222", name="worker:1", pid=42,
                host="h1")
    assert peer.describe() == "process 1 of 2 (worker:1, 10.0.0.2:2222, pid 42 on h1)"
    assert Peer(task=3, num_processes=4).describe() == "process 3 of 4"


@pytest.mark.parametrize(("kind", "error", "code"), [
    ("lost", tps.errors.UnavailableError, 75), ("error", tps.errors.UnavailableError, 75),
    ("left", tps.errors.UnavailableError, 75), ("stuck", tps.errors.DeadlineExceededError, 76),
    ("missing", tps.errors.DeadlineExceededError, 76),
])
def test_each_kind_has_its_exception_and_exit_code(kind, error, code):
    f = fault(kind)
    exc = f.exception()
    assert type(exc) is error and f.exit_code == code
    assert str(exc).startswith("process 1 of 2 (worker:1, 10.0.0.2:2222, pid 42 on h1) did "
                               "something.\nFix: ")


def test_the_exceptions_carry_the_culprits_and_their_addresses():
    lost = fault("error", peer_error="ValueError: boom").exception()
    assert (lost.task, lost.address, lost.peer_error) == (1, "10.0.0.2:2222", "ValueError: boom")
    stuck = fault("stuck", culprits=(1, 2)).exception()
    assert stuck.missing == (1, 2) and stuck.addresses == ("10.0.0.2:2222", None)
    assert str(stuck).startswith("process 1 of 2 (worker:1, 10.0.0.2:2222, pid 42 on h1) and "
                                 "process 2 of 3 did something.")


def test_the_deadline_error_keeps_its_old_signature():
    error = tps.errors.DeadlineExceededError("late", missing=(3,))
    assert error.missing == (3,) and error.addresses == (None,)


def test_a_fault_survives_the_wire_and_the_marker_line():
    f = fault("error", peer_error="ValueError: boom")
    assert Fault.from_wire(f.to_wire()) == f
    line = f"[p0] {f.marker()}"
    assert faults.parse_marker(line) == {"kind": "error", "culprits": [1], "reporter": 0,
                                         "exit_code": 75, "error": "ValueError: boom"}
    assert faults.parse_marker("[p0] Traceback (most recent call last):") is None
    assert faults.parse_marker(f"{faults.MARKER} not json") is None


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        fault("exploded")


@pytest.mark.parametrize(("text", "kind"), [
    ("UNKNOWN: Gloo AllGather failed: [pair.cc:547] Connection closed by peer [127.0.0.1]:5",
     "lost"),
    ("UNKNOWN: Gloo all-reduce failed: Read error [127.0.0.1]:5: Connection reset by peer",
     "lost"),
    ("UNAVAILABLE: Failed to send RPC to coordination service", "lost"),
    ("DEADLINE_EXCEEDED: Gloo AllGather failed: Timed out waiting", "timeout"),
    ("INTERNAL: out of memory", None),
])
def test_raw_runtime_errors_are_classified_by_what_they_say_about_peers(text, kind):
    assert faults.classify(jax.errors.JaxRuntimeError(text)) == kind


@pytest.mark.parametrize(("pattern", "example", "kind"),
                         [(p, e, "lost") for p, e in faults.LOST_PATTERNS]
                         + [(p, e, "timeout") for p, e in faults.TIMEOUT_PATTERNS])
def test_every_pattern_matches_its_example_and_only_its_kind(pattern, example, kind):
    import re

    assert re.search(pattern, example, re.IGNORECASE), (pattern, example)
    assert faults.classify(jax.errors.JaxRuntimeError(f"INTERNAL: {example}")) == kind
    if kind == "timeout":  # a timeout's text must not also read as a lost peer
        assert not any(re.search(p, example, re.IGNORECASE) for p, _ in faults.LOST_PATTERNS)


def test_translate_without_a_monitor_still_gives_the_named_class():
    assert health.current() is None
    lost = health.translate(jax.errors.JaxRuntimeError("Connection reset by peer"))
    assert isinstance(lost, tps.errors.UnavailableError) and "Fix:" in str(lost)
    late = health.translate(jax.errors.JaxRuntimeError("DEADLINE_EXCEEDED: Timed out"))
    assert isinstance(late, tps.errors.DeadlineExceededError)
    assert isinstance(late.__cause__, jax.errors.JaxRuntimeError)


def test_translate_leaves_other_errors_alone():
    other = jax.errors.JaxRuntimeError("INVALID_ARGUMENT: shapes differ")
    assert health.translate(other) is other
    value = ValueError("Connection reset by peer")
    assert health.translate(value) is value
    named = tps.errors.UnavailableError("already named")
    assert health.translate(named) is named
