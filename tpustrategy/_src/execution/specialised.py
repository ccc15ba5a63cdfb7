"""Straight-line code for one fixed structure: a fast key's guard, a program's result builder, its call.

A loop calls one program with arguments of one structure every step and gets results of
one structure back. Walking those structures generically (a loop over a key, a plan, a
treedef) costs several times what checking or building that one structure costs, so each is
turned once into straight-line Python (generated, as ``collections.namedtuple`` and
``dataclasses`` generate theirs):

- ``compile_guard(key)``: is a call's structure the one a cached program was built for?
  ``entry.fast_key`` walks a call's arguments and builds their key (kinds, shapes, dtypes,
  container types and lengths, Python scalars), which is hashed and looked up. Once a key
  has found a program, its guard checks the next call against it and collects the call's
  dynamic inputs in one pass, without building, hashing or comparing a key::

      def guard(args, split):
          if len(args) != 4: return None
          x1 = args[0]
          if type(x1) is not k1 or len(x1) != 2: return None
          ...
          e = x3.fast_entry(split)
          if e is None or (e[0] is not k6 and e[0] != k6): return None
          a1 = e[1]
          ...
          return [a1, a2, ...]

  The guard passes exactly when ``fast_key`` would give ``key`` (each entry's check is the
  entry's definition read backwards; ``tests/execution/test_specialised.py`` checks both ways)
  and returns the same dynamic inputs in the same order.
- ``compile_builder(steps, treedef)``: a program's output pytree from its flat outputs,
  each leaf made as ``Program``'s plan says, nested as the treedef says, without a plan loop
  or ``tree_unflatten``; subtrees without leaves made only of tuples, namedtuples and None
  (optax's ``EmptyState()``) are made once and reused, since nothing can change them.
- ``compile_call(...)``: a cached program's whole call for the fast path's hits (inputs'
  shardings checked by identity, the dispatch, the in-flight bound, the written variables'
  values, the results as ``compile_builder`` makes them), with side exits to ``Program``'s
  general call before the dispatch and to its finish after it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import itertools
import operator
import sys

import numpy as np

from tpustrategy._src.execution import dispatch
from tpustrategy._src.jax_shims.array_protocol import ARRAY_IMPL as _ArrayImpl
from tpustrategy._src.jax_shims.array_protocol import SHARDING_ATTRIBUTE
from tpustrategy._src.values.distributed import Mirrored, PerReplica
from tpustrategy._src.variables import frames

Guard = Callable[[Any, Any], "list[Any] | None"]

_SCALAR_TYPES = (int, float, bool, str, type(None))


class _Writer:
    """The guard's source lines and the constants they name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {"_Mirrored": Mirrored, "_PerReplica": PerReplica,
                                       "_ArrayImpl": _ArrayImpl, "_ndarray": np.ndarray,
                                       # bound once: a class attribute read per call costs more
                                       "_from_replicated": Mirrored.from_replicated,
                                       "_mirrored_parts": Mirrored.from_parts,
                                       "_per_replica_parts": PerReplica.from_parts}
        self.n_vars = 0
        self.n_arrays = 0

    def const(self, value: Any) -> str:
        name = f"k{len(self.consts)}"
        self.consts[name] = value
        return name

    def var(self) -> str:
        self.n_vars += 1
        return f"x{self.n_vars}"

    def array(self) -> str:
        self.n_arrays += 1
        return f"a{self.n_arrays}"

    def fail_if(self, condition: str) -> None:
        self.lines.append(f"    if {condition}: return None")


def compile_guard(key: tuple[Any, ...]) -> Guard | None:
    """The check of ``key`` (a ``fast_key`` of a call without keyword arguments), or None
    when the key holds an entry it does not know (then the caller keeps looking keys up)."""
    w = _Writer()
    w.fail_if(f"len(args) != {int(key[0])}")
    pos = _items(w, key, 1, [f"args[{i}]" for i in range(int(key[0]))])
    if pos != len(key):
        return None
    arrays = ", ".join(f"a{i + 1}" for i in range(w.n_arrays))
    source = "def guard(args, split):\n" + "\n".join(w.lines) + f"\n    return [{arrays}]\n"
    guard: Guard = _define(source, "guard", w.consts)
    return guard


