"""A new primitive registered in JAX's rule tables: differentiation, batching, lowering.

A primitive of our own (``execution/evaluate``'s core-sharding tag) must be differentiable,
batchable and lowerable like JAX's. Its JVP, transpose and batching rules go into the tables
``jax.interpreters.ad`` / ``batching`` keep (``primitive_jvps``, ``primitive_transposes``,
``primitive_batchers``, ``ad.Zero`` for a symbolic zero tangent) and its lowering through
``mlir.register_lowering``: JAX's own vocabulary for custom primitives, which has moved between
releases. Public alternative: none for a primitive with a parameter (``jax.custom_jvp`` cannot
carry one through batching). ``tests/jax_shims/test_rule_tables.py`` fails when a table moves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jax.extend import core as jcore


def identity_primitive(name: str, param: str, batched: Callable[[Any, Any], Any]) -> Any:
    """A primitive that returns its operand and carries one parameter (``param``).

    Its JVP and transpose apply it to the tangent / cotangent too, its batching rule
    maps the parameter through ``batched(value, batch_dim)``, and it lowers to the
    identity; an evaluator that knows ``name`` gives it a meaning (``evaluate``).
    """
    from jax.interpreters import ad, batching, mlir

    prim = jcore.Primitive(name)
    prim.def_impl(lambda x, **params: x)
    prim.def_abstract_eval(lambda x, **params: x)

    def on(t: Any, value: Any) -> Any:
        return t if type(t) is ad.Zero else prim.bind(t, **{param: value})

    ad.primitive_jvps[prim] = lambda primals, tangents, **params: (
        prim.bind(primals[0], **params), on(tangents[0], params[param]))
    ad.primitive_transposes[prim] = lambda ct, x, **params: [
        None if type(ct) is ad.Zero else prim.bind(ct, **params)]
    batching.primitive_batchers[prim] = lambda args, dims, **params: (
        prim.bind(args[0], **{param: batched(params[param], dims[0])}), dims[0])
    mlir.register_lowering(prim, lambda ctx, x, **params: [x])  # outside our evaluator: identity
    return prim
