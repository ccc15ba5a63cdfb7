"""A fast key's check, compiled once: is a call's structure the one a cached program was built for?

``entry.fast_key`` walks a call's arguments and builds their key (a tuple: kinds, shapes,
dtypes, container types and lengths, Python scalars), which is hashed and looked up. A
loop calls one program with arguments of one structure every step, so once a key has
found a program, ``compile_guard(key)`` turns the key into straight-line Python that checks
a call against it and collects the call's dynamic inputs in one pass, without building,
hashing or comparing a key:

    def guard(args, split):
        if type(args[0]) is not list or len(args[0]) != 2: return None
        x1 = args[0][0]
        ...
        e = x1.fast_entry(split)
        if e is None or (e[0] is not k3 and e[0] != k3): return None
        ...
        return [a0, a1, ...]

The guard passes exactly when ``fast_key`` would give ``key`` (each entry's check is the
entry's definition read backwards, ``tests/execution/test_guards.py`` checks both ways)
and returns the same dynamic inputs in the same order. The source is generated (as
``collections.namedtuple`` and ``dataclasses`` generate theirs) because a loop
interpreting the key costs about what building it does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.jax_shims.array_protocol import ARRAY_IMPL as _ArrayImpl
from tpustrategy._src.values.distributed import Mirrored, PerReplica

Guard = Callable[[Any, Any], "list[Any] | None"]

_SCALAR_TYPES = (int, float, bool, str, type(None))


class _Writer:
    """The guard's source lines and the constants they name."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {"_Mirrored": Mirrored, "_PerReplica": PerReplica,
                                       "_ArrayImpl": _ArrayImpl, "_ndarray": np.ndarray}
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
    namespace = dict(w.consts)
    exec(compile(source, "<tpustrategy fast-key guard>", "exec"), namespace)  # noqa: S102 - generated above
    guard: Guard = namespace["guard"]
    guard.__doc__ = source
    return guard


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