def _define(source: str, name: str, consts: dict[str, Any]) -> Any:
    """The function ``name`` defined by ``source`` (generated here) over ``consts``; its
    ``__doc__`` is the source, for reading and debugging."""
    namespace = dict(consts)
    exec(compile(source, f"<tpustrategy {name}>", "exec"), namespace)  # noqa: S102 - source generated above
    fn = namespace[name]
    fn.__doc__ = source
    return fn


def _items(w: _Writer, key: tuple[Any, ...], pos: int, exprs: list[str]) -> int:
    """Writes the checks of the values ``exprs`` (Python expressions), read from ``key`` at
    ``pos``; returns the position after them (-1 anywhere: an unknown entry)."""
    for expr in exprs:
        if pos < 0 or pos >= len(key):
            return -1
        pos = _item(w, key, pos, expr)
    return pos


def _item(w: _Writer, key: tuple[Any, ...], pos: int, expr: str) -> int:
    entry = key[pos]
    if not isinstance(entry, tuple) or not entry:
        return -1
    head = entry[0]
    x = w.var()
    w.lines.append(f"    {x} = {expr}")
    if head is Mirrored or head is PerReplica:
        k, a = w.const(entry), w.array()
        w.fail_if(f"type({x}) is not {'_Mirrored' if head is Mirrored else '_PerReplica'}")
        w.lines.append(f"    e = {x}.fast_entry(split)")
        w.fail_if(f"e is None or (e[0] is not {k} and e[0] != {k})")
        w.lines.append(f"    {a} = e[1]")
        return pos + 1
    if head is _ArrayImpl and len(entry) == 4:
        shape, dtype, weak = (w.const(v) for v in entry[1:])
        a = w.array()
        w.fail_if(f"type({x}) is not _ArrayImpl or {x}.shape != {shape} or {x}.dtype != {dtype} "
                  f"or {x}.weak_type != {weak}")
        w.lines.append(f"    {a} = {x}")
        return pos + 1
    if head is np.ndarray and len(entry) == 3:
        shape, dtype = w.const(entry[1]), w.const(entry[2])
        a = w.array()
        w.fail_if(f"type({x}) is not _ndarray or {x}.shape != {shape} or {x}.dtype != {dtype}")
        w.lines.append(f"    {a} = {x}")
        return pos + 1
    if head in _SCALAR_TYPES and len(entry) == 2:
        t, v = w.const(head), w.const(entry[1])
        w.fail_if(f"type({x}) is not {t} or {x} != {v}")
        return pos + 1
    if head is dict and len(entry) == 2 and isinstance(entry[1], tuple):
        names = entry[1]
        w.fail_if(f"type({x}) is not dict or len({x}) != {len(names)}")
        w.lines.append("    try:")
        w.lines.append(f"        if sorted({x}) != {w.const(list(names))}: return None")
        w.lines.append("    except TypeError: return None")
        return _items(w, key, pos + 1, [f"{x}[{w.const(name)}]" for name in names])
    if isinstance(head, type) and issubclass(head, (tuple, list)) and len(entry) == 2 \
            and type(entry[1]) is int:
        n = entry[1]
        w.fail_if(f"type({x}) is not {w.const(head)} or len({x}) != {n}")
        return _items(w, key, pos + 1, [f"{x}[{i}]" for i in range(n)])
    return -1


# Result builders --------------------------------------------------------------------------------
# How a builder makes one leaf (``Program``'s plan): from the program's outputs by index.
MIRRORED, PLAIN, VARYING, PER_REPLICA, STATIC, STATIC_PER_REPLICA = range(6)


def compile_builder(steps: list[tuple[int, Any, int, int]], treedef: Any) -> Callable[[Any, Any], Any] | None:
    """``build(outs, keys)``: the output pytree from the program's flat outputs ``outs``.

    Args:
      steps: per leaf, ``(how, arg, i, copy)``: ``MIRRORED`` (``arg`` replicas; ``keys[i]``
        its fast key, used when ``outs[i]`` is a concrete array), ``PLAIN``, ``VARYING``
        (``arg`` replicas; ``outs[copy]`` its per-device copy, ``copy`` -1: none),
        ``PER_REPLICA`` (``arg``: class and true shapes), ``STATIC`` (``arg``), ``STATIC_PER_REPLICA``.
      treedef: the output's structure (``steps`` in its leaf order).

    Returns None for a structure it does not know (then the caller unflattens).
    """
    w = _Writer()
    body = _body(w, steps, treedef)
    if body is None:
        return None
    return _define(f"def build(outs, keys):\n    return {body}\n", "build", w.consts)  # type: ignore[no-any-return]


