"""Everything the execution core knows about JAX's jaxprs, in one module.

The back ends read the replica function's jaxpr to decide how to compile it:
which equations are *collectives* (cross-replica communication the ragged
back end cuts the program at), which outputs are equal on every replica
(``invariance``), which equations are *calls* whose body can be inlined, and
where in the user's source an equation came from. That knowledge depends on
JAX's internals (primitive names, parameter names, private modules), so it is
kept here, next to the one recursive walker over nested jaxprs; the test
``tests/execution/test_jaxpr_tools.py`` fails loudly when a JAX module or name
this module relies on moves.

- A **collective** is any equation whose parameters name the replica axis:
  ``psum``, ``pmax``, ``all_gather``, ``ppermute``, ``all_to_all``,
  ``reduce_scatter``, ``axis_index``, the async ``*_start`` / ``*_done`` pairs,
  and any primitive JAX adds later with an axis parameter — no hand-kept list —
  plus every primitive of JAX's collectives module (a ``*_done`` names no axis).
- A **call** is an equation in ``CALLS``: its body is a jaxpr taking the
  equation's operands and giving its results (``jit``, ``custom_jvp_call``,
  ``custom_vjp_call``, ``checkpoint``, ...).
- The **invariance rules**: results of ``psum`` / ``pmax`` / ``pmin`` /
  ``all_gather`` over the whole replica axis are equal everywhere (not with
  ``axis_index_groups``, which reduce within groups only); primitives of JAX's
  pure modules vary when an operand varies; every other primitive varies.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from jax.extend import core as jcore

from tpustrategy._src.jax_shims import primitives, scan_params, source_info
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS

# Call primitives: name -> the parameter holding the body (operands map to its inputs).
CALLS: dict[str, str] = {
    "jit": "jaxpr", "pjit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
    "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
    "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr",
}
# The calls that only call (no derivative rule or rematerialisation attached).
PLAIN_CALLS = frozenset({"jit", "pjit", "closed_call", "core_call"})

# Collectives whose result is the same on every replica (over the whole axis).
INVARIANT_RESULT = frozenset({"psum", "pmax", "pmin", "all_gather", "psum_invariant", "all_gather_invariant"})
# Names inside JAX's pure modules (``jax_shims.primitives``) that are not pure in the replica sense.
_NOT_PURE = frozenset({"io_callback", "pure_callback", "debug_callback", "rng_uniform"})
# The execution core's own layout annotation (``evaluate.core_sharding_p``), an identity.
CORE_SHARDING = "tps_core_sharding"

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


# Walking ----------------------------------------------------------------------------------------
def subjaxprs(params: dict[str, Any]) -> list[Any]:
    """The jaxprs nested in an equation's parameters (bodies of calls, loops, branches)."""
    found = []
    for value in params.values():
        for item in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(item, jcore.ClosedJaxpr):
                found.append(item.jaxpr)
            elif isinstance(item, jcore.Jaxpr):
                found.append(item)
    return found


def walk(jaxpr: Any) -> Iterator[Any]:
    """Every equation of ``jaxpr`` and of the jaxprs nested in it, outer equation first."""
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in subjaxprs(eqn.params):
            yield from walk(sub)


def any_eqn(jaxpr: Any, predicate: Callable[[Any], bool]) -> bool:
    """Whether any equation of ``jaxpr``, at any depth, satisfies ``predicate``."""
    return any(predicate(eqn) for eqn in walk(jaxpr))


def interpret(jaxpr: Any, consts: list[Any], args: list[Any], emit: Callable[[Any, list[Any]], list[Any]], *,
              inline: Callable[[Any], bool] = lambda eqn: False,
              constant: Callable[[Any, Any], Any] = lambda value, aval: value,
              expand: Callable[[Any], tuple[Any, list[Any]] | None] | None = None) -> list[Any]:
    """Runs ``jaxpr`` over any kind of value: the one interpreter of the execution core.

    Args:
      jaxpr: the (open) jaxpr.
      consts: one value per constvar; ``args``: one per invar.
      emit: ``emit(eqn, operand_values) -> result_values`` for every equation not inlined.
      inline: calls (``CALLS``) for which it is true have their body interpreted in place.
      constant: turns a literal or an inlined body's constant, with its aval, into a value.
      expand: for an equation ``inline`` accepts, its ``(body, consts)`` (default: ``called``;
        e.g. ``unrolled`` to interpret a loop's iterations in place).

    Returns:
      The values of the jaxpr's outputs.
    """
    env: dict[Any, Any] = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))

    def read(atom: Any) -> Any:
        return constant(atom.val, atom.aval) if is_literal(atom) else env[atom]

    for eqn in jaxpr.eqns:
        values = [read(a) for a in eqn.invars]
        body = (expand or called)(eqn) if inline(eqn) else None
        if body is not None:
            inner, inner_consts = body
            outs = interpret(inner, [constant(c, v.aval) for c, v in zip(inner_consts, inner.constvars)],
                             values, emit, inline=inline, constant=constant, expand=expand)
        else:
            outs = emit(eqn, values)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def primitives_in(jaxpr: Any) -> set[str]:
    """Every primitive name used in ``jaxpr`` and its nested jaxprs."""
    return {eqn.primitive.name for eqn in walk(jaxpr)}


