"""The ragged back end: replicas with different input shapes, still one compiled program.

When the per-replica inputs differ in shape (a partial last batch, a global
batch smaller than the replica count), the replica function is traced once
per *class* of replicas with equal shapes. The classes' programs may differ
anywhere between their collectives — shape-dependent code such as
``jnp.broadcast_to(w, x.shape)``, ``jnp.squeeze``, or Python arithmetic on
``x.shape[0]`` traces to different equations — but every replica must make
the same sequence of collectives. So each class's program is cut at its
collectives (``jaxpr_tools.is_collective``; calls containing one are inlined
first):

    segment 0 | collective 0 | segment 1 | collective 1 | ... | segment m

and the k-th collectives of all classes must agree: the same primitive and
parameters, on operands of the same shapes and dtypes once each class's true
shapes are known. A literal or shape-derived operand
(``all_reduce("SUM", jnp.float32(x.shape[0]))``) may differ: each class
computes its own value. Loops and conditionals that contain a collective are
one such step and must be the same in every class.

Segment k of every class runs under one ``lax.switch`` on the replica's class:
the branch of class c slices its inputs to class c's true shapes, evaluates
class c's own equations, and pads what it hands on with zeros. Between the
segments the live values of every class travel in a *padded union*: one slot
per dtype, rank and position, as large as the largest value any class keeps
there. The collectives run between the segments, outside the switch, on every
replica alike — XLA sees the same collective on every device — inside one
``jit(shard_map)`` over the mesh; results are placed exactly like the uniform
back end's (ragged per-replica results keep each replica's true shape). Every
reduction the user writes sees only real rows; nothing is masked.

Classes whose collectives disagree raise ``Unsupported``, naming both
collectives and the user's source lines; ``strategy.run`` then falls back to
the eager path (outside ``tps.function``) or raises (inside it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.execution import evaluate, invariance, jaxpr_tools, uniform
from tpustrategy._src.execution.program import Placement, Program, split_flags
from tpustrategy._src.execution.signature import Inputs
from tpustrategy._src.execution.trace import Traced
from tpustrategy._src.execution.uniform import over_replicas
from tpustrategy._src.values import mesh_axis
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS


class Unsupported(Exception):
    """The ragged back end cannot compile this function (the reason is the message)."""


# ("in", j): program input j; ("cut", k, o): output o of the k-th collective (both shared
# by every class); ("eq", i, o): output o of a class's i-th equation (that class's own).
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


def flatten(closed: Any) -> ClassProgram:
    """Cuts a class's closed jaxpr at its collectives (see the module docstring)."""
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
        constant=lambda value, aval: Atom(None, value, aval))
    return ClassProgram(segments, cuts, outs, avals)


# Agreement of the collectives -------------------------------------------------------------------
def _signature(step: Step) -> tuple[Any, ...]:
    avals = tuple((tuple(a.aval.shape), str(a.aval.dtype)) for a in step.ins)
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
    """One value of the padded union between two segments: per class the key it holds there."""

    dtype: Any
    shape: tuple[int, ...]
    keys: list[Key | None]


@dataclass
class Segment:
    """What one segment's ``lax.switch`` takes and gives."""

    globals_in: list[Key] = field(default_factory=list)  # inputs and collective results it reads
    carry_out: list[Slot] = field(default_factory=list)  # live values it hands on
    emitted: list[int] = field(default_factory=list)  # operands of the next collective / outputs it makes
    switch: bool = False


def _same(atoms: list[Atom]) -> Atom | None:
    """The atom when every class has the same shared value or constant there, else None."""
    first = atoms[0]
    if first.key is not None:
        return first if first.key[0] != "eq" and all(a.key == first.key for a in atoms) else None
    key = jaxpr_tools.value_key(first.value)
    return first if all(a.key is None and jaxpr_tools.value_key(a.value) == key for a in atoms) else None


def _max_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    return tuple(max(d) for d in zip(*shapes)) if shapes and shapes[0] else ()


