"""What each output leaf of a traced function is, and how the program's result rebuilds it.

The tracer records one ``OutKind`` per output leaf; the back ends refine the traced ones
(a replica program decides varying or invariant) and ``program.Program.rebuild`` turns
the program's results back into the user's structure.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Kind(enum.Enum):
    STATIC = "static"  # a Python value, the same on every replica (``value``)
    STATIC_PER_REPLICA = "static_per_replica"  # Python values per replica (``value``: a tuple)
    REPLICA = "replica"  # a traced replica-level output, before the back end decides
    VARYING = "varying"  # a replica program result that differs per replica (``shapes`` if ragged)
    INVARIANT = "invariant"  # a replica program result provably equal on every replica
    PER_REPLICA = "per_replica"  # tps.function: a traced distributed value (``cls``, ``shapes``)
    MIRRORED = "mirrored"  # tps.function: a traced Mirrored (``num_replicas``)
    ARRAY = "array"  # tps.function: a plain traced array


@dataclass(frozen=True)
class OutKind:
    kind: Kind
    value: Any = None
    cls: type | None = None
    shapes: tuple[tuple[int, ...], ...] | None = None
    num_replicas: int = 0

    @property
    def is_static(self) -> bool:
        """No program result stands for it (it is rebuilt from the trace alone)."""
        return self.kind in (Kind.STATIC, Kind.STATIC_PER_REPLICA)


REPLICA = OutKind(Kind.REPLICA)
INVARIANT = OutKind(Kind.INVARIANT)
ARRAY = OutKind(Kind.ARRAY)


def static(value: Any) -> OutKind:
    return OutKind(Kind.STATIC, value=value)


def varying(shapes: tuple[tuple[int, ...], ...] | None = None) -> OutKind:
    return OutKind(Kind.VARYING, shapes=shapes)