def _body(w: _Writer, steps: list[tuple[int, Any, int, int]], treedef: Any,
          keys: list[Any] | None = None) -> str | None:
    """The output pytree's expression over ``outs`` (None: a structure not generated)."""
    if treedef.num_leaves != len(steps):
        return None
    leaves = iter([_leaf(w, step, keys) for step in steps])
    try:
        return _node(w, treedef, leaves)
    except _Unknown:
        return None


class _Unknown(Exception):
    """A node the builder does not generate."""


def _leaf(w: _Writer, step: tuple[int, Any, int, int], keys: list[Any] | None = None) -> str:
    """One leaf's expression; ``keys``: the Mirrored results' fast keys when the outputs are
    known to be concrete arrays (``compile_call``), else they are read and checked per call."""
    how, arg, i, copy = step
    if how == MIRRORED:
        if keys is not None:
            return f"_mirrored_parts({int(arg)}, None, outs[{i}], None, ({w.const(keys[i])}, outs[{i}]))"
        return (f"_from_replicated(outs[{i}], {int(arg)}, keys[{i}] "
                f"if type(outs[{i}]) is _ArrayImpl else None)")
    if how == PLAIN:
        return f"outs[{i}]"
    if how == VARYING:
        if copy < 0:
            local = "None"
        elif keys is not None:
            local = f"outs[{copy}]"
        else:
            local = f"(outs[{copy}] if type(outs[{copy}]) is _ArrayImpl else None)"
        return f"_per_replica_parts({int(arg)}, outs[{i}], None, {local})"  # ``from_output``, one frame
    if how == PER_REPLICA:
        cls, shapes = arg
        return f"{w.const(cls)}.from_stacked(outs[{i}], {w.const(shapes)})"
    if how == STATIC:
        return w.const(arg)
    return f"_PerReplica(list({w.const(arg)}))"


def _frozen(treedef: Any) -> bool:
    """Whether a subtree without leaves is made only of tuples, namedtuples and None."""
    data = treedef.node_data()
    if data is None:
        return False
    t = data[0]
    if t is not type(None) and not (t is tuple or (issubclass(t, tuple) and hasattr(t, "_fields"))):
        return False
    return all(_frozen(c) for c in treedef.children())


def _node(w: _Writer, treedef: Any, leaves: Any) -> str:
    data = treedef.node_data()
    if data is None:  # a leaf
        return str(next(leaves))
    if treedef.num_leaves == 0 and _frozen(treedef):
        return w.const(treedef.unflatten([]))
    t, aux = data
    children = treedef.children()
    if t is type(None):
        return "None"
    if t is tuple:
        parts = [_node(w, c, leaves) for c in children]
        return "(" + "".join(p + ", " for p in parts) + ")"
    if t is list:
        return "[" + ", ".join(_node(w, c, leaves) for c in children) + "]"
    if t is dict:
        return "{" + ", ".join(f"{w.const(k)}: {_node(w, c, leaves)}" for k, c in zip(aux, children)) + "}"
    if issubclass(t, tuple) and hasattr(t, "_fields"):
        return f"{w.const(t)}(" + ", ".join(_node(w, c, leaves) for c in children) + ")"
    raise _Unknown(t)


# Program calls -----------------------------------------------------------------------------------


