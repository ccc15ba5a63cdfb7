"""A cached program's whole call, generated as straight-line code for the fast path's hits.

A loop calls one program with arguments of one structure every step and gets results of one
structure back. Walking those structures generically (a loop over the inputs, the variables,
the result plan) costs several times what checking or building that one structure costs, so a
program's call is turned once into straight-line Python (generated, as ``namedtuple`` and
``dataclasses`` generate theirs): the inputs' shardings checked by identity, the variables'
values, the dispatch (donating the written variables' old values, or copies of the ones
something else holds), the bound on programs in flight, the written values and the results as the program's
``results.ResultPlan`` renders them. The call's guard is ``leaves.compile_guard``'s.

The variables' values are one list (``variables.store.Store``, ``_store_call``): one flag
checks them all, the list is the program's arguments as it is, the new values go back with
one slice assignment — no Python per variable. Variables that keep their value elsewhere
(Keras's) are read, checked and written one by one (``_variables_call``; C-level passes over
a list with more than six).
"""

from __future__ import annotations

import collections
import operator
import sys
from collections.abc import Callable
from typing import Any

from tpustrategy._src.execution import dispatch
from tpustrategy._src.execution.leaves import Writer
from tpustrategy._src.execution.results import ResultPlan
from tpustrategy._src.jax_shims.array_protocol import SHARDING_ATTRIBUTE
from tpustrategy._src.variables import frames


def compile_call(*, jitted: Any, num_inputs: int, seen: list[Any], variables: list[Any],
                 donating: tuple[Any, tuple[int, ...]] | None = None, held: Any = None, token: int,
                 store: Any = None,
                 written: list[tuple[Any, int]], plan: ResultPlan, specs: list[Any],
                 general: Callable[[list[Any]], Any],
                 finish: Callable[[Any], Any]) -> Callable[[list[Any]], Any] | None:
    """``call(arrays)``: one program's call, as ``Program.__call__`` makes it, in straight-line
    code for the common case; only for callers outside every variable frame (the fast path's
    hits: ``strategy.run`` and ``tps.function`` outside any trace).

    The common case: every dynamic input and variable value is a concrete array already where
    the program takes it (its sharding is the one ``seen`` holds), so the call is the dispatch,
    the bound on programs in flight (``dispatch.tracker``), the written variables' new values
    (``frames.value_writer``; ``outs[token]`` stands for the program there) and the results (as
    ``plan`` renders them, the Mirrored results' leaf ``specs`` known). Anything else goes to ``general``
    before the dispatch (an input to place, a tracer) or to ``finish`` after it (traced outputs:
    the call is inside a user's ``jax.jit``). Returns None for a structure it does not generate::

        def call(arrays):
            a1, = arrays
            v1 = read(k8)
            if type(a1) is not _ArrayImpl or a1._sharding is not seen[0] or ...: return general(arrays)
            outs = jitted(a1, v1)
            o = outs[0]
            if type(o) is not _ArrayImpl: return finish(outs)
            pending_append(o)
            if len(pending) > limit: settle()
            k9(outs[1])
            return _mirrored_parts(8, None, outs[0], None, (k10, outs[0]))
    """
    w = Writer()
    body = plan.expression(w, specs)
    if body is None or not written and plan.num_dynamic == 0:  # no outputs: nothing to track
        return None
    pending, limit, settle = dispatch.tracker()
    w.consts.update(jitted=jitted, held=held if held is not None else jitted, seen=seen,
                    general=general, finish=finish, read=frames.value_reader(),
                    pending=pending, pending_append=pending.append, limit=limit, settle=settle,
                    refs=sys.getrefcount,
                    _shard=operator.attrgetter(SHARDING_ATTRIBUTE))
    inputs = [f"a{i + 1}" for i in range(num_inputs)]
    lines = []
    if num_inputs:
        lines.append(f"    {''.join(a + ', ' for a in inputs)}= arrays")
    checks = [f"type({x}) is not _ArrayImpl or {x}.{SHARDING_ATTRIBUTE} is not seen[{i}]"
              for i, x in enumerate(inputs)]
    if store is not None:
        lines += _store_call(w, store, inputs, checks, variables, donating, written)
    else:
        lines += _variables_call(w, inputs, checks, variables, donating)
    lines += [f"    o = outs[{int(token)}]",
              "    if type(o) is not _ArrayImpl: return finish(outs)",
              "    pending_append(o)",
              "    if len(pending) > limit: settle()"]
    if store is not None:
        lines += _store_write_back(w, store, written)
    elif len(written) > BATCH_VARIABLES and [i for _, i in written] == list(range(written[0][1], written[0][1] + len(written))):
        first = written[0][1]  # one loop over the written variables (no Python call per variable)
        targets = w.const(tuple(v for v, _ in written))
        lines.append(f"    for var, value in zip({targets}, outs[{first}:{first + len(written)}]): "
                     f"var.{frames.VALUE_SLOT} = value")
    else:
        lines += [f"    {w.const(frames.value_writer(var))}(outs[{i}])" for var, i in written]
    lines.append(f"    return {body}")
    return w.define("def call(arrays):\n" + "\n".join(lines) + "\n", "call")  # type: ignore[no-any-return]


