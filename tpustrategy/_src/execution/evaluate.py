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

from collections.abc import Sequence
from typing import Any

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpustrategy._src.execution import jaxpr_tools
from tpustrategy._src.jax_shims import rule_tables

_CONSTRAINT = jaxpr_tools.CORE_SHARDING



def _batched_spec(spec: Any, dim: Any) -> Any:
    if dim is None:
        return spec
    parts = list(spec)
    parts.insert(dim, None)
    return P(*parts)


core_sharding_p = rule_tables.identity_primitive(_CONSTRAINT, "spec", _batched_spec)


def annotate(x: Any, spec: Any) -> Any:
    """Inside a replica trace: records that ``x`` is laid out over the replica's cores by ``spec``."""
    return core_sharding_p.bind(x, spec=spec)


def constrain(x: Any, spec: Any) -> Any:
    """A sharding constraint over the auto (core) axes of the ``shard_map`` being traced."""
    return jax.lax.with_sharding_constraint(x, NamedSharding(jax.sharding.get_abstract_mesh(), spec))


def bind(eqn: Any, values: list[Any], mesh: Any = None) -> list[Any]:
    """One equation, with core-sharding annotations re-applied on ``mesh``."""
    if eqn.primitive.name == _CONSTRAINT:
        return [constrain(values[0], eqn.params["spec"]) if mesh is not None else values[0]]
    if mesh is not None and eqn.primitive.name in jaxpr_tools.PLAIN_CALLS:
        # A jit's trace-time mesh context is not the program's: evaluate its body here.
        body = jaxpr_tools.called(eqn)
        if body is not None:
            return eval_jaxpr(body[0], body[1], *values, mesh=mesh)
    # Inside a program with cores, the equation's trace-time context names no mesh;
    # the shard_map's own mesh context must stay in force.
    return jaxpr_tools.bind(eqn, values, keep_context=mesh is None)


def eval_jaxpr(jaxpr: Any, consts: Any, *args: Any, mesh: Any = None, local_gathers: Sequence[Any] = ()) -> list[Any]:
    """``jax.core.eval_jaxpr``, re-applying core-sharding annotations on ``mesh``.

    ``local_gathers``: top-level ``all_gather`` equations whose operand is equal on every
    replica (``invariance.gathers_of_equal_values``); each becomes its operand stacked
    ``axis_size`` times, built on the device without a collective.
    """
    if mesh is None and not local_gathers:
        return jax.core.eval_jaxpr(jaxpr, consts, *args)
    local = {id(eqn) for eqn in local_gathers}

    def emit(eqn: Any, values: list[Any]) -> list[Any]:
        if id(eqn) in local:
            return [stacked(values[0], eqn)]
        return bind(eqn, values, mesh)

    return jaxpr_tools.interpret(jaxpr, list(consts), list(args), emit)


def stacked(x: Any, gather: Any) -> Any:
    """What an untiled whole-axis ``all_gather`` of ``x`` gives when every replica holds ``x``."""
    shape = gather.outvars[0].aval.shape
    dim = gather.params["all_gather_dimension"]
    return jax.lax.broadcast_in_dim(x, shape, [d for d in range(len(shape)) if d != dim])
