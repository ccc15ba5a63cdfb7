"""Device lists and the replica mesh of a strategy.

Devices may be given as ``jax.Device`` objects or as TensorFlow-style strings
(``"/cpu:0"``, ``"/device:GPU:1"``, ``"/job:worker/replica:0/task:0/device:TPU:3"``,
``"cpu:2"``). The mesh order is JAX's: the devices in the order given.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh

from tpustrategy._src.values.mesh_axis import CORE_AXIS, REPLICA_AXIS

_DEVICE_RE = re.compile(r"(?:^|/)(?:device:)?(?P<kind>[A-Za-z_]+):(?P<index>\d+)$")


def resolve_device(spec: Any, api: str) -> jax.Device:
    """Turns a device object or a TF-style device string into a ``jax.Device``."""
    if isinstance(spec, jax.Device):
        return spec
    if isinstance(spec, str):
        m = _DEVICE_RE.search(spec.strip())
        if m:
            kind = m.group("kind").lower()
            index = int(m.group("index"))
            try:
                candidates = jax.devices(kind)
            except RuntimeError:
                candidates = []
            if kind == "cpu" and not candidates:
                candidates = jax.devices("cpu")
            if index < len(candidates):
                return candidates[index]
            raise ValueError(
                f"{api}: device {spec!r} does not exist: there are {len(candidates)} "
                f"{kind.upper()} device(s) ({[str(d) for d in candidates]}).\n"
                "Fix: pick an index below that count, or set "
                "XLA_FLAGS=--xla_force_host_platform_device_count=N before importing JAX "
                "for N fake CPU devices."
            )
    raise ValueError(
        f"{api}: cannot interpret {spec!r} as a device. Expected a jax.Device or a string "
        "like '/cpu:0', '/device:GPU:1' or 'tpu:3'.\nFix: pass one of jax.devices() or its "
        "TensorFlow-style name, e.g. '/cpu:0'."
    )


def resolve_devices(devices: Sequence[Any] | None, api: str) -> tuple[jax.Device, ...]:
    if devices is None:
        return tuple(jax.local_devices())
    if isinstance(devices, (str, jax.Device)):
        devices = [devices]
    resolved = tuple(resolve_device(d, api) for d in devices)
    if not resolved:
        raise ValueError(f"{api}: `devices` must not be empty.")
    if len(set(resolved)) != len(resolved):
        raise ValueError(f"{api}: `devices` has duplicates: {[str(d) for d in resolved]}.")
    return resolved


def replica_mesh(devices: Sequence[jax.Device], core_grid: Any = None) -> Mesh:
    """The strategy's mesh: axis ``"replica"`` over ``devices``, or over the rows of
    ``core_grid`` (``[replicas, cores]``) with a second axis ``"core"`` when a replica
    has several cores."""
    if core_grid is not None and np.shape(core_grid)[1] > 1:
        grid = np.empty(np.shape(core_grid), dtype=object)
        for r, row in enumerate(core_grid):
            for c, d in enumerate(row):
                grid[r, c] = d
        return Mesh(grid, (REPLICA_AXIS, CORE_AXIS))
    return Mesh(np.array(list(devices), dtype=object), (REPLICA_AXIS,))
