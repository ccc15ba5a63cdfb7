"""A program's results: one frozen plan, rendered as a loop and as generated code.

A compiled program returns a flat tuple of arrays; the user gets back the structure the traced
function returned, each leaf made as its ``values.leaf.LeafKind`` says:

- ``ARRAY``: the output as it is (a plain result, or every result with one replica);
- ``MIRRORED``: ``Mirrored.from_replicated`` of the replicated output, with the result's
  ``LeafSpec`` once the first concrete call made it known (the same every call), so the next
  call that passes the result back reads its spec without a look;
- ``PER_REPLICA``: the ``[R, ...]`` stacked output as a ``PerReplica`` (or the traced value's own
  class), ragged true shapes kept, and, for a small result, its per-device copy: each device's
  buffer is its own replica's component, so ``experimental_local_results`` costs no dispatch;
- ``STATIC`` / ``STATIC_PER_REPLICA``: the Python value(s) the trace returned.

``ResultPlan.of`` makes the plan once per program from the tracer's ``OutKind``s. ``build`` is
its loop rendering (any pytree); ``compile`` its generated rendering (one expression nesting
the leaves as the treedef says, for tuples, lists, dicts, namedtuples and None; subtrees of
only tuples, namedtuples and None without leaves — optax's ``EmptyState()`` — made once), which
``specialised.compile_call`` also inlines into a program's whole generated call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

import jax

from tpustrategy._src.execution.leaves import Writer
from tpustrategy._src.execution.outputs import Kind, OutKind
from tpustrategy._src.jax_shims.array_protocol import ARRAY_IMPL as _ArrayImpl
from tpustrategy._src.values.distributed import Mirrored, PerReplica
from tpustrategy._src.values.leaf import LeafKind, LeafSpec

ARRAY, MIRRORED, PER_REPLICA = LeafKind.ARRAY, LeafKind.MIRRORED, LeafKind.PER_REPLICA
STATIC, STATIC_PER_REPLICA = LeafKind.STATIC, LeafKind.STATIC_PER_REPLICA


@dataclass(frozen=True)
class ResultStep:
    """How one result leaf is made.

    Attributes:
      kind: the leaf's kind.
      index: its output among the program's outputs (-1: a static leaf).
      num_replicas: a ``MIRRORED`` or ``PER_REPLICA`` result's number of replicas (0: read off
        the stacked array).
      cls: a ``PER_REPLICA`` result's class.
      shapes: a ragged ``PER_REPLICA`` result's true shape per replica.
      copy: the output holding a ``PER_REPLICA`` result's per-device copy (-1: none).
      value: a static leaf's value.
    """

    kind: LeafKind
    index: int = -1
    num_replicas: int = 0
    cls: type[PerReplica] = PerReplica
    shapes: tuple[tuple[int, ...], ...] | None = None
    copy: int = -1
    value: Any = None


def _step(out: OutKind, n: int) -> ResultStep:
    """One leaf's step from the tracer's output kind (``n``: the replica program's replicas; 0
    for ``tps.function``, whose leaves already say what they are)."""
    kind = out.kind
    if kind is Kind.STATIC:
        return ResultStep(STATIC, value=out.value)
    if kind is Kind.STATIC_PER_REPLICA:
        return ResultStep(STATIC_PER_REPLICA, value=out.value)
    if kind is Kind.PER_REPLICA:
        return ResultStep(PER_REPLICA, cls=cast(type, out.cls), shapes=out.shapes)
    if kind is Kind.MIRRORED:
        return ResultStep(MIRRORED, num_replicas=out.num_replicas)
    if kind is Kind.VARYING:
        if n == 1:
            return ResultStep(ARRAY)  # TensorFlow: one replica's results come back unwrapped
        return ResultStep(PER_REPLICA, num_replicas=n if out.shapes is None and n > 1 else 0, shapes=out.shapes)
    if kind is Kind.INVARIANT:
        return ResultStep(ARRAY) if n == 1 else ResultStep(MIRRORED, num_replicas=n)
    return ResultStep(ARRAY)  # Kind.ARRAY


@dataclass(frozen=True)
class ResultPlan:
    """Every result leaf's step (in the treedef's leaf order) and the structure they nest in."""

    steps: tuple[ResultStep, ...]
    treedef: Any

    @classmethod
    def of(cls, out_kinds: list[OutKind], treedef: Any, num_replicas: int, copies_at: int = 0,
           local_copies: list[int] | None = None) -> ResultPlan:
        """The plan of a program whose outputs are its dynamic results in order, then (from
        ``copies_at``) the per-device copies of the results ``local_copies`` lists."""
        copy_of = {j: copies_at + k for k, j in enumerate(local_copies or ())}
        steps, i = [], 0
        for out in out_kinds:
            step = _step(out, num_replicas)
            if step.kind in (STATIC, STATIC_PER_REPLICA):
                steps.append(step)
                continue
            copy = copy_of.get(i, -1) if step.kind is PER_REPLICA and step.num_replicas else -1
            steps.append(ResultStep(step.kind, i, step.num_replicas, step.cls, step.shapes, copy))
            i += 1
        return cls(tuple(steps), treedef)

    @property
    def num_dynamic(self) -> int:
        """How many of the program's outputs are results (the rest: written variables, copies)."""
        return sum(1 for s in self.steps if s.index >= 0)

    @property
    def single_mirrored(self) -> int:
        """A result that is one Mirrored leaf (a reduced loss): its number of replicas, else 0."""
        if self.treedef.num_nodes == 1 and len(self.steps) == 1 and self.steps[0].kind is MIRRORED:
            return self.steps[0].num_replicas
        return 0

    def mirrored_indices(self) -> list[int]:
        return [s.index for s in self.steps if s.kind is MIRRORED]

    # The loop rendering ---------------------------------------------------------------------
    def build(self, outs: Any, specs: list[LeafSpec | None]) -> Any:
        """The user's result from the program's outputs ``outs`` (``specs``: the Mirrored
        results' leaf specs by output index, None where unknown)."""
        leaves = [self._leaf(step, outs, specs) for step in self.steps]
        if self.treedef.num_nodes == 1 and len(leaves) == 1:
            return leaves[0]
        return jax.tree_util.tree_unflatten(self.treedef, leaves)

    @staticmethod
    def _leaf(step: ResultStep, outs: Any, specs: list[LeafSpec | None]) -> Any:
        kind, i = step.kind, step.index
        if kind is ARRAY:
            return outs[i]
        if kind is MIRRORED:
            concrete = type(outs[i]) is _ArrayImpl
            return Mirrored.from_replicated(outs[i], step.num_replicas, specs[i] if concrete else None)
        if kind is PER_REPLICA:
            if step.num_replicas and step.shapes is None and step.cls is PerReplica:
                local = outs[step.copy] if step.copy >= 0 else None
                return PerReplica.from_parts(step.num_replicas, outs[i], None,
                                             local if type(local) is _ArrayImpl else None)
            return step.cls.from_stacked(outs[i], step.shapes)
        if kind is STATIC:
            return step.value
        return PerReplica(list(step.value))

    # The generated rendering ----------------------------------------------------------------
    def compile(self) -> Callable[[Any, Any], Any] | None:
        """``build(outs, specs)`` as one generated expression, or None for a structure it does
        not generate (then ``build`` is the loop)."""
        w = Writer()
        body = self.expression(w, None)
        if body is None:
            return None
        return w.define(f"def build(outs, specs):\n    return {body}\n", "build")  # type: ignore[no-any-return]

    def expression(self, w: Writer, specs: list[LeafSpec | None] | None) -> str | None:
        """The result as one expression over ``outs``; with ``specs`` (the outputs are known to be
        concrete arrays: ``specialised.compile_call``) the Mirrored specs are constants, else
        they are read from ``specs`` and checked per call. None: a structure not generated."""
        if self.treedef.num_leaves != len(self.steps):
            return None
        w.consts.update(_mirrored_parts=Mirrored.from_parts, _per_replica_parts=PerReplica.from_parts,
                        _from_replicated=Mirrored.from_replicated)
        leaves = iter([_leaf_expression(w, step, specs) for step in self.steps])
        try:
            return _node(w, self.treedef, leaves)
        except _Unknown:
            return None


