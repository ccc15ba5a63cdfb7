"""``ReduceOp``: how values are combined across replicas (SUM or MEAN)."""

from __future__ import annotations

import enum


class ReduceOp(enum.Enum):
    """Reduction across replicas, as ``tf.distribute.ReduceOp``."""

    SUM = "SUM"
    MEAN = "MEAN"

    @staticmethod
    def from_variable_aggregation(aggregation: object) -> ReduceOp:
        name = getattr(aggregation, "name", aggregation)
        if name in ("SUM", "MEAN"):
            return ReduceOp(name)
        if name == "ONLY_FIRST_REPLICA":
            return ReduceOp.MEAN
        raise ValueError(
            f"Could not convert from `tf.VariableAggregation` {aggregation} to"
            "`tf.distribute.ReduceOp` type"
        )

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"

    __str__ = __repr__


def canonical_reduce_op(reduce_op: object) -> ReduceOp:
    """Accepts a ``ReduceOp`` or a case-insensitive string; raises like TensorFlow."""
    if isinstance(reduce_op, ReduceOp):
        return reduce_op
    if isinstance(reduce_op, str) and reduce_op.upper() in ("SUM", "MEAN"):
        return ReduceOp(reduce_op.upper())
    shown = repr(reduce_op.upper()) if isinstance(reduce_op, str) else repr(reduce_op)
    raise ValueError(
        f"{shown} is not a valid ReduceOp (reduce_op={reduce_op!r}). Valid ops: ReduceOp.SUM, "
        "ReduceOp.MEAN (or the strings 'sum'/'mean', any case).\nFix: pass tps.ReduceOp.SUM or "
        "tps.ReduceOp.MEAN; for a maximum or a product, all_gather the values and reduce them yourself."
    )
