"""The user-facing context accessors: ``get_strategy``, ``get_replica_context`` and friends.

The stack itself lives at the bottom of the package graph (``context.stack``); these
accessors add the default strategy, which needs the strategy package. The top of
``strategy/``'s own graph besides the concrete strategies: the other strategy
modules read ``context.stack`` directly, so none of them imports this one.
"""

from __future__ import annotations

import threading
from typing import Any

from tpustrategy._src.context.stack import (  # noqa: F401 - the strategy package's names
    CROSS_REPLICA_ERROR,
    current_entry,
    has_strategy,
    in_cross_replica_context,
    mixing_error,
    push,
    require_cross_replica_or_default,
)
from tpustrategy._src.strategy.default import default_strategy


def get_strategy() -> Any:
    """Returns the current strategy: the scope's, the replica function's, or the default."""
    entry = current_entry()
    if entry is None:
        return default_strategy()
    return entry.strategy


def get_replica_context() -> Any:
    """The current ``ReplicaContext``; None in cross-replica context.

    Outside any scope this is the default replica context (1 replica, id 0).
    """
    entry = current_entry()
    if entry is None:
        return default_strategy()._default_replica_context
    return entry.replica_context


class _SetStrategy(threading.local):
    scope: Any = None


_set_strategy = _SetStrategy()


def experimental_set_strategy(strategy: Any) -> None:
    """Makes ``strategy`` current without ``with strategy.scope():`` (``tf.distribute.experimental_set_strategy``).

    ``None`` goes back to the default strategy. A later call replaces the
    strategy set before. Per thread, as the scope is.

    Raises:
      RuntimeError: called inside a ``with strategy.scope():`` block.
    """
    old = _set_strategy.scope
    if old is not None:
        old.__exit__(None, None, None)
        _set_strategy.scope = None
    if has_strategy():
        raise RuntimeError(
            "Must not be called inside a `tf.distribute.Strategy` scope (tps.experimental_set_strategy).\n"
            "Fix: leave the `with strategy.scope():` block first, or use the scope instead.")
    if strategy is not None:
        scope = strategy.scope()
        scope.__enter__()
        _set_strategy.scope = scope