def _leaf_expression(w: Writer, step: ResultStep, specs: list[LeafSpec | None] | None) -> str:
    kind, i = step.kind, step.index
    if kind is ARRAY:
        return f"outs[{i}]"
    if kind is MIRRORED:
        if specs is not None:  # one frame: ``from_parts`` with every slot, the spec a constant
            return f"_mirrored_parts({step.num_replicas}, None, outs[{i}], None, ({w.const(specs[i])}, outs[{i}]))"
        return (f"_from_replicated(outs[{i}], {step.num_replicas}, specs[{i}] "
                f"if type(outs[{i}]) is _ArrayImpl else None)")
    if kind is PER_REPLICA:
        if step.num_replicas and step.shapes is None and step.cls is PerReplica:
            if step.copy < 0:
                local = "None"
            elif specs is not None:
                local = f"outs[{step.copy}]"
            else:
                local = f"(outs[{step.copy}] if type(outs[{step.copy}]) is _ArrayImpl else None)"
            return f"_per_replica_parts({step.num_replicas}, outs[{i}], None, {local})"
        return f"{w.const(step.cls)}.from_stacked(outs[{i}], {w.const(step.shapes)})"
    if kind is STATIC:
        return w.const(step.value)
    return f"_PerReplica(list({w.const(step.value)}))"


class _Unknown(Exception):
    """A node the generated rendering does not make."""


def _frozen(treedef: Any) -> bool:
    """Whether a subtree without leaves is made only of tuples, namedtuples and None."""
    data = treedef.node_data()
    if data is None:
        return False
    t = data[0]
    if t is not type(None) and not (t is tuple or (issubclass(t, tuple) and hasattr(t, "_fields"))):
        return False
    return all(_frozen(c) for c in treedef.children())


def _node(w: Writer, treedef: Any, leaves: Any) -> str:
    data = treedef.node_data()
    if data is None:  # a leaf
        return str(next(leaves))
    if treedef.num_leaves == 0 and _frozen(treedef):
        return w.const(treedef.unflatten([]))
    t, aux = data
    children = treedef.children()
    if t is type(None):
        return "None"
    if t is tuple:
        return "(" + "".join(_node(w, c, leaves) + ", " for c in children) + ")"
    if t is list:
        return "[" + ", ".join(_node(w, c, leaves) for c in children) + "]"
    if t is dict:
        return "{" + ", ".join(f"{w.const(k)}: {_node(w, c, leaves)}" for k, c in zip(aux, children)) + "}"
    if issubclass(t, tuple) and hasattr(t, "_fields"):
        return f"{w.const(t)}(" + ", ".join(_node(w, c, leaves) for c in children) + ")"
    raise _Unknown(t)
