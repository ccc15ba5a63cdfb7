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
computes its own value. A loop or conditional that contains a collective is
one such step and must be the same in every class; when it is not (its body
reads the batch), a static-length loop (``fori_loop`` with Python bounds,
``scan``) is unrolled so that each iteration's collective is cut on its own.

A segment that is the same in every class (the optimizer update after an
all-reduce) runs once; every other segment runs under one ``lax.switch`` on the
replica's class: the branch of class c slices its inputs to class c's true
shapes, evaluates class c's own equations, and pads what it hands on with
zeros. The values a class makes in one segment and reads in a later one travel
in a *padded union*: one slot per dtype, rank and position, as large as the
largest value any class keeps there, handed only to the segments that read it
(``ragged_plan`` decides all this). The collectives run between the segments,
outside the switch, on every replica alike — XLA sees the same collective on
every device — inside one ``jit(shard_map)`` over the mesh; results are placed
exactly like the uniform back end's (ragged per-replica results keep each
replica's true shape). Every reduction the user writes sees only real rows;
nothing is masked.

Classes whose collectives disagree raise ``Unsupported``, naming both
collectives and the user's source lines; ``strategy.run`` then falls back to
the eager path (outside ``tps.function``) or raises (inside it).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.execution import evaluate, invariance, jaxpr_tools, outputs, uniform
from tpustrategy._src.execution.program import Placement, Program, split_flags
from tpustrategy._src.execution.protocol import ReplicaStrategy
from tpustrategy._src.execution.ragged_plan import (
    Atom,
    Key,
    Plan,
    Unsupported,
    check_collectives,
    flatten,
)
from tpustrategy._src.execution.signature import Inputs
from tpustrategy._src.execution.trace import Traced
from tpustrategy._src.execution.uniform import over_replicas
from tpustrategy._src.values import mesh_axis
from tpustrategy._src.values.distributed import pad_to
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS

__all__ = ["Unsupported", "build"]


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
    return pad_to(jnp.asarray(x), shape, jnp)


def _trim_to(x: Any, shape: tuple[int, ...]) -> Any:
    if tuple(x.shape) == tuple(shape):
        return x
    return x[tuple(slice(0, d) for d in shape)]


def _constant(a: Atom) -> Any:
    return jnp.asarray(a.value, a.aval.dtype) if a.aval is not None else jnp.asarray(a.value)


def _read(env: dict[Key, Any], a: Atom) -> Any:
    return env[a.key] if a.key is not None else a.value


def _branch(plan: Plan, c: int, s: int, core_mesh: Any) -> Any:
    """Segment ``s`` as class ``c`` computes it: trimmed inputs in, padded union out."""
    p = plan.programs[c]
    seg = plan.segments[s]
    slots_in = [plan.segments[si].made[i] for si, i in seg.slots_in]

    def run(*args: Any) -> tuple[Any, ...]:
        env: dict[Key, Any] = {}
        for slot, x in zip(slots_in, args):
            key_in = slot.keys[c]
            if key_in is not None:
                env[key_in] = _trim_to(x, tuple(p.avals[key_in].shape))
        for key, x in zip(seg.globals_in, args[len(slots_in):]):
            env[key] = _trim_to(x, tuple(p.avals[key].shape))
        for step in p.segments[s]:
            env.update(zip(step.outs, evaluate.bind(step.eqn, [_read(env, a) for a in step.ins], core_mesh)))
        results = [_pad_to(env[k], slot.shape) if (k := slot.keys[c]) is not None
                   else jnp.zeros(slot.shape, slot.dtype) for slot in seg.made]
        if s < plan.m:
            for i in seg.emitted:
                a = p.cuts[s].ins[i]
                results.append(jnp.asarray(_read(env, a), a.aval.dtype))
        else:
            for j in seg.emitted:
                a = p.outs[j]
                results.append(_pad_to(jnp.asarray(_read(env, a), a.aval.dtype), plan.out_shapes[j]))
        return tuple(results)

    return run


