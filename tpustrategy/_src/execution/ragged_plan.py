"""The plan of a ragged program: each class's jaxpr cut at its collectives, and how values flow.

``flatten`` turns one class's replica jaxpr into segments between collectives
(calls that contain a collective are inlined first; a loop or conditional that
contains one is a single step, or, asked to, a static-length loop is unrolled). ``check_collectives`` requires the k-th
collectives of all classes to agree and names the first difference with the
user's source lines. ``Plan`` then decides, per segment:

- **shared** segments — the same equations on the same shapes in every class
  (the optimizer update after an all-reduce, the division of a MEAN) — are
  evaluated once, outside any ``lax.switch``; their results are shared values;
- every other segment is one ``lax.switch`` on the replica's class. The values
  a class makes there and reads in a later segment leave the switch in a
  *padded union*: one slot per dtype, rank and position, as large as the
  largest value any class keeps there (zeros for a class that keeps nothing).
  A slot is handed only to the segments that read it, not through the ones
  in between;
- operands of the collective after it and outputs of the program are read
  directly when every class has the same shared value or constant there, and
  otherwise made by the segment's switch (``emitted``).

Keys name values: ``("in", j)`` program input j, ``("cut", k, o)`` output o of
the k-th collective and ``("sh", s, i, o)`` a shared segment's result (the same
in every class), ``("eq", i, o)`` output o of a class's i-th equation (that
class's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax

from tpustrategy._src.execution import jaxpr_tools


class Unsupported(Exception):
    """The ragged back end cannot compile this function (the reason is the message)."""


Key = tuple[Any, ...]


@dataclass(frozen=True)
class Atom:
    """An operand: a value by key, or a constant (``key`` None)."""

    key: Key | None
    value: Any = None
    aval: Any = None


@dataclass
class Step:
    eqn: Any
    ins: list[Atom]
    outs: list[Key]


@dataclass
class ClassProgram:
    """One class's replica jaxpr: calls containing collectives inlined, cut at its collectives."""

    segments: list[list[Step]]  # one more than cuts
    cuts: list[Step]
    outs: list[Atom]
    avals: dict[Key, Any]


def flatten(closed: Any, unroll_for: int | None = None) -> ClassProgram:
    """Cuts a class's closed jaxpr at its collectives.

    Args:
      closed: the class's replica jaxpr.
      unroll_for: the replica count, to unroll static-length loops (``fori_loop``)
        that contain a collective, so that each iteration's collective is cut on its
        own; None keeps such a loop as one step.
    """
    jaxpr = closed.jaxpr
    avals: dict[Key, Any] = {("in", j): var.aval for j, var in enumerate(jaxpr.invars)}
    segments: list[list[Step]] = [[]]
    cuts: list[Step] = []
    count = [0]
    contains: dict[int, bool] = {}

    def has_collective(eqn: Any) -> bool:
        found = contains.get(id(eqn))
        if found is None:
            found = contains[id(eqn)] = jaxpr_tools.contains_collective(eqn)
        return found

    def emit(eqn: Any, ins: list[Atom]) -> list[Atom]:
        if has_collective(eqn):
            outs = [("cut", len(cuts), o) for o in range(len(eqn.outvars))]
            cuts.append(Step(eqn, ins, outs))
            segments.append([])
        else:
            outs = [("eq", count[0], o) for o in range(len(eqn.outvars))]
            count[0] += 1
            segments[-1].append(Step(eqn, ins, outs))
        avals.update(zip(outs, (var.aval for var in eqn.outvars)))
        return [Atom(key, aval=var.aval) for key, var in zip(outs, eqn.outvars)]

    outs = jaxpr_tools.interpret(
        jaxpr, [Atom(None, c, v.aval) for c, v in zip(closed.consts, jaxpr.constvars)],
        [Atom(("in", j), aval=var.aval) for j, var in enumerate(jaxpr.invars)], emit,
        inline=lambda eqn: has_collective(eqn) and not jaxpr_tools.is_collective(eqn),
        constant=lambda value, aval: Atom(None, value, aval),
        expand=lambda eqn: jaxpr_tools.called(eqn) or (
            jaxpr_tools.unrolled(eqn, unroll_for) if unroll_for is not None else None))
    return ClassProgram(segments, cuts, outs, avals)


# Agreement of the collectives -------------------------------------------------------------------
def _signature(step: Step) -> tuple[Any, ...]:
    avals = tuple(jaxpr_tools.aval_key(a.aval) for a in step.ins)
    return (step.eqn.primitive.name, jaxpr_tools.params_key(step.eqn), avals)


def _replicas(groups: list[list[int]], classes: list[int], verb: str) -> str:
    """``replica 3 makes`` / ``replicas [0, 1, 2] make`` (``verb`` in the plural)."""
    members = sorted(r for c in classes for r in groups[c])
    if len(members) == 1:
        return f"replica {members[0]} {verb.replace('make', 'makes', 1)}"
    return f"replicas {members} {verb}"


