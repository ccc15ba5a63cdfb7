"""The mesh axis name used for replicas, and device-position lookups."""

from __future__ import annotations

from typing import Any

REPLICA_AXIS = "replica"

_index_cache: dict[int, dict[Any, int]] = {}


def device_index(mesh: Any, device: Any) -> int:
    """Position of ``device`` along the replica axis of ``mesh``."""
    table = _index_cache.get(id(mesh))
    if table is None:
        table = {d: i for i, d in enumerate(mesh.devices.flat)}
        _index_cache[id(mesh)] = table
    return table[device]
