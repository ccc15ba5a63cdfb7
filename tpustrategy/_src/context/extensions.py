"""Optional integrations that join ``strategy.scope()``, loaded by name only when wanted.

An integration with another library (Keras 3) lives above the strategy package and is
never imported unless the user imported that library: ``strategy.scope()`` asks this
table for the scopes to enter, and each entry's module is loaded only when its trigger
module is already in ``sys.modules``.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any

# trigger module -> our module with ``scope_hook(strategy) -> context manager``
SCOPE_EXTENSIONS: dict[str, str] = {"keras": "tpustrategy._src.keras"}


@contextlib.contextmanager
def scope_extensions(strategy: Any) -> Iterator[None]:
    """Enters every loaded integration's scope for ``strategy`` (none unless its library is imported)."""
    with contextlib.ExitStack() as stack:
        for trigger, module in SCOPE_EXTENSIONS.items():
            if trigger in sys.modules:
                stack.enter_context(importlib.import_module(module).scope_hook(strategy))
        yield
