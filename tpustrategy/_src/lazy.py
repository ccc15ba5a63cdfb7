"""Names of a public package loaded on first use (so importing it does not start JAX).

A package's ``__init__`` declares ``name -> (module, attribute)`` and its
sub-packages, and takes ``__getattr__`` / ``__dir__`` from ``loader``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from typing import Any


def loader(package: str, names: dict[str, tuple[str, str]],
           submodules: Iterable[str] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: each name is imported once, then cached."""
    submodules = tuple(submodules)

    def get(name: str) -> Any:
        if name in names:
            module, attr = names[name]
            value = getattr(importlib.import_module(module), attr)
            setattr(sys.modules[package], name, value)
            return value
        if name in submodules:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def listing() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names) | set(submodules))

    return get, listing
