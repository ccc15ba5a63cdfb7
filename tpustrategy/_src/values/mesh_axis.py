"""The mesh axis names (replicas, and a replica's cores), and device-position lookups."""

from __future__ import annotations

from typing import Any

REPLICA_AXIS = "replica"
CORE_AXIS = "core"

_index_cache: dict[int, dict[Any, tuple[int, int]]] = {}


def _table(mesh: Any) -> dict[Any, tuple[int, int]]:
    table = _index_cache.get(id(mesh))
    if table is None:
        devices = mesh.devices
        if devices.ndim == 1:
            table = {d: (i, 0) for i, d in enumerate(devices.flat)}
        else:
            table = {d: (r, c) for r, row in enumerate(devices) for c, d in enumerate(row)}
        _index_cache[id(mesh)] = table
    return table


def device_index(mesh: Any, device: Any) -> int:
    """The replica whose (logical core 0 or only) device ``device`` is, along the replica axis."""
    return _table(mesh)[device][0]


def device_position(mesh: Any, device: Any) -> tuple[int, int]:
    """``(replica, core)`` of ``device`` in ``mesh``."""
    return _table(mesh)[device]


def has_cores(mesh: Any) -> bool:
    """Whether the mesh gives each replica several cores (a ``"core"`` axis)."""
    return CORE_AXIS in mesh.axis_names
