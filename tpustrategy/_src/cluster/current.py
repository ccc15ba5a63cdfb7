"""The monitor of this process: set by ``health.Monitor.install``, read by ``exits`` and ``health``.

Kept below both so that the exit path (``exits``) can find the monitor without importing
``health``, which installs it.
"""

from __future__ import annotations

from typing import Any

_monitor: Any = None  # a health.Monitor, or None


def get() -> Any:
    """The installed monitor (a ``health.Monitor``), or None."""
    return _monitor


def put(monitor: Any) -> None:
    """Makes ``monitor`` (a ``health.Monitor``, or None) the process's monitor."""
    global _monitor
    _monitor = monitor


def clear_if(monitor: Any) -> None:
    """Forgets the monitor if it is ``monitor`` (a stopping monitor must not drop a newer one)."""
    global _monitor
    if _monitor is monitor:
        _monitor = None


def take() -> Any:
    """The installed monitor, forgotten from now on (a forked child drops its parent's)."""
    global _monitor
    monitor, _monitor = _monitor, None
    return monitor