class Plan:
    """Segments, padded-union slots and collective operands of a set of class programs."""

    def __init__(self, programs: list[ClassProgram]):
        self.programs = programs
        p0 = programs[0]
        self.m = m = len(p0.cuts)
        self.cut_ops = [[_same([p.cuts[k].ins[i] for p in programs]) for i in range(len(p0.cuts[k].ins))]
                        for k in range(m)]
        if len({len(p.outs) for p in programs}) > 1:
            raise Unsupported("the replicas return different numbers of arrays")
        self.outs = [_same([p.outs[j] for p in programs]) for j in range(len(p0.outs))]
        self.out_shapes: dict[int, tuple[int, ...]] = {}
        for j, direct in enumerate(self.outs):
            if direct is None:
                avals = [p.outs[j].aval for p in programs]
                if len({(len(a.shape), str(a.dtype)) for a in avals}) > 1:
                    listed = ", ".join(sorted({jaxpr_tools.aval_text(a) for a in avals}))
                    raise Unsupported(f"output {j} has different ranks or dtypes on different replicas ({listed})")
                self.out_shapes[j] = _max_shape([tuple(a.shape) for a in avals])
        self.segments = [Segment() for _ in range(m + 1)]
        for k in range(m):
            self.segments[k].emitted = [i for i, d in enumerate(self.cut_ops[k]) if d is None]
        self.segments[m].emitted = [j for j, d in enumerate(self.outs) if d is None]
        carried = [self._liveness(c) for c in range(len(programs))]
        for s, seg in enumerate(self.segments):
            seg.switch = bool(seg.emitted) or any(p.segments[s] for p in programs)
            if s < m:
                seg.carry_out = self._slots([carried[c][s] for c in range(len(programs))])

    def _uses(self, c: int) -> list[list[Atom]]:
        """Per segment: every atom class ``c`` reads there (its equations, emitted operands, outputs)."""
        p = self.programs[c]
        uses = [[a for step in p.segments[s] for a in step.ins] for s in range(self.m + 1)]
        for k in range(self.m):
            uses[k] += [p.cuts[k].ins[i] for i in self.segments[k].emitted]
        uses[self.m] += [p.outs[j] for j in self.segments[self.m].emitted]
        return uses

    def _liveness(self, c: int) -> list[list[Key]]:
        """Per segment boundary: class ``c``'s own values made before it and read after it."""
        p = self.programs[c]
        made_in = {key: s for s in range(self.m + 1) for step in p.segments[s] for key in step.outs}
        last: dict[Key, int] = {}
        for s, atoms in enumerate(self._uses(c)):
            for a in atoms:
                if a.key is None:
                    continue
                if a.key[0] == "eq":
                    last[a.key] = s
                elif a.key not in self.segments[s].globals_in:
                    self.segments[s].globals_in.append(a.key)
        return [[k for k in made_in if made_in[k] <= s < last.get(k, -1)] for s in range(self.m)]

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
                slot.shape = _max_shape([slot.shape, tuple(aval.shape)])
                slot.keys[c] = key
        for slot in slots:
            shapes = {tuple(self.programs[c].avals[k].shape) for c, k in enumerate(slot.keys) if k is not None}
            if len(shapes) > 1 and jax.dtypes.issubdtype(slot.dtype, jax.dtypes.extended):
                raise Unsupported(f"{slot.dtype} values (e.g. PRNG keys) of different shapes {sorted(shapes)} "
                                  "are live across a collective, and they cannot be padded")
        return slots