def _variables_call(w: Writer, inputs: list[str], checks: list[str], variables: list[Any],
                    donating: tuple[Any, tuple[int, ...]] | None) -> list[str]:
    """The lines up to the dispatch when each variable's value is read, checked and written on
    its own: the values read, every input checked, the dispatch."""
    num_inputs = len(inputs)
    batched = len(variables) > BATCH_VARIABLES
    lines, values = _read_variables(w, variables, batched)
    if not batched:
        checks = checks + [f"type({x}) is not _ArrayImpl or {x}.{SHARDING_ATTRIBUTE} is not seen[{num_inputs + j}]"
                           for j, x in enumerate(values)]
    # The general call counts references to decide what to donate: the values read here are let
    # go before it.
    drop = f"del {', '.join(values)}; " if not batched and values else "del vals; " if batched else ""
    if checks:
        lines += [f"    if {' or '.join(checks)}:", f"        {drop}return general(arrays)"]
    if batched:  # the values' shardings against the seen ones in one C-level list comparison
        # (identity first, as lists compare their items; a tracer has no sharding)
        lines += ["    try:",
                  f"        if list(map(_shard, vals)) != seen[{num_inputs}:]:",
                  f"            {drop}return general(arrays)",
                  "    except AttributeError:",
                  f"        {drop}return general(arrays)"]
    call_args = ", ".join(inputs + (["*vals"] if batched else values))
    if donating is not None:
        # A written variable's old value is donated when only its variable holds it (a value the
        # user kept from an earlier read, or a checkpoint still copying it, sends this call to
        # ``held``: the donating executable on copies, or the non-donating one). How many
        # references that is depends on the interpreter: counted once on stand-ins read by the
        # very same lines (``_sole_count``).
        picked = [values[i - num_inputs] if not batched else f"vals[{i - num_inputs}]" for i in donating[1]]
        pick = f"    d = [{', '.join(picked)}]"
        w.consts.update(donating=donating[0], sole=_sole_count(batched, pick, len(variables)).__eq__)
        return lines + [pick,
                        f"    if all(map(sole, map(refs, d))): outs = donating({call_args})",
                        f"    else: outs = held({call_args})",
                        "    del d"]
    return lines + [f"    outs = jitted({call_args})"]


def _store_call(w: Writer, store: Any, inputs: list[str], checks: list[str], variables: list[Any],
                donating: tuple[Any, tuple[int, ...]] | None, written: list[tuple[Any, int]]) -> list[str]:
    """The lines up to the dispatch when the variables' values are one list (``store.values``,
    the written variables first, in the order the program returns them): one flag says every
    value is one the program takes as it is, the list is passed as it is (or gathered in the
    program's order in one C call), the written variables' old values donated when only the
    list holds them."""
    num_inputs = len(inputs)
    position = {id(v): i for i, v in enumerate(store.variables)}
    order = [position[id(v)] for v in variables]
    w.consts.update(store=store, vals=store.values, tick=store.tick)
    lines = ["    if not store.ok: return general(arrays)", "    tick()"]
    if checks:
        lines.append(f"    if {' or '.join(checks)}: return general(arrays)")
    if order == list(range(len(order))):
        call_args = ", ".join(inputs + ["*vals"])
    else:
        gather = w.const(operator.itemgetter(*order))
        call_args = ", ".join(inputs + [f"*{gather}(vals)"])
    if donating is None:
        return lines + [f"    outs = jitted({call_args})"]
    donated = sorted(order[i - num_inputs] for i in donating[1])
    if donated == list(range(len(store.variables))):
        pick = "vals"
    elif donated == list(range(len(donated))):
        pick = f"vals[:{len(donated)}]"
    else:
        pick = "(" + "".join(f"vals[{i}], " for i in donated) + ")"
    w.consts.update(donating=donating[0], sole=_sole_count_of(pick, len(store.variables)).__eq__)
    # Every value handed out of the list since the last call was read through its variable
    # (``store.exported``): only then are references counted.
    return lines + ["    if store.exported:",
                    "        store.exported = False",
                    f"        if all(map(sole, map(refs, {pick}))): outs = donating({call_args})",
                    f"        else: outs = held({call_args})",
                    f"    else: outs = donating({call_args})"]


