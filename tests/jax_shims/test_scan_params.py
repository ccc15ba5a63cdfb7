"""A traced scan's operands split into consts, carry and xs, read through one shim."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from tpustrategy._src.execution import jaxpr_tools
from tpustrategy._src.jax_shims import scan_params


def _scan_eqn(fn, *args):
    eqns = [e for e in jax.make_jaxpr(fn)(*args).eqns if e.primitive.name == "scan"]
    assert len(eqns) == 1
    return eqns[0]


def test_the_installed_jax_spells_a_scan_layout_the_shim_reads():
    scan_params.check()  # fails loudly when JAX changes the parameters again


def test_consts_carry_and_xs_are_counted_for_a_nested_carry():
    a = jnp.ones(3)

    def body(carry, x):
        (u, v), w = carry
        return ((u * a, v + x["p"]), w), (u + x["q"], w)

    eqn = _scan_eqn(lambda c, xs: jax.lax.scan(body, c, xs),
                    ((a, a), a), {"p": jnp.ones((5, 3)), "q": jnp.ones((5, 3))})
    consts, carry = scan_params.layout(eqn.params)
    # The scan's own operands are consts, carry, xs; JAX may move a loop-invariant carry
    # (w here) into the constants, so the split is checked against the operand count.
    assert consts + carry + 2 == len(eqn.invars)
    assert carry >= 2 and consts >= 1
    assert jaxpr_tools.scan_layout(eqn) == (consts, carry)


def test_a_fori_loop_with_static_bounds_is_a_scan_with_a_counter_in_its_carry():
    eqn = _scan_eqn(lambda c: jax.lax.fori_loop(0, 3, lambda i, c: c * 2.0, c), 1.0)
    consts, carry = scan_params.layout(eqn.params)
    assert (consts, carry) == (0, 2) and len(eqn.invars) == 2


def test_both_spellings_are_read():
    assert scan_params.layout({"num_consts": 1, "num_carry": 2}) == (1, 2)

    class Groups:  # JAX 0.11's flat tree: groups of leaves
        def unpack(self):
            return [(None,), (None, None, None), ()]

    assert scan_params.layout({"ft_in": Groups()}) == (1, 3)
    assert scan_params.layout({}) is None
    assert scan_params.layout({"num_consts": "1", "num_carry": 2}) is None


def test_an_unrolled_loop_gives_the_loops_results():
    def loop(c, xs):
        return jax.lax.scan(lambda c, x: (c * 2.0 + x, c), c, xs)

    xs = jnp.arange(4.0)
    eqn = _scan_eqn(loop, 1.0, xs)
    jaxpr, consts = jaxpr_tools.unrolled(eqn, axis_size=1)
    carry, ys = loop(1.0, xs)
    got = jax.core.eval_jaxpr(jaxpr, consts, 1.0, xs)
    assert float(got[0]) == float(carry) and list(map(float, got[1])) == list(map(float, ys))
