"""One Keras ``DeviceMesh`` per strategy, over the strategy's own JAX mesh (one set of shardings)."""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

import tpustrategy._src.keras.internals as internals

_BY_STRATEGY: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def of(strategy: Any) -> Any:
    """The (cached) Keras ``DeviceMesh`` of ``strategy``: its axes and devices, its very ``jax`` mesh."""
    found = _BY_STRATEGY.get(strategy)
    if found is None:
        from keras.distribution import DeviceMesh

        mesh = strategy.mesh
        found = DeviceMesh(tuple(mesh.devices.shape), list(mesh.axis_names), np.asarray(mesh.devices))
        internals.set_backend_mesh(found, mesh)
        _BY_STRATEGY[strategy] = found
    return found