# More variables than this are read, checked and written in C-level passes over a list (a
# Python line per variable costs less for a few; a pass costs less per variable for many).
BATCH_VARIABLES = 6


def _read_variables(w: Writer, variables: list[Any], batched: bool) -> tuple[list[str], list[str]]:
    """The lines that read the variables' values, and the names the values then have."""
    if batched:
        return [f"    vals = list(map(read, {w.const(tuple(variables))}))"], \
            [f"vals[{j}]" for j in range(len(variables))]
    names = [f"v{j + 1}" for j in range(len(variables))]
    return [f"    {name} = read({w.const(var)})" for name, var in zip(names, variables)], names


class _StandIn:
    """A variable for ``_sole_count``: a ``_value`` slot, read by ``frames.value_reader``."""

    __slots__ = ("_value",)
    _value: object


def _sole_count(batched: bool, pick: str, n: int) -> int:
    """The reference count ``sys.getrefcount`` gives, inside the generated call, for a value held
    only by its variable: the same reading and picking lines, run on stand-ins."""
    holders = [_StandIn() for _ in range(n)]
    for h in holders:
        h._value = object()
    source = "def probe(variables):\n"
    if batched:
        source += "    vals = list(map(read, variables))\n"
    else:
        source += "".join(f"    v{j + 1} = read(variables[{j}])\n" for j in range(n))
    source += pick + "\n    return list(map(refs, d))\n"
    counts = Writer(read=frames.value_reader(), refs=sys.getrefcount).define(source, "probe")(holders)
    if len(set(counts)) != 1:  # pragma: no cover - every value is held alike
        raise RuntimeError(f"tpustrategy: unexpected reference counts {counts} of stand-in values")
    return int(counts[0])


def _store_write_back(w: Writer, store: Any, written: list[tuple[Any, int]]) -> list[str]:
    """The line writing the new values into the store: one slice assignment when they are
    consecutive there in the order the program returns them (a store made for this program:
    the written variables first), else one C-level pass over their positions."""
    if not written:
        return []
    position = {id(v): i for i, v in enumerate(store.variables)}
    at = [position[id(v)] for v, _ in written]
    first, last = written[0][1], written[-1][1] + 1
    if at == list(range(at[0], at[0] + len(at))) and [i for _, i in written] == list(range(first, last)):
        return [f"    vals[{at[0]}:{at[0] + len(at)}] = outs[{first}:{last}]"]
    w.consts.update(_put=store.values.__setitem__, _deque=collections.deque)
    new = "(" + "".join(f"outs[{i}], " for _, i in written) + ")"
    return [f"    _deque(map(_put, {w.const(tuple(at))}, {new}), 0)"]


def _sole_count_of(pick: str, n: int) -> int:
    """``_sole_count`` for the store's call: the reference count of a value held only by the
    store's list, as ``map(refs, <pick>)`` sees it in the generated call."""
    source = f"def probe(vals):\n    return list(map(refs, {pick}))\n"
    counts = Writer(refs=sys.getrefcount).define(source, "probe")([object() for _ in range(n)])
    if len(set(counts)) != 1:  # pragma: no cover - every value is held alike
        raise RuntimeError(f"tpustrategy: unexpected reference counts {counts} of stand-in values")
    return int(counts[0])
