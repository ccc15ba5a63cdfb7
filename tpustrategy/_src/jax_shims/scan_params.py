"""How a ``scan`` equation's operands divide into constants, carry and scanned inputs.

A traced ``lax.scan`` (``fori_loop`` with static bounds is one) is a jaxpr
equation whose operands are ``consts, carry, xs`` in that order, and whose body
maps them to ``carry, ys``. JAX stores the split in the equation's parameters,
and the parameters changed between releases:

- JAX 0.10: ``num_consts`` and ``num_carry`` (ints);
- JAX 0.11 and 0.12: ``ft_in``, a flat-tree tuple of three groups
  (consts, carry, xs) whose leaves are the operands.

Public alternative: none (jaxpr equation parameters are JAX's internal
vocabulary). ``check()`` traces a scan of a known layout with the installed JAX;
``tests/jax_shims`` calls it, so a third spelling fails loudly there.
"""

from __future__ import annotations

from typing import Any

from tpustrategy._src.jax_shims import supported


def layout(params: Any) -> tuple[int, int] | None:
    """``(num_consts, num_carry)`` from a ``scan`` equation's ``params``; None if unreadable."""
    consts, carry = params.get("num_consts"), params.get("num_carry")
    if isinstance(consts, int) and isinstance(carry, int):
        return consts, carry
    groups = params.get("ft_in")
    unpack = getattr(groups, "unpack", None)
    if unpack is None:
        return None
    try:
        sizes = [len(list(group)) for group in unpack()]
    except (TypeError, ValueError):
        return None
    if len(sizes) != 3:
        return None
    return sizes[0], sizes[1]


def check() -> None:
    """Raises ``RuntimeError`` when a traced scan's layout cannot be read with this JAX."""
    import jax
    import jax.numpy as jnp

    a, b = jnp.ones(3), jnp.full(3, 2.0)

    def body(carry: Any, x: Any) -> Any:
        u, v = carry
        return (u * a + b, v + x), u

    jaxpr = jax.make_jaxpr(lambda c, xs: jax.lax.scan(body, c, xs))((a, a), jnp.ones((4, 3)))
    eqns = [e for e in jaxpr.eqns if e.primitive.name == "scan"]
    found = layout(eqns[0].params) if len(eqns) == 1 else None
    total = len(eqns[0].invars) if len(eqns) == 1 else 0
    # Closed-over a and b are the constants (2), (u, v) the carry (2), xs the one scanned input.
    if found != (2, 2) or total != 5:
        raise RuntimeError(
            f"tpustrategy: the parameters of a traced lax.scan changed in JAX {jax.__version__} "
            f"(read layout {found} of {total} operands, expected (2, 2) of 5), so loops in steps "
            "lose their analysis.\n" + supported.FIX)
