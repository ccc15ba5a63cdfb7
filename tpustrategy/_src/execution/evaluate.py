"""Evaluating a replica function's jaxpr inside the program's ``shard_map``.

Mostly ``jax.core.eval_jaxpr``. The exception is a sharding annotation over a
replica's cores (``experimental_split_to_logical_devices``). The replica
function is traced outside any ``shard_map``, where a real sharding constraint
would put the mesh (every axis automatic) into the traced types; so the trace
records the annotation as ``core_sharding_p``, an identity primitive carrying
the ``PartitionSpec``, and this evaluator turns it into
``jax.lax.with_sharding_constraint`` on the program's own abstract mesh
(replica axis manual, core axis automatic). Calls that contain such
annotations are evaluated inline for the same reason.
"""

from __future__ import annotations

from typing import Any

import jax
from jax.extend import core as jcore
from jax.sharding import NamedSharding

from tpustrategy._src.execution import invariance

_CONSTRAINT = "tps_core_sharding"

core_sharding_p = jcore.Primitive(_CONSTRAINT)
core_sharding_p.def_impl(lambda x, *, spec: x)
core_sharding_p.def_abstract_eval(lambda x, *, spec: x)


def _register_rules() -> None:
    from jax.interpreters import ad, batching, mlir

    ad.primitive_jvps[core_sharding_p] = lambda primals, tangents, *, spec: (
        core_sharding_p.bind(primals[0], spec=spec), _tangent(tangents[0], spec))
    ad.primitive_transposes[core_sharding_p] = lambda ct, x, *, spec: [
        None if type(ct) is ad.Zero else core_sharding_p.bind(ct, spec=spec)]
    batching.primitive_batchers[core_sharding_p] = lambda args, dims, *, spec: (
        core_sharding_p.bind(args[0], spec=_batched_spec(spec, dims[0])), dims[0])
    mlir.register_lowering(core_sharding_p, lambda ctx, x, *, spec: [x])  # outside our evaluator: identity


def _tangent(t: Any, spec: Any) -> Any:
    from jax.interpreters import ad

    return t if type(t) is ad.Zero else core_sharding_p.bind(t, spec=spec)


def _batched_spec(spec: Any, dim: Any) -> Any:
    from jax.sharding import PartitionSpec as P

    if dim is None:
        return spec
    parts = list(spec)
    parts.insert(dim, None)
    return P(*parts)


_register_rules()


def annotate(x: Any, spec: Any) -> Any:
    """Inside a replica trace: records that ``x`` is laid out over the replica's cores by ``spec``."""
    return core_sharding_p.bind(x, spec=spec)
_CALLS = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr"}


def constrain(x: Any, spec: Any) -> Any:
    """A sharding constraint over the auto (core) axes of the ``shard_map`` being traced."""
    return jax.lax.with_sharding_constraint(x, NamedSharding(jax.sharding.get_abstract_mesh(), spec))


def _has_constraint(jaxpr: Any) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == _CONSTRAINT:
            return True
        if any(_has_constraint(sub) for sub in invariance.subjaxprs(eqn.params)):
            return True
    return False


def needs_mesh(jaxpr: Any) -> bool:
    """Whether the jaxpr holds core-sharding annotations (evaluate it with ``eval_jaxpr`` here)."""
    return _has_constraint(jaxpr)


def bind(eqn: Any, values: list[Any], mesh: Any = None) -> list[Any]:
    """One equation, with core-sharding annotations re-applied on ``mesh``."""
    name = eqn.primitive.name
    if name == _CONSTRAINT:
        return [constrain(values[0], eqn.params["spec"]) if mesh is not None else values[0]]
    if mesh is not None and name in _CALLS:
        inner = eqn.params.get(_CALLS[name])
        if isinstance(inner, jcore.ClosedJaxpr):
            return eval_jaxpr(inner.jaxpr, inner.consts, *values, mesh=mesh)
    params = eqn.primitive.get_bind_params(eqn.params)
    if mesh is not None:
        # The equation's trace-time context names no mesh; inside the program the
        # shard_map's own mesh context must stay in force.
        ans = eqn.primitive.bind(*values, **params)
    else:
        with eqn.ctx.manager:
            ans = eqn.primitive.bind(*values, **params)
    return list(ans) if eqn.primitive.multiple_results else [ans]


def eval_jaxpr(jaxpr: Any, consts: Any, *args: Any, mesh: Any = None) -> list[Any]:
    """``jax.core.eval_jaxpr``, re-applying core-sharding annotations on ``mesh``."""
    if mesh is None:
        return jax.core.eval_jaxpr(jaxpr, consts, *args)
    env: dict[Any, Any] = {}

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, jcore.Literal) else env[atom]

    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        env.update(zip(eqn.outvars, bind(eqn, [read(a) for a in eqn.invars], mesh)))
    return [read(v) for v in jaxpr.outvars]