def called(eqn: Any) -> tuple[Any, list[Any]] | None:
    """``(body, consts)`` of a call equation whose body takes its operands, else None."""
    param = CALLS.get(eqn.primitive.name)
    inner = eqn.params.get(param) if param else None
    if inner is None:
        return None
    body = inner.jaxpr if isinstance(inner, jcore.ClosedJaxpr) else inner
    consts = list(inner.consts) if isinstance(inner, jcore.ClosedJaxpr) else []
    if not isinstance(body, jcore.Jaxpr) or len(body.invars) != len(eqn.invars) \
            or len(body.outvars) != len(eqn.outvars):
        return None
    return body, consts


def scan_layout(eqn: Any) -> tuple[int, int] | None:
    """``(num_consts, num_carry)`` of a ``scan`` (body: consts, carry, xs -> carry, ys), else None."""
    if eqn.primitive.name != "scan":
        return None
    subs = subjaxprs(eqn.params)
    layout = scan_params.layout(eqn.params)
    if len(subs) != 1 or layout is None \
            or len(subs[0].invars) != len(eqn.invars) or len(subs[0].outvars) != len(eqn.outvars):
        return None
    return layout


def unrolled(eqn: Any, axis_size: int, max_length: int = 64) -> tuple[Any, list[Any]] | None:
    """A ``scan`` of at most ``max_length`` iterations as one jaxpr with every iteration in place.

    ``fori_loop`` with static bounds is such a scan. Unrolled, a collective in its
    body becomes one collective per iteration at the top level. None for any
    other equation, or a longer scan.
    """
    layout = scan_layout(eqn)
    length = eqn.params.get("length")
    if layout is None or not isinstance(length, int) or not 0 < length <= max_length:
        return None
    num_consts, num_carry = layout
    body = eqn.params["jaxpr"]
    order = range(length - 1, -1, -1) if eqn.params.get("reverse") else range(length)

    def run(*args: Any) -> list[Any]:
        import jax
        import jax.numpy as jnp

        consts, carry = list(args[:num_consts]), list(args[num_consts:num_consts + num_carry])
        xs = args[num_consts + num_carry:]
        ys: dict[int, list[Any]] = {}
        for i in order:
            out = jax.core.eval_jaxpr(body.jaxpr, body.consts, *consts, *carry, *(x[i] for x in xs))
            carry, ys[i] = list(out[:num_carry]), list(out[num_carry:])
        stacked = [jnp.stack([ys[i][k] for i in range(length)]) for k in range(len(ys[0]))]
        return carry + stacked

    import jax

    avals = [jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype, weak_type=getattr(v.aval, "weak_type", False))
             for v in eqn.invars]
    closed = jax.make_jaxpr(run, axis_env=[(REPLICA_AXIS, axis_size)])(*avals)
    return closed.jaxpr, list(closed.consts)


# Collectives ------------------------------------------------------------------------------------
def _names(value: Any, axis: str) -> bool:
    if isinstance(value, str):
        return value == axis
    if type(value) in (tuple, list, frozenset, set):
        return any(_names(v, axis) for v in value)
    return False


def parallel_primitives() -> frozenset[str]:
    """Names of the primitives JAX's collectives module defines (``*_done`` ones name no axis;
    empty if JAX moved the module -- its shim's test says so -- and the parameter rule still
    finds most collectives)."""
    return primitives.parallel()


def is_collective(eqn: Any, axis: str = REPLICA_AXIS) -> bool:
    """Whether the equation itself communicates over (or reads its position on) ``axis``.

    Any equation whose parameters name the axis, and every primitive of JAX's
    collectives module (the ``*_done`` half of an async pair only takes the
    ``*_start`` half's future).
    """
    # ``name`` is a call's function name (a function may be called ``replica``).
    return eqn.primitive.name in parallel_primitives() or any(
        _names(v, axis) for k, v in eqn.params.items() if k != "name")


def contains_collective(eqn: Any, axis: str = REPLICA_AXIS) -> bool:
    """Whether the equation is a collective or has one in a nested jaxpr."""
    return is_collective(eqn, axis) or any(
        any_eqn(sub, lambda e: is_collective(e, axis)) for sub in subjaxprs(eqn.params))


# Invariance rules -------------------------------------------------------------------------------
@functools.cache
def pure_primitives() -> frozenset[str]:
    """Names of the primitives known to be pure functions of their operands."""
    # A module JAX moved gives none: its primitives count as unknown (varying).
    return frozenset((primitives.pure() | {CORE_SHARDING}) - _NOT_PURE)


@functools.cache
def varying_sources() -> frozenset[str]:
    """Primitives known to make values that differ per replica: collectives, ``axis_index``, callbacks."""
    return frozenset((_NOT_PURE | parallel_primitives()) - INVARIANT_RESULT)