# Replica invariance across classes ----------------------------------------------------------
def varying(plan: Plan, in_varying: list[bool]) -> list[bool]:
    """Per output: may it differ between replicas?

    A value varies when it varies within a class (``invariance``'s rules) or when
    the classes compute it differently (compared by hash-consed expressions).
    """
    programs = plan.programs
    ids: dict[Any, int] = {}
    flags: list[dict[Key, bool]] = [{} for _ in programs]
    exprs: list[dict[Key, int]] = [{} for _ in programs]
    cut_flags: dict[Key, bool] = {}

    def intern(x: Any) -> int:
        return ids.setdefault(x, len(ids))

    def flag(c: int, a: Atom) -> bool:
        if a.key is None:
            return False
        if a.key[0] == "in":
            return in_varying[a.key[1]]
        return cut_flags[a.key] if a.key[0] == "cut" else flags[c][a.key]

    def expr(c: int, a: Atom) -> int:
        if a.key is None:
            return intern(jaxpr_tools.value_key(a.value))
        return exprs[c][a.key] if a.key[0] == "eq" else intern(a.key)

    for s in range(plan.m + 1):
        for c, p in enumerate(programs):
            for step in p.segments[s]:
                outs = invariance.eqn_outputs_varying(step.eqn, [flag(c, a) for a in step.ins])
                head = (step.eqn.primitive.name, jaxpr_tools.params_key(step.eqn),
                        tuple(expr(c, a) for a in step.ins))
                for o, (key, f) in enumerate(zip(step.outs, outs)):
                    flags[c][key] = f
                    exprs[c][key] = intern(head + (o,))
        if s < plan.m:
            cut = programs[0].cuts[s]
            ins = [any(flag(c, p.cuts[s].ins[i]) for c, p in enumerate(programs))
                   or len({expr(c, p.cuts[s].ins[i]) for c, p in enumerate(programs)}) > 1
                   for i in range(len(cut.ins))]
            cut_flags.update(zip(cut.outs, invariance.eqn_outputs_varying(cut.eqn, ins)))
    return [any(flag(c, p.outs[j]) for c, p in enumerate(programs))
            or len({expr(c, p.outs[j]) for c, p in enumerate(programs)}) > 1
            for j in range(len(programs[0].outs))]


# The program ----------------------------------------------------------------------------------
def _pad_to(x: Any, shape: tuple[int, ...]) -> Any:
    x = jnp.asarray(x)
    if tuple(x.shape) == tuple(shape):
        return x
    return jnp.pad(x, [(0, t - d) for t, d in zip(shape, x.shape)])


def _trim_to(x: Any, shape: tuple[int, ...]) -> Any:
    if tuple(x.shape) == tuple(shape):
        return x
    return x[tuple(slice(0, d) for d in shape)]


def _constant(a: Atom) -> Any:
    return jnp.asarray(a.value, a.aval.dtype) if a.aval is not None else jnp.asarray(a.value)


def _branch(plan: Plan, c: int, s: int, core_mesh: Any) -> Any:
    """Segment ``s`` as class ``c`` computes it: trimmed inputs in, padded union out."""
    p = plan.programs[c]
    seg = plan.segments[s]
    carry_in = plan.segments[s - 1].carry_out if s > 0 else []

    def run(*args: Any) -> tuple[Any, ...]:
        env: dict[Key, Any] = {}
        for slot, x in zip(carry_in, args):
            if slot.keys[c] is not None:
                env[slot.keys[c]] = _trim_to(x, tuple(p.avals[slot.keys[c]].shape))
        for key, x in zip(seg.globals_in, args[len(carry_in):]):
            env[key] = _trim_to(x, tuple(p.avals[key].shape)) if key in p.avals else x

        def read(a: Atom) -> Any:
            return env[a.key] if a.key is not None else a.value

        for step in p.segments[s]:
            env.update(zip(step.outs, evaluate.bind(step.eqn, [read(a) for a in step.ins], core_mesh)))
        results = [_pad_to(env[slot.keys[c]], slot.shape) if slot.keys[c] is not None
                   else jnp.zeros(slot.shape, slot.dtype) for slot in seg.carry_out]
        if s < plan.m:
            for i in seg.emitted:
                a = p.cuts[s].ins[i]
                results.append(jnp.asarray(read(a), a.aval.dtype))
        else:
            for j in seg.emitted:
                a = p.outs[j]
                results.append(_pad_to(jnp.asarray(read(a), a.aval.dtype), plan.out_shapes[j]))
        return tuple(results)

    return run


