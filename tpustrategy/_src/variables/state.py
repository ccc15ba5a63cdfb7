"""A variable's state as the modules of ``variables/`` see it: the ``VariableState`` protocol.

``variable.py`` defines ``tps.Variable`` on top of the modules that read and write its
state (``updates``, ``frames``, ``sparse``, ``component``, ``copying``); those sit below
it and cannot import the class without an import circle, so they name what they use of a
variable here. ``tps.Variable`` (and ``keras.variables.KerasVariableState``, its Keras
face) satisfy it. Other packages see a variable through ``context.contracts`` instead;
these fields are the package's own.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax
import numpy as np

from tpustrategy._src.context import contracts
from tpustrategy._src.types import Shape
from tpustrategy._src.variables.enums import VariableAggregation

MIRRORED, SYNC_ON_READ, PLAIN = "mirrored", "sync_on_read", "plain"


class VariableState(Protocol):
    """What ``updates``, ``frames``, ``sparse``, ``component`` and ``copying`` read of a variable."""

    _id: int
    _kind: str  # MIRRORED, SYNC_ON_READ or PLAIN
    _base_name: str
    _strategy: contracts.StrategyContract | None
    _aggregation: VariableAggregation
    _shape: Shape
    _pending_init: bool
    # The one global array: replicated (mirrored), [R, ...] over the replicas (sync-on-read),
    # on one device (plain); a tracer while a program computes its first value.
    _value: jax.Array

    @property
    def name(self) -> str: ...

    @property
    def shape(self) -> Shape: ...

    @property
    def dtype(self) -> np.dtype[Any]: ...

    @property
    def trainable(self) -> bool: ...

    @property
    def aggregation(self) -> VariableAggregation: ...

    def read_value(self) -> jax.Array: ...

    def _global_shape(self) -> Shape: ...

    def _local_components(self) -> tuple[jax.Array, ...]: ...


def strategy_of(var: VariableState) -> contracts.StrategyContract:
    """The strategy a distributed variable was created under (a plain variable has none)."""
    strategy = var._strategy
    if strategy is None:
        raise TypeError(
            f"tps.Variable {var.name!r} is a plain variable (created outside any strategy.scope()), "
            "so it has no strategy; this operation needs a distributed variable.\nFix: create the "
            "variable under `with strategy.scope():`."
        )
    return strategy


def first_device(value: jax.Array) -> jax.Device:
    """The device of ``value`` with the lowest id (a replica's first core; a variable's primary copy)."""
    return min(value.sharding.device_set, key=_device_id)


def _device_id(device: jax.Device) -> int:
    # A function, not ``lambda d: d.id``: JAX annotates ``Sharding.device_set`` with jaxlib's
    # ``Device``, which a type checker cannot resolve, so a lambda's parameter has no ``id``.
    return int(device.id)
