"""Where ``jax.distributed.initialize`` creates process 0's coordination service.

JAX's process 0 calls ``jaxlib._jax.get_distributed_runtime_service(address,
num_processes, heartbeat_timeout=, shutdown_timeout=, recoverable=)`` (the same
module object is ``jax._src.lib._jax``) and later calls ``shutdown()`` on what it
returned. tpustrategy replaces that factory for the duration of the join so the
service runs in a helper process (``cluster/coordinator.py``), and the helper calls
the original factory itself. Both uses go through this module, which imports only
the standard library and jaxlib: the helper loads it by file path.

Public alternative: none (``jax.distributed.initialize`` always hosts the service
in process 0). When the private name moves, ``check()`` raises and
``tests/jax_shims`` fails loudly.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

NAME = "get_distributed_runtime_service"


def _module() -> Any:
    from jaxlib import _jax

    return _jax


def check() -> None:
    """Raises ``RuntimeError`` when the factory JAX's join calls is not where it was."""
    factory = getattr(_module(), NAME, None)
    if not callable(factory):
        raise RuntimeError(
            f"tpustrategy: jaxlib._jax.{NAME} moved in this jaxlib version, so process 0's "
            "coordination service cannot be hosted apart from it.\nFix: install a JAX release "
            "tpustrategy supports: pip install 'jax>=0.10.2,<0.13'.")


def start(bind_address: str, num_processes: int, **kwargs: Any) -> Any:
    """Starts a coordination service in this process (JAX's own factory)."""
    return getattr(_module(), NAME)(bind_address, num_processes, **kwargs)


@contextlib.contextmanager
def replaced(make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """While active, JAX's join gets its service from ``make(original)``.

    The replacement is used once: its first call puts the original back (a second
    ``jax.distributed.initialize`` in this process gets JAX's own service).
    """
    check()
    module = _module()
    original = getattr(module, NAME)
    inner = make(original)
    lock = threading.Lock()

    def once(*args: Any, **kwargs: Any) -> Any:
        with lock:
            setattr(module, NAME, original)
        return inner(*args, **kwargs)

    setattr(module, NAME, once)
    try:
        yield
    finally:
        with lock:
            setattr(module, NAME, original)
