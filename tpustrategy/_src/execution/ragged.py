"""The ragged back end: replicas with different input shapes, still one compiled program.

When the per-replica inputs differ in shape (a partial last batch, a global
batch smaller than the replica count), the replica function is traced once
per *class* of replicas with equal shapes. Collectives usually act on values
of equal shape (gradients, sums) even when the batches differ, so the
program is cut at its collectives:

    segment 0 | collective 0 | segment 1 | collective 1 | ... | segment m

Each segment runs under ``lax.switch`` on the replica's class: the branch of
class k slices its inputs to class k's true shapes, evaluates class k's
equations, and pads its results with zeros to the largest shape of any class.
The collectives run between the segments, outside the switch, on every replica
alike — so XLA sees the same collective on every device — inside one
``jit(shard_map)`` over the mesh: every replica computes its own piece in
parallel, and the results are placed exactly like the uniform back end's
(ragged per-replica results keep each replica's true shape). Every reduction
the user writes sees only real rows; nothing is masked.

Calls to functions that contain collectives (``jax.jit``'d helpers,
``custom_vjp``/``custom_jvp``, ``checkpoint``) are inlined first. What cannot
be cut this way raises ``Unsupported`` and ``strategy.run`` falls back to the
eager path: a collective inside a loop or conditional, classes whose traces
have different structures (shape-dependent Python), or a collective whose
operand shapes differ between classes (an ``all_gather`` of the ragged
batches themselves).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jcore

from tpustrategy._src.execution import evaluate, invariance, uniform
from tpustrategy._src.execution.program import Placement, Program, split_flags
from tpustrategy._src.execution.signature import Inputs
from tpustrategy._src.execution.trace import Traced
from tpustrategy._src.execution.uniform import over_replicas
from tpustrategy._src.values import mesh_axis
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS

# Cross-replica communication (everything in lax.parallel except axis_index).
COLLECTIVES = frozenset({
    "psum", "pmax", "pmin", "all_gather", "psum_invariant", "all_gather_invariant", "ppermute",
    "all_to_all", "ragged_all_to_all", "reduce_scatter", "psum_scatter", "pbroadcast",
    "psend", "precv", "all_gather_reduced", "unreduced_psum", "unreduced_reduce_scatter",
})
_INLINE = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
           "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr",
           "custom_vjp_call_jaxpr": "fun_jaxpr", "remat": "jaxpr", "remat2": "jaxpr",
           "checkpoint": "jaxpr"}


class Unsupported(Exception):
    """The ragged back end cannot compile this function (the reason is the message)."""


Key = tuple[Any, ...]
Atom = tuple[str, Any]  # ("var", key) or ("lit", value)


@dataclass
class FlatEqn:
    eqn: Any
    ins: list[Atom]
    outs: list[Key]


@dataclass
class Flat:
    """A replica jaxpr with collective-bearing calls inlined, over position keys."""

    eqns: list[FlatEqn]
    outs: list[Atom]
    avals: dict[Key, Any]


def _has_collective(jaxpr: Any) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in COLLECTIVES:
            return True
        if any(_has_collective(sub) for sub in invariance.subjaxprs(eqn.params)):
            return True
    return False


def flatten(closed: Any) -> Flat:
    jaxpr = closed.jaxpr
    names: dict[Any, Atom] = {}
    avals: dict[Key, Any] = {}
    for j, var in enumerate(jaxpr.invars):
        names[var] = ("var", ("in", j))
        avals[("in", j)] = var.aval
    for var, value in zip(jaxpr.constvars, closed.consts):
        names[var] = ("lit", value)
    eqns: list[FlatEqn] = []

    def atom(a: Any, scope: dict[Any, Atom]) -> Atom:
        if isinstance(a, jcore.Literal):
            return ("lit", a.val)
        return scope[a]

    def walk(jx: Any, scope: dict[Any, Atom]) -> None:
        for eqn in jx.eqns:
            name = eqn.primitive.name
            subs = invariance.subjaxprs(eqn.params)
            if subs and any(_has_collective(s) for s in subs):
                param = _INLINE.get(name)
                inner = eqn.params.get(param) if param else None
                if inner is None:
                    raise Unsupported(f"a collective inside `{name}` (a loop, conditional or transformation)")
                inner_jaxpr = inner.jaxpr if isinstance(inner, jcore.ClosedJaxpr) else inner
                consts = inner.consts if isinstance(inner, jcore.ClosedJaxpr) else []
                if len(inner_jaxpr.invars) != len(eqn.invars) or len(inner_jaxpr.outvars) != len(eqn.outvars):
                    raise Unsupported(f"a collective inside `{name}` with an unusual calling convention")
                inner_scope = dict(zip(inner_jaxpr.invars, (atom(a, scope) for a in eqn.invars)))
                inner_scope.update((v, ("lit", c)) for v, c in zip(inner_jaxpr.constvars, consts))
                walk(inner_jaxpr, inner_scope)
                for out, inner_out in zip(eqn.outvars, inner_jaxpr.outvars):
                    scope[out] = atom(inner_out, inner_scope)
                continue
            i = len(eqns)
            outs = []
            for k, var in enumerate(eqn.outvars):
                key = ("eq", i, k)
                scope[var] = ("var", key)
                avals[key] = var.aval
                outs.append(key)
            eqns.append(FlatEqn(eqn, [atom(a, scope) for a in eqn.invars], outs))

    walk(jaxpr, names)
    return Flat(eqns, [atom(a, names) for a in jaxpr.outvars], avals)


def _same_value(a: Any, b: Any) -> bool:
    try:
        return bool(np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
                    and np.array_equal(np.asarray(a), np.asarray(b)))
    except Exception:  # values NumPy cannot compare: assume they differ
        return False


def _same_params(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, (jcore.ClosedJaxpr, jcore.Jaxpr)) or isinstance(y, (jcore.ClosedJaxpr, jcore.Jaxpr)):
            if str(x) != str(y):
                return False
        else:
            try:
                if x != y:
                    return False
            except Exception:
                if str(x) != str(y):
                    return False
    return True


def _check_structure(flats: list[Flat]) -> list[bool]:
    """Raises Unsupported unless the classes' programs have one structure; per equation: differs?"""
    base = flats[0]
    for f in flats[1:]:
        if len(f.eqns) != len(base.eqns) or len(f.outs) != len(base.outs):
            raise Unsupported("the replicas' traces have different structures (shape-dependent Python code)")
    differs = []
    for i, e0 in enumerate(base.eqns):
        flag = False
        for f in flats[1:]:
            e = f.eqns[i]
            if e.eqn.primitive is not e0.eqn.primitive or len(e.ins) != len(e0.ins):
                raise Unsupported("the replicas' traces have different structures (shape-dependent Python code)")
            for a, b in zip(e.ins, e0.ins):
                if a[0] != b[0] or (a[0] == "var" and a[1] != b[1]):
                    raise Unsupported("the replicas' traces have different data flow")
                if a[0] == "lit" and not _same_value(a[1], b[1]):
                    flag = True
            if not _same_params(e.eqn.params, e0.eqn.params):
                flag = True
            if any(f.avals[k].shape != base.avals[k].shape for k in e0.outs):
                flag = True
        differs.append(flag)
    for f in flats[1:]:
        for a, b in zip(f.outs, base.outs):
            if a[0] != b[0] or (a[0] == "var" and a[1] != b[1]):
                raise Unsupported("the replicas' traces return different data flow")
    return differs


