"""``VariableSynchronization`` and ``VariableAggregation`` (TensorFlow's enums)."""

from __future__ import annotations

import enum
from typing import Any


class VariableSynchronization(enum.Enum):
    """When a distributed variable is synchronised: on write (mirrored) or on read."""

    AUTO = 0
    NONE = 1
    ON_WRITE = 2
    ON_READ = 3

    def __repr__(self) -> str:
        return f"VariableSynchronization.{self.name}"

    __str__ = __repr__


class VariableAggregation(enum.Enum):
    """How per-replica updates of a distributed variable are combined."""

    NONE = 0
    SUM = 1
    MEAN = 2
    ONLY_FIRST_REPLICA = 3

    def __repr__(self) -> str:
        return f"VariableAggregation.{self.name}"

    __str__ = __repr__


def canonical_synchronization(value: Any, name: str) -> VariableSynchronization:
    """TensorFlow's rule (``validate_synchronization_aggregation_trainable``) and its error text."""
    if value is None:
        return VariableSynchronization.AUTO
    if isinstance(value, VariableSynchronization):
        return value
    if isinstance(value, str) and value.upper() in VariableSynchronization.__members__:
        return VariableSynchronization[value.upper()]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return VariableSynchronization(value)
        except ValueError:
            pass
    raise ValueError(
        f"Invalid variable synchronization mode: {value} for variable: {name}\n"
        f"Valid values: {', '.join('tps.VariableSynchronization.' + m for m in VariableSynchronization.__members__)}.\n"
        "Fix: pass one of them (or its name as a string), e.g. synchronization=tps.VariableSynchronization.ON_READ."
    )


def canonical_aggregation(value: Any, name: str) -> VariableAggregation:
    if isinstance(value, VariableAggregation):
        return value
    if value is None:
        return VariableAggregation.NONE
    if isinstance(value, str) and value.upper() in VariableAggregation.__members__:
        return VariableAggregation[value.upper()]
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return VariableAggregation(value)
        except ValueError:
            pass
    raise ValueError(
        f"Invalid variable aggregation mode: {value} for variable: {name}\n"
        f"Valid values: {', '.join('tps.VariableAggregation.' + m for m in VariableAggregation.__members__)}.\n"
        "Fix: pass one of them (or its name as a string), e.g. aggregation=tps.VariableAggregation.MEAN."
    )