def compile_call(*, jitted: Any, num_inputs: int, seen: list[Any], variables: list[Any],
                 donating: tuple[Any, tuple[int, ...]] | None = None, token: int,
                 written: list[tuple[Any, int]], steps: list[tuple[int, Any, int, int]], treedef: Any,
                 keys: list[Any], general: Callable[[list[Any]], Any],
                 finish: Callable[[Any], Any]) -> Callable[[list[Any]], Any] | None:
    """``call(arrays)``: one program's call, as ``Program.__call__`` makes it, in straight-line
    code for the common case; only for callers outside every variable frame (the fast path's
    hits: ``strategy.run`` and ``tps.function`` outside any trace).

    The common case: every dynamic input and variable value is a concrete array already where
    the program takes it (its sharding is the one ``seen`` holds), so the call is the dispatch,
    the bound on programs in flight (``dispatch.tracker``), the written variables' new values
    (``frames.value_writer``; ``outs[token]`` stands for the program there) and the results (``steps``/``treedef``, as ``compile_builder``
    makes them, the Mirrored results' fast ``keys`` known). Anything else goes to ``general``
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
    w = _Writer()
    body = _body(w, steps, treedef, keys)
    if body is None or not written and all(step[2] < 0 for step in steps):  # no outputs: nothing to track
        return None
    pending, limit, settle = dispatch.tracker()
    w.consts.update(jitted=jitted, seen=seen, general=general, finish=finish, read=frames.value_reader(),
                    pending=pending, pending_append=pending.append, limit=limit, settle=settle,
                    refs=sys.getrefcount, _is=operator.is_, _islice=itertools.islice,
                    _shard=operator.attrgetter(SHARDING_ATTRIBUTE))
    inputs = [f"a{i + 1}" for i in range(num_inputs)]
    lines = []
    if num_inputs:
        lines.append(f"    {''.join(a + ', ' for a in inputs)}= arrays")
    checks = [f"type({x}) is not _ArrayImpl or {x}.{SHARDING_ATTRIBUTE} is not seen[{i}]"
              for i, x in enumerate(inputs)]
    batched = len(variables) > BATCH_VARIABLES
    read, values = _read_variables(w, variables, batched)
    lines += read
    if not batched:
        checks += [f"type({x}) is not _ArrayImpl or {x}.{SHARDING_ATTRIBUTE} is not seen[{num_inputs + j}]"
                   for j, x in enumerate(values)]
    if checks:
        lines.append(f"    if {' or '.join(checks)}: return general(arrays)")
    if batched:  # each value's sharding, by identity, in one C-level pass (a tracer has none)
        lines += ["    try:",
                  f"        if not all(map(_is, map(_shard, vals), _islice(seen, {num_inputs}, None))): "
                  "return general(arrays)",
                  "    except AttributeError: return general(arrays)"]
    call_args = ", ".join(inputs + (["*vals"] if batched else values))
    if donating is not None:
        # A written variable's old value is donated when only its variable holds it (a value the
        # user kept from an earlier read, or a checkpoint still copying it, makes this call keep
        # every buffer). How many references that is depends on the interpreter: counted once on
        # stand-ins read by the very same lines (``_sole_count``).
        picked = [values[i - num_inputs] if not batched else f"vals[{i - num_inputs}]" for i in donating[1]]
        pick = f"    d = [{', '.join(picked)}]"
        w.consts.update(donating=donating[0], sole=_sole_count(batched, pick, len(variables)).__eq__)
        lines += [pick,
                  f"    if all(map(sole, map(refs, d))): outs = donating({call_args})",
                  f"    else: outs = jitted({call_args})",
                  "    del d"]
    else:
        lines.append(f"    outs = jitted({call_args})")
    lines += [f"    o = outs[{int(token)}]",
              "    if type(o) is not _ArrayImpl: return finish(outs)",
              "    pending_append(o)",
              "    if len(pending) > limit: settle()"]
    if len(written) > BATCH_VARIABLES and [i for _, i in written] == list(range(written[0][1], written[0][1] + len(written))):
        first = written[0][1]
        lines.append(f"    {w.const(frames.values_writer([v for v, _ in written]))}(outs[{first}:{first + len(written)}])")
    else:
        lines += [f"    {w.const(frames.value_writer(var))}(outs[{i}])" for var, i in written]
    lines.append(f"    return {body}")
    return _define("def call(arrays):\n" + "\n".join(lines) + "\n", "call", w.consts)  # type: ignore[no-any-return]


# More variables than this are read, checked and written in C-level passes over a list (a
# Python line per variable costs less for a few; a pass costs less per variable for many).
BATCH_VARIABLES = 6


def _read_variables(w: _Writer, variables: list[Any], batched: bool) -> tuple[list[str], list[str]]:
    """The lines that read the variables' values, and the names the values then have."""
    if batched:
        return [f"    vals = list(map(read, {w.const(tuple(variables))}))"], \
            [f"vals[{j}]" for j in range(len(variables))]
    names = [f"v{j + 1}" for j in range(len(variables))]
    return [f"    {name} = read({w.const(var)})" for name, var in zip(names, variables)], names


class _StandIn:
    """A variable for ``_sole_count``: a ``_value`` slot, read by ``frames.value_reader``."""

    __slots__ = ("_value",)


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
    counts = _define(source, "probe", {"read": frames.value_reader(), "refs": sys.getrefcount})(holders)
    if len(set(counts)) != 1:  # pragma: no cover - every value is held alike
        raise RuntimeError(f"tpustrategy: unexpected reference counts {counts} of stand-in values")
    return int(counts[0])
