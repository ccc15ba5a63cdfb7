"""Optional integrations that join ``strategy.scope()`` and our datasets, loaded by name only when wanted.

An integration with another library (Keras 3) lives above the strategy package and is
never imported unless the user imported that library: ``strategy.scope()`` asks
``SCOPE_EXTENSIONS`` for the scopes to enter, and creating a ``tpsd`` dataset asks
``DATASET_EXTENSIONS`` (so Keras's ``fit`` takes one before any scope was entered); each
entry's module is loaded only when its trigger module is already in ``sys.modules``.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import Any

# trigger module -> our module with ``scope_hook(strategy) -> context manager``
SCOPE_EXTENSIONS: dict[str, str] = {"keras": "tpustrategy._src.keras"}
# trigger module -> our module with ``dataset_hook()``, called once, when a dataset is made
DATASET_EXTENSIONS: dict[str, str] = {"keras": "tpustrategy._src.keras"}
_datasets_hooked: set[str] = set()


def dataset_extensions() -> None:
    """Runs each loaded integration's ``dataset_hook()`` once (nothing unless its library is imported)."""
    if len(_datasets_hooked) == len(DATASET_EXTENSIONS):
        return
    for trigger, module in DATASET_EXTENSIONS.items():
        if trigger in sys.modules and trigger not in _datasets_hooked:
            _datasets_hooked.add(trigger)
            importlib.import_module(module).dataset_hook()


@contextlib.contextmanager
def scope_extensions(strategy: Any) -> Iterator[None]:
    """Enters every loaded integration's scope for ``strategy`` (none unless its library is imported)."""
    with contextlib.ExitStack() as stack:
        for trigger, module in SCOPE_EXTENSIONS.items():
            if trigger in sys.modules:
                stack.enter_context(importlib.import_module(module).scope_hook(strategy))
        yield