def is_known(name: str) -> bool:
    """Whether the invariance rules have a deliberate rule for primitive ``name``."""
    return name in INVARIANT_RESULT or name in pure_primitives() or name in varying_sources()


def result_invariant(eqn: Any) -> bool:
    """Whether the equation's results are equal on every replica whatever its operands.

    True for a reduction or gather over the whole replica axis; one with
    ``axis_index_groups`` combines only within each group, so groups differ.
    """
    return eqn.primitive.name in INVARIANT_RESULT and eqn.params.get("axis_index_groups") is None


def is_whole_axis_gather(eqn: Any, axis: str = REPLICA_AXIS) -> bool:
    """Whether the equation is an untiled ``all_gather`` over ``axis`` alone, every replica in one
    group: its result stacks each replica's operand along ``all_gather_dimension``."""
    if eqn.primitive.name != "all_gather" or eqn.params.get("axis_index_groups") is not None:
        return False
    names = eqn.params.get("axis_name")
    return (names == (axis,) or names == axis) and not eqn.params.get("tiled", False)


def is_pure(eqn: Any) -> bool:
    """Whether the equation is a pure function of its operands (varies only when they do)."""
    return eqn.primitive.name in pure_primitives()


# Values and equations ---------------------------------------------------------------------------
def is_literal(atom: Any) -> bool:
    return isinstance(atom, jcore.Literal)


def bind(eqn: Any, values: list[Any], *, keep_context: bool = True) -> list[Any]:
    """Applies one equation's primitive to ``values``; a list of its results.

    Args:
      eqn: the equation.
      values: one value per operand.
      keep_context: evaluate under the equation's trace-time context (its mesh
        and name stack); False inside a program whose own mesh context must stay.
    """
    params = eqn.primitive.get_bind_params(eqn.params)
    if keep_context:
        with eqn.ctx.manager:
            ans = eqn.primitive.bind(*values, **params)
    else:
        ans = eqn.primitive.bind(*values, **params)
    return list(ans) if eqn.primitive.multiple_results else [ans]


def param_key(value: Any) -> Any:
    """A hashable key of an equation parameter: equal keys mean the same forward computation.

    Nested jaxprs compare by their printed form (variables are renamed
    canonically) and their constants; functions (derivative rules, thunks)
    do not change the forward value and are left out.
    """
    if isinstance(value, jcore.ClosedJaxpr):
        return ("closed", str(value.jaxpr), tuple(value_key(c) for c in value.consts))
    if isinstance(value, jcore.Jaxpr):
        return ("jaxpr", str(value))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((str(k), param_key(v)) for k, v in value.items())))
    if type(value) in (tuple, list):
        return (type(value).__name__, tuple(param_key(v) for v in value))
    if isinstance(value, np.ndarray):
        return value_key(value)
    # Functions and JAX's wrapped functions (``linear_util.WrappedFun``: custom rules, thunks).
    if (callable(value) or hasattr(value, "call_wrapped")) and not isinstance(value, type) \
            and not hasattr(value, "dtype"):
        return ("fn",)
    try:
        hash(value)
        return value
    except TypeError:
        return ("repr", type(value).__name__, repr(value))


def params_key(eqn: Any) -> Any:
    """``param_key`` of all of an equation's parameters."""
    return tuple(sorted((k, param_key(v)) for k, v in eqn.params.items()))


def value_key(value: Any) -> tuple[Any, ...]:
    """A hashable key of a constant: equal keys mean equal dtype, shape and contents."""
    try:
        array = np.asarray(value)
        return ("value", str(array.dtype), array.shape, array.tobytes())
    except Exception:  # a constant NumPy cannot read: only equal to itself
        return ("object", id(value))


def aval_key(aval: Any) -> tuple[Any, ...]:
    """Shape and dtype of an abstract value (any other kind, e.g. an async future: its text)."""
    if hasattr(aval, "shape") and hasattr(aval, "dtype"):
        return (tuple(aval.shape), str(aval.dtype))
    return ("other", str(aval))


def aval_text(aval: Any) -> str:
    """``f32[2,3]``."""
    short = getattr(aval, "str_short", None)
    return short(short_dtypes=True) if callable(short) else str(aval)


def source_line(eqn: Any) -> str:
    """Where the user's code made the equation: ``file:line (function)``, or ``unknown``.

    The innermost frame outside JAX, the standard library and this package.
    """
    for frame in source_info.user_frames(eqn):
        if not frame.file_name.startswith(_PACKAGE_DIR):
            return f"{frame.file_name}:{frame.start_line} ({frame.function_name})"
    return "unknown"


def operation(eqn: Any) -> str:
    """What an equation does, for a message: `` `psum` of f32[3]``."""
    operands = ", ".join(aval_text(a.aval) for a in eqn.invars) or "no operands"
    return f"`{eqn.primitive.name}` of {operands}"


def describe(eqn: Any) -> str:
    """One equation for a message: `` `psum` of f32[3] at file.py:12 (step)``."""
    return f"{operation(eqn)} at {source_line(eqn)}"