def check_collectives(programs: list[ClassProgram], class_of: list[int]) -> None:
    """Raises ``Unsupported`` unless every class makes the same collectives (naming the first difference)."""
    groups = [[r for r, c in enumerate(class_of) if c == k] for k in range(len(programs))]
    rule = ("Every replica must make the same collectives in the same order, on values of the same "
            "shapes; reduce inside each replica first (e.g. jnp.sum(x)) or all_reduce fixed-size values")
    counts = [len(p.cuts) for p in programs]
    for k in range(max(counts)):
        present = [c for c in range(len(programs)) if k < counts[c]]
        if len(present) < len(programs):
            absent = [c for c in range(len(programs)) if c not in present]
            first = programs[present[0]].cuts[k].eqn
            raise Unsupported(
                f"their collectives disagree: {_replicas(groups, present, 'make')} {jaxpr_tools.describe(first)}, "
                f"which {_replicas(groups, absent, 'never make')}. {rule}")
        by_signature: dict[Any, list[int]] = {}
        for c in range(len(programs)):
            by_signature.setdefault(_signature(programs[c].cuts[k]), []).append(c)
        if len(by_signature) > 1:
            eqns = [programs[cs[0]].cuts[k].eqn for cs in by_signature.values()]
            lines = {jaxpr_tools.source_line(e) for e in eqns}
            text = jaxpr_tools.operation if len(lines) == 1 else jaxpr_tools.describe
            listed = ", ".join(f"{_replicas(groups, cs, 'make')} {text(e)}" for cs, e in zip(by_signature.values(), eqns))
            where = f" ({lines.pop()})" if len(lines) == 1 else ""
            raise Unsupported(f"their collectives disagree: at the same point{where}, {listed}. {rule}")


# The plan -------------------------------------------------------------------------------------
@dataclass
class Slot:
    """One value of the padded union a segment hands on: per class the key it holds there."""

    dtype: Any
    shape: tuple[int, ...]
    keys: list[Key | None]


@dataclass
class Segment:
    """What one segment's ``lax.switch`` takes and gives (nothing when it is shared)."""

    shared: bool = False
    slots_in: list[tuple[int, int]] = field(default_factory=list)  # (segment, slot) it reads
    globals_in: list[Key] = field(default_factory=list)  # inputs, collective and shared results it reads
    made: list[Slot] = field(default_factory=list)  # values it makes that later segments read
    emitted: list[int] = field(default_factory=list)  # operands of the next collective / outputs it makes
    switch: bool = False


def _same(atoms: list[Atom]) -> Atom | None:
    """The atom when every class has the same shared value or constant there, else None."""
    first = atoms[0]
    if first.key is not None:
        return first if first.key[0] != "eq" and all(a.key == first.key for a in atoms) else None
    key = jaxpr_tools.value_key(first.value)
    return first if all(a.key is None and jaxpr_tools.value_key(a.value) == key for a in atoms) else None


def max_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(max(d) for d in zip(*shapes)) if shapes and shapes[0] else ()


