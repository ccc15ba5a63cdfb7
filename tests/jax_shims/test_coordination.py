"""The coordination shim reads JAX's private distributed state; these fail loudly when it moves."""

from __future__ import annotations

import jax

from tpustrategy._src.jax_shims import coordination


def test_the_private_distributed_state_is_where_the_shim_reads_it():
    from jax._src import distributed

    coordination.check()
    state = distributed.global_state
    for field in ("client", "num_processes", "process_id", "coordinator_address",
                  "preemption_sync_manager"):
        assert hasattr(state, field), field


def test_the_public_is_initialized_still_means_a_client_exists(monkeypatch):
    from jax._src import distributed

    assert coordination.is_initialized() is jax.distributed.is_initialized() is False
    assert coordination.client() is None and coordination.running_job() is None
    sentinel = object()
    monkeypatch.setattr(distributed.global_state, "client", sentinel)
    monkeypatch.setattr(distributed.global_state, "num_processes", 3)
    monkeypatch.setattr(distributed.global_state, "process_id", 2)
    monkeypatch.setattr(distributed.global_state, "coordinator_address", "10.0.0.1:9")
    assert jax.distributed.is_initialized() is True
    assert coordination.client() is sentinel
    assert coordination.running_job() == coordination.RunningJob("10.0.0.1:9", 3, 2)


def test_the_client_is_read_at_every_call_so_a_proxy_installed_later_is_seen(monkeypatch):
    from jax._src import distributed

    first, second = object(), object()
    monkeypatch.setattr(distributed.global_state, "client", first)
    assert coordination.client() is first
    monkeypatch.setattr(distributed.global_state, "client", second)
    assert coordination.client() is second


def test_the_preemption_manager_counts_only_with_a_client(monkeypatch):
    from jax._src import distributed

    assert coordination.preemption_sync_available() is False
    monkeypatch.setattr(distributed.global_state, "client", object())
    monkeypatch.setattr(distributed.global_state, "preemption_sync_manager", object())
    assert coordination.preemption_sync_available() is True


def test_the_client_methods_the_library_calls_exist_in_jaxlib():
    from jaxlib import _jax

    methods = dir(_jax.DistributedRuntimeClient)
    for name in ("key_value_set", "blocking_key_value_get", "key_value_increment",
                 "key_value_dir_get", "key_value_delete", "wait_at_barrier"):
        assert name in methods, name
