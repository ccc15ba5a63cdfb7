"""Host-value collectives across processes: error translation and padding (one process)."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax.experimental import multihost_utils

import tpustrategy as tps
from tpustrategy._src.replica import across_processes


def test_a_timed_out_peer_becomes_deadline_exceeded(monkeypatch):
    def stuck(x):
        raise jax.errors.JaxRuntimeError("DEADLINE_EXCEEDED: Gloo AllGather failed: Timed out waiting")

    monkeypatch.setattr(multihost_utils, "process_allgather", stuck)
    with pytest.raises(tps.errors.DeadlineExceededError, match="collective across processes "
                                                               "timed out") as info:
        across_processes.allgather(np.int32(1))
    assert "collective_timeout" in str(info.value) and "Fix:" in str(info.value)
    assert isinstance(info.value.__cause__, jax.errors.JaxRuntimeError)


def test_a_closed_connection_becomes_unavailable(monkeypatch):
    def lost(x):
        raise jax.errors.JaxRuntimeError(
            "UNKNOWN: Gloo AllGather failed: [pair.cc:547] Connection closed by peer [127.0.0.1]:5")

    monkeypatch.setattr(multihost_utils, "process_allgather", lost)
    with pytest.raises(tps.errors.UnavailableError, match="connection to a peer process "
                                                          "closed") as info:
        across_processes.allgather(np.int32(1))
    assert "Connection closed by peer" in str(info.value)


def test_other_runtime_errors_pass_through(monkeypatch):
    def broken(x):
        raise jax.errors.JaxRuntimeError("INTERNAL: something else")

    monkeypatch.setattr(multihost_utils, "process_allgather", broken)
    with pytest.raises(jax.errors.JaxRuntimeError, match="something else"):
        across_processes.allgather(np.int32(1))


def test_concatenation_over_processes_pads_and_unpads(monkeypatch):
    # Two fake processes: this one holds [1, 2, 3], the other [7].
    other = {0: np.int64(1), 1: np.array([7, 0, 0])}

    def fake(x):
        x = np.asarray(x)
        peer = other[0] if x.ndim == 0 else other[1]
        return np.stack([x, np.asarray(peer, x.dtype)])

    monkeypatch.setattr(multihost_utils, "process_allgather", fake)
    out = across_processes.concat_over_processes(np.array([1, 2, 3]), axis=0)
    assert out.tolist() == [1, 2, 3, 7]
