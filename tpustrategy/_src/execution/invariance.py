"""Which outputs of a replica function are provably equal on every replica.

A forward data-flow analysis over the traced jaxpr. Per-replica inputs vary
across replicas; broadcast inputs, literals and the results of ``psum`` /
``all_gather`` / ``pmax`` / ``pmin`` over the whole replica axis do not. A
primitive JAX documents as a pure function of its operands (everything defined
in JAX's ``lax``, random, autodiff, ``jit`` and custom-derivative modules,
found by scanning those modules — not a hand-kept list) varies when one of its
operands varies; every other primitive — ``axis_index``, the other
collectives, reductions within ``axis_index_groups``, callbacks, and any
primitive the rules do not know (a new JAX primitive, a library's own) — is
treated as varying. Nested jaxprs of calls are analysed recursively; control
flow whose body contains a varying source is varying. The analysis may say
"varying" for a value that is in fact equal everywhere (it then comes back as
``PerReplica``), never the reverse. The rules themselves (which primitive is
which) live in ``jaxpr_tools``.
"""

from __future__ import annotations

from typing import Any

from tpustrategy._src.execution import jaxpr_tools


def is_known(name: str) -> bool:
    """Whether the analysis has a deliberate rule for primitive ``name``.

    Unknown primitives are treated as varying too; this tells a deliberate
    rule from that fallback (the examples' and demo's primitives are all known).
    """
    return jaxpr_tools.is_known(name)


def _is_varying_source(eqn: Any) -> bool:
    return not jaxpr_tools.is_pure(eqn) and not jaxpr_tools.result_invariant(eqn)


def varying_outputs(jaxpr: Any, in_varying: list[bool]) -> list[bool]:
    """For each output of ``jaxpr``, whether it may differ across replicas.

    Args:
      jaxpr: the replica function's jaxpr.
      in_varying: per input, whether it differs across replicas.
    """
    return jaxpr_tools.interpret(jaxpr, [False] * len(jaxpr.constvars), list(in_varying), eqn_outputs_varying,
                                 constant=lambda value, aval: False)


def gathers_of_equal_values(jaxpr: Any, in_varying: list[bool]) -> list[Any]:
    """The top-level equations of ``jaxpr`` that all-gather, over the whole replica axis, a
    value provably equal on every replica (``varying_outputs``' rule for their operand).

    Their result is that value stacked once per replica, so the program can build it without
    communicating (``evaluate.eval_jaxpr``'s ``local_gathers``): the same bits, one collective
    less. The common case is a write of an ``ONLY_FIRST_REPLICA`` variable with a value every
    replica computes alike — Keras's ``optimizer.iterations.assign_add(1)`` every step.
    """
    found: list[Any] = []

    def emit(eqn: Any, ins: list[bool]) -> list[bool]:
        if ins and not ins[0] and jaxpr_tools.is_whole_axis_gather(eqn):
            found.append(eqn)
        return eqn_outputs_varying(eqn, ins)

    jaxpr_tools.interpret(jaxpr, [False] * len(jaxpr.constvars), list(in_varying), emit,
                          constant=lambda value, aval: False)
    return found


def eqn_outputs_varying(eqn: Any, ins: list[bool]) -> list[bool]:
    """The rule for one equation: which of its outputs vary, given which inputs do."""
    n = len(eqn.outvars)
    if jaxpr_tools.result_invariant(eqn):
        return [False] * n
    if not jaxpr_tools.is_pure(eqn):
        return [True] * n
    subs = jaxpr_tools.subjaxprs(eqn.params)
    if not subs:
        return [any(ins)] * n
    body = jaxpr_tools.called(eqn)
    if body is not None:
        return varying_outputs(body[0], ins)
    layout = jaxpr_tools.scan_layout(eqn)
    if layout is not None:
        return _scan_outputs_varying(subs[0], ins, *layout)
    return [any(ins) or any(jaxpr_tools.any_eqn(s, _is_varying_source) for s in subs)] * n


def _scan_outputs_varying(body: Any, ins: list[bool], num_consts: int, num_carry: int) -> list[bool]:
    """A scan's carry varies once any iteration makes it vary: iterate to the fixed point."""
    consts, carry, xs = ins[:num_consts], ins[num_consts:num_consts + num_carry], ins[num_consts + num_carry:]
    while True:
        outs = varying_outputs(body, consts + carry + xs)
        joined = [a or b for a, b in zip(carry, outs[:num_carry])]
        if joined == carry:
            return carry + outs[num_carry:]
        carry = joined
