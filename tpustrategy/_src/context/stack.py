"""The context stack: which strategy is current, and cross-replica or replica context.

The bottom of the package graph: variables, replica contexts, the execution core and
the input pipeline read and push entries here; the user-facing accessors that need
the default strategy (``get_strategy``, ``get_replica_context``) are in
``strategy.context``.

One stack per thread, as in TensorFlow (``distribute_lib._CurrentDistributionContext``):
the default state, ``with strategy.scope()`` (cross-replica), inside a replica
function (replica context), and inside ``merge_fn`` (cross-replica again).
Replica threads of the eager path start with their own replica entry.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from tpustrategy._src import activity
from tpustrategy._src.activity import ANY
from tpustrategy._src.context import contracts

CROSS_REPLICA_ERROR = (
    "Method requires being in cross-replica context, use get_replica_context().merge_call()\n"
    "(Called inside a replica function: strategy.run, strategy.reduce and strategy.scope belong "
    "to cross-replica code.) Fix: call it outside the replica function, or use "
    "tps.get_replica_context().all_reduce / merge_call(fn) inside it."
)


@dataclass
class _Entry:
    strategy: Any
    replica_context: Any  # None in cross-replica context
    is_scope: bool = False


class _State(threading.local):
    def __init__(self) -> None:
        self.stack: list[_Entry] = []


_state = _State()


def current_entry() -> _Entry | None:
    if not ANY:  # nothing active on any thread (``activity``): no entry to read
        return None
    stack = _state.stack
    return stack[-1] if stack else None


class push:  # noqa: N801 - used like a function: ``with push(strategy, ctx):``
    """Pushes an entry for the ``with`` block (a plain class: every ``run`` call enters one)."""

    __slots__ = ("_entry",)

    def __init__(self, strategy: Any, replica_context: Any, is_scope: bool = False):
        self._entry = _Entry(strategy, replica_context, is_scope)

    def __enter__(self) -> None:
        _state.stack.append(self._entry)
        activity.enter()

    def __exit__(self, *exc: Any) -> None:
        activity.leave()
        _state.stack.pop()


def mixing_error(current: Any, other: Any) -> RuntimeError:
    return RuntimeError(
        f"Mixing different tf.distribute.Strategy objects: {object.__repr__(current)} is not "
        f"{object.__repr__(other)}.\nFix: use one strategy at a time; leave "
        "`with a.scope():` before calling b.run/b.reduce, and create variables "
        "under the strategy that uses them."
    )


def require_cross_replica_or_default(strategy: Any, api: str) -> None:
    """Raises TensorFlow's errors for calling ``api`` of ``strategy`` from the wrong place."""
    entry = current_entry()
    if entry is None:
        return
    if entry.replica_context is not None and not contracts.is_default(entry.replica_context):
        raise RuntimeError(CROSS_REPLICA_ERROR)
    if entry.strategy is not strategy and not contracts.is_default(entry.strategy):
        raise mixing_error(entry.strategy, strategy)


def has_strategy() -> bool:
    """True inside a non-default strategy's scope or replica function."""
    entry = current_entry()
    return entry is not None and not contracts.is_default(entry.strategy)


def in_cross_replica_context() -> bool:
    """True inside ``strategy.scope()`` or a ``merge_fn``; False in replica or default context."""
    entry = current_entry()
    return entry is not None and entry.replica_context is None




def current_strategy() -> Any:
    """The strategy of the innermost entry, or None outside every scope and replica function."""
    entry = current_entry()
    return entry.strategy if entry is not None else None


def check_variable_creation() -> None:
    """TensorFlow's rule: a variable is not created under another strategy nested in the default's scope.

    The default strategy's scope is mostly a no-op, but it registers its variable creator;
    inside it, ``with other.scope():`` may be entered, and creating a variable there raises
    the mixing error (``distribute_lib_test.testScopeMostlyNoOp``).
    """
    default_scope = None
    for entry in _state.stack:
        if contracts.is_default(entry.strategy):
            if entry.is_scope and default_scope is None:
                default_scope = entry.strategy
        elif default_scope is not None:
            raise mixing_error(default_scope, entry.strategy)