class Plan:
    """Segments, padded-union slots and collective operands of a set of class programs."""

    def __init__(self, programs: list[ClassProgram]):
        self.programs = programs
        p0 = programs[0]
        self.m = m = len(p0.cuts)
        if len({len(p.outs) for p in programs}) > 1:
            raise Unsupported("the replicas return different numbers of arrays")
        self.segments = [Segment() for _ in range(m + 1)]
        for s in range(m + 1):
            if self._shareable(s):
                self._share(s)
        self.cut_ops = [[_same([p.cuts[k].ins[i] for p in programs]) for i in range(len(p0.cuts[k].ins))]
                        for k in range(m)]
        self.outs = [_same([p.outs[j] for p in programs]) for j in range(len(p0.outs))]
        self.out_shapes: dict[int, tuple[int, ...]] = {}
        for j, direct in enumerate(self.outs):
            if direct is None:
                avals = [p.outs[j].aval for p in programs]
                if len({(len(a.shape), str(a.dtype)) for a in avals}) > 1:
                    listed = ", ".join(sorted({jaxpr_tools.aval_text(a) for a in avals}))
                    raise Unsupported(f"output {j} has different ranks or dtypes on different replicas ({listed})")
                self.out_shapes[j] = max_shape([tuple(a.shape) for a in avals])
        for k in range(m):
            self.segments[k].emitted = [i for i, d in enumerate(self.cut_ops[k]) if d is None]
        self.segments[m].emitted = [j for j, d in enumerate(self.outs) if d is None]
        self._flow()

    # Shared segments --------------------------------------------------------------------------
    def _tail(self, c: int, s: int) -> list[Atom]:
        p = self.programs[c]
        return list(p.cuts[s].ins) if s < self.m else list(p.outs)

    def _describe(self, c: int, s: int) -> tuple[Any, ...] | None:
        """Class ``c``'s segment ``s`` up to renaming of its own values; None if it reads earlier ones."""
        p = self.programs[c]
        local: dict[Key, tuple[int, int]] = {}

        def atom(a: Atom) -> Any:
            if a.key is None:
                return ("const", jaxpr_tools.value_key(a.value))
            if a.key[0] != "eq":
                return ("global", a.key, jaxpr_tools.aval_key(p.avals[a.key]))
            return ("local", local[a.key]) if a.key in local else None

        steps = []
        for i, step in enumerate(p.segments[s]):
            ins = [atom(a) for a in step.ins]
            if any(x is None for x in ins):
                return None
            steps.append((step.eqn.primitive.name, jaxpr_tools.params_key(step.eqn), tuple(ins)))
            local.update((key, (i, o)) for o, key in enumerate(step.outs))
        tail = [atom(a) for a in self._tail(c, s)]
        if any(x is None for x in tail):
            return None
        return tuple(steps), tuple(tail)

    def _shareable(self, s: int) -> bool:
        if not self.programs[0].segments[s]:
            return False
        first = self._describe(0, s)
        return first is not None and all(self._describe(c, s) == first for c in range(1, len(self.programs)))

    def _share(self, s: int) -> None:
        """Renames the segment's results to shared keys in every class."""
        self.segments[s].shared = True
        for p in self.programs:
            rename = {key: ("sh", s, i, o) for i, step in enumerate(p.segments[s]) for o, key in enumerate(step.outs)}
            for old, new in rename.items():
                p.avals[new] = p.avals[old]

            def fix(a: Atom, rename: dict[Key, Key] = rename) -> Atom:
                return Atom(rename[a.key], a.value, a.aval) if a.key in rename else a

            for steps in p.segments[s:]:
                for step in steps:
                    step.ins = [fix(a) for a in step.ins]
                    step.outs = [rename.get(k, k) for k in step.outs]
            for cut in p.cuts[s:]:
                cut.ins = [fix(a) for a in cut.ins]
            p.outs = [fix(a) for a in p.outs]

    # Flow of values between segments -------------------------------------------------------------
    def _uses(self, c: int) -> list[list[Atom]]:
        """Per segment: every atom class ``c`` reads there (its equations, emitted operands, outputs)."""
        p = self.programs[c]
        uses = [[a for step in p.segments[s] for a in step.ins] for s in range(self.m + 1)]
        for k in range(self.m):
            uses[k] += [p.cuts[k].ins[i] for i in self.segments[k].emitted]
        uses[self.m] += [p.outs[j] for j in self.segments[self.m].emitted]
        return uses

    def _flow(self) -> None:
        programs = self.programs
        uses = [self._uses(c) for c in range(len(programs))]
        made_in: list[dict[Key, int]] = []
        read_later: list[list[list[Key]]] = []
        for c, p in enumerate(programs):
            made = {key: s for s in range(self.m + 1) for step in p.segments[s] for key in step.outs
                    if key[0] == "eq"}
            later: set[Key] = {a.key for s, atoms in enumerate(uses[c]) for a in atoms
                               if a.key is not None and a.key in made and made[a.key] < s}
            made_in.append(made)
            read_later.append([[k for k in made if made[k] == s and k in later] for s in range(self.m + 1)])
        where: list[dict[Key, tuple[int, int]]] = [{} for _ in programs]
        for s, seg in enumerate(self.segments):
            seg.made = self._slots([read_later[c][s] for c in range(len(programs))])
            for i, slot in enumerate(seg.made):
                for c, key in enumerate(slot.keys):
                    if key is not None:
                        where[c][key] = (s, i)
        for s, seg in enumerate(self.segments):
            if seg.shared:
                seg.globals_in = []
                continue
            for c in range(len(programs)):
                for a in uses[c][s]:
                    if a.key is None:
                        continue
                    if a.key[0] != "eq":
                        if a.key not in seg.globals_in:
                            seg.globals_in.append(a.key)
                    elif made_in[c][a.key] < s and where[c][a.key] not in seg.slots_in:
                        seg.slots_in.append(where[c][a.key])
            seg.switch = bool(seg.emitted or seg.made) or any(p.segments[s] for p in programs)

    def _slots(self, per_class: list[list[Key]]) -> list[Slot]:
        slots: list[Slot] = []
        index: dict[tuple[Any, int, int], Slot] = {}
        for c, keys in enumerate(per_class):
            seen: dict[tuple[Any, int], int] = {}
            for key in keys:
                aval = self.programs[c].avals[key]
                group = (str(aval.dtype), len(aval.shape))
                i = seen[group] = seen.get(group, -1) + 1
                slot = index.get(group + (i,))
                if slot is None:
                    slot = index[group + (i,)] = Slot(aval.dtype, tuple(aval.shape), [None] * len(per_class))
                    slots.append(slot)
                slot.shape = max_shape([slot.shape, tuple(aval.shape)])
                slot.keys[c] = key
        for slot in slots:
            shapes = {tuple(self.programs[c].avals[k].shape) for c, k in enumerate(slot.keys) if k is not None}
            if len(shapes) > 1 and jax.numpy.issubdtype(slot.dtype, jax.dtypes.extended):
                raise Unsupported(f"{slot.dtype} values (e.g. PRNG keys) of different shapes {sorted(shapes)} "
                                  "are live across a collective, and they cannot be padded")
        return slots
