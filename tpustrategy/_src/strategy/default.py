"""The default strategy: what ``get_strategy()`` returns outside any scope.

One replica on JAX's default device; ``run`` calls the function directly (no
compilation), ``reduce`` follows the one-replica rules.

Above ``base`` and below ``context`` (the accessors that return it); nothing else in
``strategy/`` imports it.
"""

from __future__ import annotations

import threading
from typing import Any

import jax

from tpustrategy._src.context import stack
from tpustrategy._src.replica.context import DefaultReplicaContext
from tpustrategy._src.strategy.base import Strategy


class _DefaultDistributionStrategy(Strategy):
    """The no-op strategy in effect outside any ``scope()``."""

    _is_default = True
    _plain_values_from_function = True

    def __init__(self) -> None:
        super().__init__((jax.local_devices()[0],))
        self._default_replica_context = DefaultReplicaContext(self, 0)

    def run(self, fn: Any, args: Any = (), kwargs: Any = None, options: Any = None) -> Any:
        if not isinstance(args, (tuple, list)):
            raise ValueError(f"positional args must be a list or tuple, got {type(args)}")
        with stack.push(self, self._default_replica_context):
            return fn(*args, **(kwargs or {}))

    experimental_run_v2 = run

    def _scope_replica_context(self) -> Any:
        # TensorFlow's default scope is mostly a no-op: still the default replica context.
        return self._default_replica_context


_lock = threading.Lock()
_default: _DefaultDistributionStrategy | None = None


def default_strategy() -> _DefaultDistributionStrategy:
    global _default
    if _default is None:
        with _lock:
            if _default is None:
                _default = _DefaultDistributionStrategy()
    return _default
