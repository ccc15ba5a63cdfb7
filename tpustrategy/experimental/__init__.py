"""``tf.distribute.experimental`` counterparts (``tps.experimental``).

Names are loaded on first use so importing this package does not start JAX.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY: dict[str, tuple[str, str]] = {
    "PreemptionCheckpointHandler": ("tpustrategy._src.checkpoint.preemption", "PreemptionCheckpointHandler"),
    "TerminationConfig": ("tpustrategy._src.checkpoint.preemption", "TerminationConfig"),
    "CommunicationOptions": ("tpustrategy._src.strategy.communication", "CommunicationOptions"),
    "CommunicationImplementation": ("tpustrategy._src.strategy.communication", "CommunicationImplementation"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tpustrategy.experimental' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
