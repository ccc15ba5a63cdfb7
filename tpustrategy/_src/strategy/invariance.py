"""Which outputs of a replica function are provably equal on every replica.

A small forward data-flow analysis over the traced jaxpr: per-replica inputs
and ``axis_index`` vary across replicas; broadcast inputs, literals and the
results of ``psum``/``all_gather``/``pmax``/``pmin`` do not; any other
equation varies when one of its inputs varies. Nested jaxprs of calls are
analysed recursively; control flow with a varying input (or an ``axis_index``
inside) is treated as varying. The analysis may say "varying" for a value
that is in fact equal everywhere (then it comes back as ``PerReplica``), never
the reverse.
"""

from __future__ import annotations

from typing import Any

from jax.extend import core as jcore

_INVARIANT_RESULT = {"psum", "pmax", "pmin", "all_gather", "psum_invariant", "all_gather_invariant"}
_VARYING_RESULT = {"axis_index", "ppermute", "all_to_all", "psum_scatter", "reduce_scatter", "pbroadcast"}
_CALLS = {
    "pjit",
    "jit",
    "closed_call",
    "core_call",
    "remat",
    "checkpoint",
    "custom_jvp_call",
    "custom_vjp_call",
    "custom_vjp_call_jaxpr",
}


def _subjaxprs(params: dict[str, Any]) -> list[Any]:
    found = []
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jcore.ClosedJaxpr):
                found.append(item.jaxpr)
            elif isinstance(item, jcore.Jaxpr):
                found.append(item)
    return found


def _contains_axis_index(jaxpr: Any) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in _VARYING_RESULT:
            return True
        if any(_contains_axis_index(sub) for sub in _subjaxprs(eqn.params)):
            return True
    return False


def varying_outputs(jaxpr: Any, in_varying: list[bool]) -> list[bool]:
    """For each output of ``jaxpr``, whether it may differ across replicas."""
    varying: dict[Any, bool] = {}
    for var, flag in zip(jaxpr.invars, in_varying):
        varying[var] = flag
    for var in jaxpr.constvars:
        varying[var] = False

    def is_varying(atom: Any) -> bool:
        if isinstance(atom, jcore.Literal):
            return False
        return varying.get(atom, False)

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        ins = [is_varying(a) for a in eqn.invars]
        if name in _INVARIANT_RESULT:
            outs = [False] * len(eqn.outvars)
        elif name in _VARYING_RESULT:
            outs = [True] * len(eqn.outvars)
        else:
            subs = _subjaxprs(eqn.params)
            if not subs:
                outs = [any(ins)] * len(eqn.outvars)
            elif name in _CALLS and len(subs[0].invars) == len(ins) and len(
                subs[0].outvars
            ) == len(eqn.outvars):
                outs = varying_outputs(subs[0], ins)
            else:
                flag = any(ins) or any(_contains_axis_index(s) for s in subs)
                outs = [flag] * len(eqn.outvars)
        for var, flag in zip(eqn.outvars, outs):
            varying[var] = flag
    return [is_varying(v) for v in jaxpr.outvars]