def _varying(flat: Flat, in_varying: list[bool], differs: list[bool]) -> dict[Key, bool]:
    varying = {("in", j): v for j, v in enumerate(in_varying)}

    def of(a: Atom) -> bool:
        return a[0] == "var" and varying.get(a[1], False)

    for fe, flag in zip(flat.eqns, differs):
        outs = invariance.eqn_outputs_varying(fe.eqn, [of(a) for a in fe.ins])
        for key, v in zip(fe.outs, outs):
            varying[key] = v or flag
    return varying


def _eval(fe: FlatEqn, values: list[Any], mesh: Any = None) -> list[Any]:
    return evaluate.bind(fe.eqn, values, mesh)


def _pad_to(x: Any, shape: tuple[int, ...]) -> Any:
    x = jnp.asarray(x)
    if tuple(x.shape) == tuple(shape):
        return x
    return jnp.pad(x, [(0, t - d) for t, d in zip(shape, x.shape)])


def _trim_to(x: Any, shape: tuple[int, ...]) -> Any:
    if tuple(x.shape) == tuple(shape):
        return x
    return x[tuple(slice(0, d) for d in shape)]


def build(traces: list[Traced], class_of: list[int], inputs: Inputs, strategy: Any, name: str) -> Program:
    """One program for replicas whose inputs differ in shape (see the module docstring).

    Args:
      traces: one settled replica trace per class of replicas (same variables).
      class_of: the class of each replica.
      inputs: the call's classified inputs.
      strategy: the strategy (its mesh and replica count).
      name: the function's name, for messages.
    """
    n = strategy.num_replicas_in_sync
    flats = [flatten(t.closed) for t in traces]
    for t in traces[1:]:
        if t.variables != traces[0].variables or t.written != traces[0].written:
            raise Unsupported("the replicas' traces read or write different variables")
    differs = _check_structure(flats)
    base = flats[0]
    kinds = _output_kinds(traces, class_of)

    def max_shape(key: Key) -> tuple[int, ...]:
        shapes = [f.avals[key].shape for f in flats]
        if len({len(s) for s in shapes}) > 1:
            raise Unsupported("a value has different ranks on different replicas")
        return tuple(max(d) for d in zip(*shapes)) if shapes[0] else ()

    # Cut at the collectives; literal operands of collectives and literal outputs that
    # differ between classes are materialised by the segment before them.
    cuts = [i for i, fe in enumerate(base.eqns) if fe.eqn.primitive.name in COLLECTIVES]
    bounds = list(zip([0] + [c + 1 for c in cuts], cuts + [len(base.eqns)]))
    materialised: dict[Key, list[Any]] = {}  # synthetic key -> value per class

    def materialise(where: Key, atoms: list[Atom]) -> Atom:
        if all(_same_value(a[1], atoms[0][1]) for a in atoms[1:]):
            return atoms[0]
        materialised[where] = [a[1] for a in atoms]
        return ("var", where)

    coll_ins: dict[int, list[Atom]] = {}
    for c in cuts:
        ins = []
        for pos, a in enumerate(base.eqns[c].ins):
            ins.append(materialise(("lit", c, pos), [f.eqns[c].ins[pos] for f in flats]) if a[0] == "lit" else a)
            if a[0] == "var":
                shapes = {f.avals[a[1]].shape for f in flats}
                if len(shapes) > 1:
                    raise Unsupported(
                        f"`{base.eqns[c].eqn.primitive.name}` of values whose shapes differ between replicas "
                        f"({sorted(shapes)})")
        coll_ins[c] = ins
    outs = [materialise(("out", i), [f.outs[i] for f in flats]) if a[0] == "lit" else a
            for i, a in enumerate(base.outs)]
    for key, vals in materialised.items():
        for f, v in zip(flats, vals):
            f.avals[key] = jax.core.get_aval(jnp.asarray(v))

    def uses(lo: int, hi: int) -> list[Key]:
        found = [a[1] for fe in base.eqns[lo:hi] for a in fe.ins if a[0] == "var"]
        return list(dict.fromkeys(found))

    def defined(key: Key, lo: int, hi: int) -> bool:
        return key[0] == "eq" and lo <= key[1] < hi

    needed_after: list[set[Key]] = []
    for si, (_lo, hi) in enumerate(bounds):
        later = {a[1] for a in outs if a[0] == "var"}
        for c in cuts[si:]:
            later |= {a[1] for a in coll_ins[c] if a[0] == "var"}
        later |= set(uses(hi, len(base.eqns)))
        needed_after.append(later)
    seg_in = [[k for k in uses(lo, hi) if not defined(k, lo, hi)] for lo, hi in bounds]
    seg_out = []
    for si, (lo, hi) in enumerate(bounds):
        made = [k for fe in base.eqns[lo:hi] for k in fe.outs if k in needed_after[si]]
        synthetic = [k for k in materialised if (k[0] == "lit" and k[1] == (cuts[si] if si < len(cuts) else None))
                     or (k[0] == "out" and si == len(bounds) - 1)]
        seg_out.append(made + synthetic)
    shapes = {k: max_shape(k) for k in base.avals}

    def branch(cls: int, si: int) -> Any:
        flat = flats[cls]
        lo, hi = bounds[si]

        def run(*padded: Any) -> tuple[Any, ...]:
            env = {k: _trim_to(x, flat.avals[k].shape) for k, x in zip(seg_in[si], padded)}

            def read(a: Atom) -> Any:
                return env[a[1]] if a[0] == "var" else a[1]

            for fe in flat.eqns[lo:hi]:
                env.update(zip(fe.outs, _eval(fe, [read(a) for a in fe.ins], core_mesh)))
            result = []
            for k in seg_out[si]:
                value = env[k] if k in env else jnp.asarray(materialised[k][cls])
                result.append(_pad_to(value, shapes[k]))
            return tuple(result)

        return run

    num_classes = len(flats)
    core_mesh = strategy.mesh if mesh_axis.has_cores(strategy.mesh) else None
    table = np.asarray(class_of, np.int32)
    dyn_split = split_flags(inputs.specs)
    in_split = dyn_split + [uniform.is_split_variable(v) for v in traces[0].variables]
    varying = _varying(base, in_split, differs)
    out_var = [a[0] == "var" and (varying.get(a[1], False) or a[1][0] in ("lit", "out")) for a in outs]
    n_out = traces[0].num_dynamic_outputs
    uniform.check_written(traces[0], out_var[n_out:], n)
    out_split = out_var[:n_out] + [uniform.is_split_variable(v) for v in traces[0].written]

    def body(local: list[Any]) -> list[Any]:
        env: dict[Key, Any] = {("in", j): x for j, x in enumerate(local)}
        cls = jnp.asarray(table)[jax.lax.axis_index(REPLICA_AXIS)]
        for si in range(len(bounds)):
            if seg_out[si]:
                args = [env[k] for k in seg_in[si]]
                results = jax.lax.switch(cls, [branch(k, si) for k in range(num_classes)], *args)
                env.update(zip(seg_out[si], results))
            if si < len(cuts):
                c = cuts[si]
                fe = base.eqns[c]
                values = [env[a[1]] if a[0] == "var" else a[1] for a in coll_ins[c]]
                env.update(zip(fe.outs, _eval(fe, values)))
        return [env[a[1]] if a[0] == "var" else jnp.asarray(a[1]) for a in outs]

    jitted = over_replicas(body, strategy, in_split, out_split, traces[0].written)
    out_kinds = []
    flags = iter(zip(out_var[:n_out], outs[:n_out]))
    for kind in kinds:
        if kind[0] != "dynamic":
            out_kinds.append(kind)
            continue
        is_varying, a = next(flags)
        if is_varying or n == 1:
            per_class = [f.avals[a[1]].shape if a[0] == "var" else np.shape(a[1]) for f in flats]
            true = tuple(tuple(per_class[c]) for c in class_of)
            out_kinds.append(("varying", true if len(set(true)) > 1 else None))
        else:
            out_kinds.append(("invariant",))
    return Program(jitted, Placement.of(strategy), dyn_split, traces[0].variables, traces[0].written,
                   traces[0].out_treedef, out_kinds, n, name, one_shot=any(t.one_shot for t in traces))


def _output_kinds(traces: list[Traced], class_of: list[int]) -> list[Any]:
    """Per output leaf: static (the same everywhere), static per replica, or dynamic."""
    kinds = []
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
    for t in traces[1:]:
        if t.out_treedef != traces[0].out_treedef:
            raise Unsupported("the replicas return different structures")
    return kinds


def _same_static(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:
        return False
