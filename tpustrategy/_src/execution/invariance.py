"""Which outputs of a replica function are provably equal on every replica.

A forward data-flow analysis over the traced jaxpr. Per-replica inputs vary
across replicas; broadcast inputs, literals and the results of ``psum`` /
``all_gather`` / ``pmax`` / ``pmin`` do not. A primitive JAX documents as a
pure function of its operands (everything defined in JAX's ``lax``, random,
autodiff, ``jit`` and custom-derivative modules, found by scanning those
modules — not a hand-kept list) varies when one of its operands varies; every
other primitive — ``axis_index``, the other collectives, callbacks, and any
primitive this module does not know (a new JAX primitive, a library's own) —
is treated as varying. Nested jaxprs of calls are analysed recursively;
control flow whose body contains a varying source is varying. The analysis
may say "varying" for a value that is in fact equal everywhere (it then comes
back as ``PerReplica``), never the reverse.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from jax.extend import core as jcore

INVARIANT_RESULT = frozenset({"psum", "pmax", "pmin", "all_gather", "psum_invariant", "all_gather_invariant"})
# Modules whose primitives are pure functions of their operands.
_PURE_MODULES = (
    "jax._src.lax.lax", "jax._src.lax.slicing", "jax._src.lax.control_flow.loops",
    "jax._src.lax.control_flow.conditionals", "jax._src.lax.control_flow.solves",
    "jax._src.lax.convolution", "jax._src.lax.linalg", "jax._src.lax.fft", "jax._src.lax.special",
    "jax._src.lax.windowed_reductions", "jax._src.lax.ann", "jax._src.random.prng",
    "jax._src.random.threefry2x32", "jax._src.ad_util", "jax._src.pjit",
    "jax._src.custom_derivatives", "jax._src.ad_checkpoint", "jax._src.interpreters.ad",
    "jax._src.dispatch", "jax._src.state.primitives", "jax._src.debugging", "jax._src.core",
)
# Names inside those modules that are not pure in the replica sense.
_NOT_PURE = frozenset({"io_callback", "pure_callback", "debug_callback", "rng_uniform"})


@functools.cache
def pure_primitives() -> frozenset[str]:
    """Names of the primitives known to be pure functions of their operands."""
    names: set[str] = set()
    for module_name in _PURE_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a module JAX moved: its primitives count as unknown (varying)
            continue
        names.update(v.name for v in vars(module).values() if isinstance(v, jcore.Primitive))
    names.add("tps_core_sharding")  # execution.evaluate's layout annotation (an identity)
    return frozenset(names - _NOT_PURE)


@functools.cache
def varying_sources() -> frozenset[str]:
    """Primitives known to make values that differ per replica: the other collectives,
    ``axis_index``, callbacks."""
    names = set(_NOT_PURE)
    try:
        module = importlib.import_module("jax._src.lax.parallel")
        names.update(v.name for v in vars(module).values() if isinstance(v, jcore.Primitive))
    except ImportError:
        pass
    return frozenset(names - INVARIANT_RESULT)


def is_known(name: str) -> bool:
    """Whether the analysis has a deliberate rule for primitive ``name``.

    Unknown primitives are treated as varying too; this tells a deliberate
    rule from that fallback (the examples' and demo's primitives are all known).
    """
    return name in INVARIANT_RESULT or name in pure_primitives() or name in varying_sources()


def subjaxprs(params: dict[str, Any]) -> list[Any]:
    found = []
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jcore.ClosedJaxpr):
                found.append(item.jaxpr)
            elif isinstance(item, jcore.Jaxpr):
                found.append(item)
    return found


def _has_varying_source(jaxpr: Any) -> bool:
    pure = pure_primitives()
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name not in pure and name not in INVARIANT_RESULT:
            return True
        if any(_has_varying_source(sub) for sub in subjaxprs(eqn.params)):
            return True
    return False


def varying_outputs(jaxpr: Any, in_varying: list[bool], eqn_varying: Any = None) -> list[bool]:
    """For each output of ``jaxpr``, whether it may differ across replicas.

    Args:
      jaxpr: the replica function's jaxpr.
      in_varying: per input, whether it differs across replicas.
      eqn_varying: optional predicate on a top-level equation index: True when
        that equation itself differs between replicas (the ragged path, where
        shapes and constants differ between the replicas' programs).
    """
    varying: dict[Any, bool] = dict(zip(jaxpr.invars, in_varying))

    def is_varying(atom: Any) -> bool:
        if isinstance(atom, jcore.Literal):
            return False
        return varying.get(atom, False)

    for index, eqn in enumerate(jaxpr.eqns):
        outs = eqn_outputs_varying(eqn, [is_varying(a) for a in eqn.invars])
        if eqn_varying is not None and eqn_varying(index):
            outs = [True] * len(eqn.outvars)
        for var, flag in zip(eqn.outvars, outs):
            varying[var] = flag
    return [is_varying(v) for v in jaxpr.outvars]


def eqn_outputs_varying(eqn: Any, ins: list[bool]) -> list[bool]:
    """The rule for one equation: which of its outputs vary, given which inputs do."""
    name = eqn.primitive.name
    n = len(eqn.outvars)
    if name in INVARIANT_RESULT:
        return [False] * n
    if name not in pure_primitives():
        return [True] * n
    subs = subjaxprs(eqn.params)
    if not subs:
        return [any(ins)] * n
    if len(subs) == 1 and len(subs[0].invars) == len(ins) and len(subs[0].outvars) == n:
        return varying_outputs(subs[0], ins)
    return [any(ins) or any(_has_varying_source(s) for s in subs)] * n


def primitives_in(jaxpr: Any) -> set[str]:
    """Every primitive name used in ``jaxpr`` and its nested jaxprs."""
    names = set()
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for sub in subjaxprs(eqn.params):
            names |= primitives_in(sub)
    return names