def program_body(plan: Plan, class_of: list[int], core_mesh: Any) -> Any:
    """The per-replica body: shared segments inline, the others under ``lax.switch``, collectives between."""
    table = np.asarray(class_of, np.int32)
    classes = range(len(plan.programs))
    branches = [[_branch(plan, c, s, core_mesh) for c in classes] for s in range(plan.m + 1)]

    def body(local: list[Any]) -> list[Any]:
        env: dict[Key, Any] = {("in", j): x for j, x in enumerate(local)}
        slots: dict[tuple[int, int], Any] = {}
        cls = jnp.asarray(table)[jax.lax.axis_index(REPLICA_AXIS)]
        emitted: list[Any] = []
        for s, seg in enumerate(plan.segments):
            emitted = []
            if seg.shared:
                for step in plan.programs[0].segments[s]:
                    env.update(zip(step.outs, evaluate.bind(step.eqn, [_read(env, a) for a in step.ins], core_mesh)))
            elif seg.switch:
                args = [slots[k] for k in seg.slots_in] + [env[k] for k in seg.globals_in]
                results = list(jax.lax.switch(cls, branches[s], *args))
                slots.update(((s, i), x) for i, x in enumerate(results[:len(seg.made)]))
                emitted = results[len(seg.made):]
            if s < plan.m:
                made = iter(emitted)
                values = [next(made) if d is None else _read(env, d) for d in plan.cut_ops[s]]
                cut = plan.programs[0].cuts[s]
                env.update(zip(cut.outs, evaluate.bind(cut.eqn, values)))
        made = iter(emitted)
        return [next(made) if d is None else (env[d.key] if d.key is not None else _constant(d))
                for d in plan.outs]

    return body


def build(traces: list[Traced], class_of: list[int], inputs: Inputs, strategy: ReplicaStrategy,
          name: str) -> Program:
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
    try:
        check_collectives(programs, class_of)
    except Unsupported:
        # A loop whose body differs per class (it reads the batch) may still make the same
        # collectives iteration by iteration: unrolled, each is cut on its own.
        programs = [flatten(t.closed, unroll_for=n) for t in traces]
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
        if kind.is_static:
            out_kinds.append(kind)
            continue
        j, is_varying = next(flags)
        if is_varying or n == 1:
            true = tuple(tuple(programs[c].outs[j].aval.shape) for c in class_of)
            out_kinds.append(outputs.varying(true if len(set(true)) > 1 else None))
        else:
            out_kinds.append(outputs.INVARIANT)
    return Program(jitted, Placement.of(strategy), dyn_split, traces[0].variables, traces[0].written,
                   traces[0].out_treedef, out_kinds, n, name, one_shot=any(t.one_shot for t in traces))


def _output_kinds(traces: list[Traced], class_of: list[int]) -> list[outputs.OutKind]:
    """Per output leaf: static (the same everywhere), static per replica, or dynamic."""
    kinds = []
    for t in traces[1:]:
        if t.out_treedef != traces[0].out_treedef or len(t.out_kinds) != len(traces[0].out_kinds):
            raise Unsupported("the replicas return different structures")
    for position, k0 in enumerate(traces[0].out_kinds):
        column = [t.out_kinds[position] for t in traces]
        if k0.is_static:
            if any(not k.is_static for k in column):
                raise Unsupported("an output is a Python value on some replicas and an array on others")
            values = [k.value for k in column]
            if all(_same_static(v, values[0]) for v in values[1:]):
                kinds.append(k0)
            else:
                kinds.append(outputs.OutKind(outputs.Kind.STATIC_PER_REPLICA,
                                             value=tuple(values[c] for c in class_of)))
        else:
            if any(k.is_static for k in column):
                raise Unsupported("an output is a Python value on some replicas and an array on others")
            kinds.append(outputs.REPLICA)
    return kinds


def _same_static(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False
