"""The one vocabulary of a compiled call's leaves: what each argument and result leaf is.

``strategy.run`` and ``tps.function`` take arguments and give results made of the same kinds of
leaves; one enum names them, for the inputs (``execution.leaves``: the call's key, its compiled
guard, the classification of the full path) and the results (``execution.results``: the plan
that rebuilds the user's structure from a program's outputs):

- ``ARRAY``: a ``jax.Array`` (an argument broadcast to every replica; a plain result);
- ``NUMPY``: a numeric NumPy array argument (it enters the program as an array);
- ``PER_REPLICA``: a ``PerReplica``, entering and leaving as its ``[R, ...]`` stacked array
  (zero-padded, with each replica's true shape, when ragged);
- ``MIRRORED``: a ``Mirrored``, entering and leaving as its one replicated array;
- ``STATIC``: a Python value baked into the program (an argument: retraced when it changes,
  as ``tf.function``; a result: returned as the trace saw it);
- ``STATIC_PER_REPLICA``: a result of one Python value per replica;
- ``SEQUENCE`` / ``DICT``: the containers a call's key walks (tuples, lists, namedtuples; dicts
  by sorted key).

A leaf that enters or leaves a program as an array has a ``LeafSpec``: its kind and what the
program was compiled for (the array's shape, dtype and weak type; ragged true shapes; the
number of replicas of a Mirrored). Distributed values give theirs with ``leaf(split)``.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

Shape = tuple[int, ...]


class LeafKind(enum.Enum):
    ARRAY = "array"
    NUMPY = "numpy"
    PER_REPLICA = "per_replica"
    MIRRORED = "mirrored"
    STATIC = "static"
    STATIC_PER_REPLICA = "static_per_replica"
    SEQUENCE = "sequence"
    DICT = "dict"

    @property
    def is_dynamic(self) -> bool:
        """Whether a leaf of this kind enters or leaves the program as an array."""
        return self in _DYNAMIC


_DYNAMIC = frozenset({LeafKind.ARRAY, LeafKind.NUMPY, LeafKind.PER_REPLICA, LeafKind.MIRRORED})


class LeafSpec(NamedTuple):
    """What a program knows of one dynamic leaf (a tuple: cheap to build, hash and compare).

    Attributes:
      kind: the leaf's kind.
      shape: the shape of the array that enters or leaves the program (stacked: ``[R, ...]``).
      dtype: its dtype.
      weak_type: its weak type (a Python scalar's array).
      shapes: a ragged ``PER_REPLICA``'s true shape per replica, else None.
      num_replicas: a ``MIRRORED``'s number of replicas (0 otherwise).
    """

    kind: LeafKind
    shape: Shape
    dtype: Any
    weak_type: bool = False
    shapes: tuple[Shape, ...] | None = None
    num_replicas: int = 0

    @property
    def aval(self) -> Any:
        """The abstract value (``jax.ShapeDtypeStruct``) of the array."""
        import jax

        return jax.ShapeDtypeStruct(self.shape, self.dtype, weak_type=self.weak_type)

    @property
    def local_shape(self) -> Shape:
        """One replica's view: the component shape (stacked inputs) or the whole shape."""
        return self.shape[1:] if self.kind is LeafKind.PER_REPLICA else self.shape

    @property
    def is_ragged(self) -> bool:
        return self.shapes is not None
