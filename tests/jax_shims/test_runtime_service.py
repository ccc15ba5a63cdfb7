"""The runtime-service shim replaces the factory JAX's join calls; these fail when it moves."""

from __future__ import annotations

import inspect

import pytest

from tpustrategy._src.jax_shims import runtime_service


def test_jax_initialize_still_gets_its_service_from_the_patched_factory():
    from jax._src import distributed
    from jaxlib import _jax

    runtime_service.check()
    assert distributed._jax is _jax  # the module object we patch is the one JAX calls through
    source = inspect.getsource(distributed.State.initialize)
    assert "_jax.get_distributed_runtime_service(" in source


def test_the_factory_is_replaced_only_inside_the_block_and_used_once():
    from jaxlib import _jax

    original = _jax.get_distributed_runtime_service
    calls = []

    def make(real):
        assert real is original
        return lambda *args, **kwargs: calls.append((args, kwargs)) or "service"

    with runtime_service.replaced(make):
        assert _jax.get_distributed_runtime_service is not original
        assert _jax.get_distributed_runtime_service("127.0.0.1:1", 2, heartbeat_timeout=3) == "service"
        assert _jax.get_distributed_runtime_service is original  # once: a second join gets JAX's own
    assert _jax.get_distributed_runtime_service is original
    assert calls == [(("127.0.0.1:1", 2), {"heartbeat_timeout": 3})]


def test_the_factory_is_restored_when_the_block_raises():
    from jaxlib import _jax

    original = _jax.get_distributed_runtime_service
    with pytest.raises(KeyError), runtime_service.replaced(lambda real: real):
        raise KeyError("x")
    assert _jax.get_distributed_runtime_service is original


def test_a_missing_factory_is_a_loud_error(monkeypatch):
    from jaxlib import _jax

    monkeypatch.delattr(_jax, "get_distributed_runtime_service")
    with pytest.raises(RuntimeError, match="moved in this jaxlib version"):
        runtime_service.check()


def test_the_shim_imports_only_the_standard_library_and_jaxlib():
    source = inspect.getsource(runtime_service)
    imports = [line.split()[1] for line in source.splitlines()
               if line.startswith(("import ", "from ")) or line.strip().startswith("from jaxlib")]
    assert all(name.split(".")[0] in {"__future__", "contextlib", "threading", "collections",
                                      "typing", "jaxlib"} for name in imports), imports