def program_body(plan: Plan, class_of: list[int], core_mesh: Any) -> Any:
    """The per-replica body: segments under ``lax.switch``, collectives between them."""
    table = np.asarray(class_of, np.int32)
    classes = range(len(plan.programs))
    branches = [[_branch(plan, c, s, core_mesh) for c in classes] for s in range(plan.m + 1)]

    def body(local: list[Any]) -> list[Any]:
        env: dict[Key, Any] = {("in", j): x for j, x in enumerate(local)}
        cls = jnp.asarray(table)[jax.lax.axis_index(REPLICA_AXIS)]
        carry: list[Any] = []
        emitted: list[Any] = []
        for s, seg in enumerate(plan.segments):
            emitted = []
            if seg.switch:
                results = list(jax.lax.switch(cls, branches[s], *carry, *[env[k] for k in seg.globals_in]))
                carry, emitted = results[:len(seg.carry_out)], results[len(seg.carry_out):]
            if s < plan.m:
                made = iter(emitted)
                values = [next(made) if d is None else (env[d.key] if d.key is not None else d.value)
                          for d in plan.cut_ops[s]]
                cut = plan.programs[0].cuts[s]
                env.update(zip(cut.outs, evaluate.bind(cut.eqn, values)))
        made = iter(emitted)
        return [next(made) if d is None else (env[d.key] if d.key is not None else _constant(d))
                for d in plan.outs]

    return body


def build(traces: list[Traced], class_of: list[int], inputs: Inputs, strategy: Any, name: str) -> Program:
    """One program for replicas whose inputs differ in shape (see the module docstring).

    Args:
      traces: one settled replica trace per class of replicas (same variables).
      class_of: the class of each replica.
      inputs: the call's classified inputs.
      strategy: the strategy (its mesh and replica count).
      name: the function's name, for messages.

    Raises:
      Unsupported: the classes' collectives disagree, or their results cannot be stacked.
    """
    n = strategy.num_replicas_in_sync
    for t in traces[1:]:
        if t.variables != traces[0].variables or t.written != traces[0].written:
            raise Unsupported("the replicas' traces read or write different variables")
    kinds = _output_kinds(traces, class_of)
    programs = [flatten(t.closed) for t in traces]
    check_collectives(programs, class_of)
    plan = Plan(programs)
    core_mesh = strategy.mesh if mesh_axis.has_cores(strategy.mesh) else None
    dyn_split = split_flags(inputs.specs)
    in_split = dyn_split + [uniform.is_split_variable(v) for v in traces[0].variables]
    out_var = varying(plan, in_split)
    n_out = traces[0].num_dynamic_outputs
    uniform.check_written(traces[0], out_var[n_out:], n)
    out_split = out_var[:n_out] + [uniform.is_split_variable(v) for v in traces[0].written]
    jitted = over_replicas(program_body(plan, class_of, core_mesh), strategy, in_split, out_split,
                           traces[0].written)
    out_kinds = []
    flags = iter(enumerate(out_var[:n_out]))
    for kind in kinds:
        if kind[0] != "dynamic":
            out_kinds.append(kind)
            continue
        j, is_varying = next(flags)
        if is_varying or n == 1:
            true = tuple(tuple(programs[c].outs[j].aval.shape) for c in class_of)
            out_kinds.append(("varying", true if len(set(true)) > 1 else None))
        else:
            out_kinds.append(("invariant",))
    return Program(jitted, Placement.of(strategy), dyn_split, traces[0].variables, traces[0].written,
                   traces[0].out_treedef, out_kinds, n, name, one_shot=any(t.one_shot for t in traces))


def _output_kinds(traces: list[Traced], class_of: list[int]) -> list[Any]:
    """Per output leaf: static (the same everywhere), static per replica, or dynamic."""
    kinds = []
    for t in traces[1:]:
        if t.out_treedef != traces[0].out_treedef or len(t.out_kinds) != len(traces[0].out_kinds):
            raise Unsupported("the replicas return different structures")
    for position, k0 in enumerate(traces[0].out_kinds):
        column = [t.out_kinds[position] for t in traces]
        if k0[0] == "static":
            if any(k[0] != "static" for k in column):
                raise Unsupported("an output is a Python value on some replicas and an array on others")
            values = [k[1] for k in column]
            if all(_same_static(v, values[0]) for v in values[1:]):
                kinds.append(k0)
            else:
                kinds.append(("static_per_replica", tuple(values[c] for c in class_of)))
        else:
            if any(k[0] == "static" for k in column):
                raise Unsupported("an output is a Python value on some replicas and an array on others")
            kinds.append(("dynamic",))
    return kinds


def _same_static(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False
