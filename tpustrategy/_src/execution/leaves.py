"""A call's arguments, leaf by leaf: their key, its compiled guard, and what is not an argument.

Both entries of compiled user code (``strategy.run`` and ``tps.function``) find a repeated
call's program by its **key**: the kinds (``values.leaf.LeafKind``), shapes and dtypes of its
leaves, read straight off tuples, lists, namedtuples and dicts of arrays, distributed values
and Python scalars — no pytree walk, no classification. Each kind's part of the key and its
check in the compiled guard are written side by side below (``_key_entry`` and ``_guard_lines``
of one kind read the same fields), so a new argument kind is a ``LeafKind`` member and its two
lines here.

- ``call_key(args, kwargs, split)``: the key and the dynamic inputs in ``signature.classify``'s
  order (equal keys imply equal ``classify`` keys), or None for arguments it does not walk
  (other containers, objects, host-built ``PerReplica`` not stacked yet, tracers): those take the
  classifying path.
- ``compile_guard(key)``: straight-line code (generated once per key, as ``namedtuple``
  generates its class) that passes exactly the calls whose key is ``key`` and collects their
  dynamic inputs in one pass, without building, hashing or comparing a key.
- ``not_an_argument(value, api)``: the error for a value that cannot be an argument of ``api``
  (a distributed dataset or iterator given to ``strategy.run``), naming the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.jax_shims.array_protocol import ARRAY_IMPL as _ArrayImpl
from tpustrategy._src.values.distributed import Mirrored, PerReplica
from tpustrategy._src.values.leaf import LeafKind, LeafSpec

Key = tuple[Any, ...]
Guard = Callable[[Any, Any], "list[Any] | None"]

ARRAY, NUMPY, PER_REPLICA, MIRRORED = LeafKind.ARRAY, LeafKind.NUMPY, LeafKind.PER_REPLICA, LeafKind.MIRRORED
STATIC, SEQUENCE, DICT = LeafKind.STATIC, LeafKind.SEQUENCE, LeafKind.DICT

_SCALARS = (int, float, bool, str, type(None))
# A leaf's kind by its exact type (a namedtuple type is added the first time it is met).
_KIND_OF_TYPE: dict[type, LeafKind | None] = {
    _ArrayImpl: ARRAY, np.ndarray: NUMPY, PerReplica: PER_REPLICA, Mirrored: MIRRORED,
    tuple: SEQUENCE, list: SEQUENCE, dict: DICT, **{t: STATIC for t in _SCALARS}}


def kind_of_type(t: type) -> LeafKind | None:
    """The kind the key gives a value of exact type ``t`` (None: the key does not walk it)."""
    found = _KIND_OF_TYPE.get(t, _KIND_OF_TYPE)
    if found is not _KIND_OF_TYPE:
        return found  # type: ignore[return-value]
    kind = SEQUENCE if issubclass(t, tuple) and hasattr(t, "_fields") else None  # a namedtuple
    if len(_KIND_OF_TYPE) < 4096:
        _KIND_OF_TYPE[t] = kind
    return kind


# The key --------------------------------------------------------------------------------------
def call_key(args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any] | None, split: Any) -> tuple[Key, list[Any]] | None:
    """The key of a call and its dynamic inputs, or None when the arguments hold a leaf the key
    does not walk. The positional arguments count as one tuple (``classify`` reads a list of
    them as a tuple too).

    Args:
      args: the positional arguments.
      kwargs: the keyword arguments (None or empty: none).
      split: the replica-axis sharding stacked values are placed on (as ``classify``).
    """
    key: list[Any] = [len(args)]
    arrays: list[Any] = []
    if not _walk(args, key, arrays, split) or (kwargs and not _walk((kwargs,), key, arrays, split)):
        return None
    return tuple(key), arrays


def _walk(items: Any, key: list[Any], arrays: list[Any], split: Any) -> bool:
    """Adds each of ``items`` to the key and its array to ``arrays``; False: a leaf the key does
    not walk. Leaves are handled here; only containers recurse."""
    for x in items:
        kind = kind_of_type(type(x))
        if kind is ARRAY:
            key.append(LeafSpec(ARRAY, x.shape, x.dtype, x.weak_type))
            arrays.append(x)
        elif kind is SEQUENCE:
            key.append((SEQUENCE, type(x), len(x)))
            if x and not _walk(x, key, arrays, split):
                return False
        elif kind is STATIC:
            key.append((STATIC, type(x), x))
        elif kind is PER_REPLICA or kind is MIRRORED:
            found = x.leaf(split)
            if found is None:
                return False
            key.append(found[0])
            arrays.append(found[1])
        elif kind is DICT:
            try:
                names = tuple(sorted(x))
            except TypeError:
                return False
            key.append((DICT, names))
            if not _walk([x[name] for name in names], key, arrays, split):
                return False
        elif kind is NUMPY and x.dtype.kind in "biufc":
            key.append(LeafSpec(NUMPY, x.shape, x.dtype))
            arrays.append(x)
        else:
            return False
    return True


# The guard ------------------------------------------------------------------------------------
class Writer:
    """Source lines of generated code and the constants they name (guards, builders, calls)."""

    def __init__(self, **consts: Any) -> None:
        self.lines: list[str] = []
        self.consts: dict[str, Any] = {"_Mirrored": Mirrored, "_PerReplica": PerReplica,
                                       "_ArrayImpl": _ArrayImpl, "_ndarray": np.ndarray, **consts}
        self._names = 0

    def const(self, value: Any) -> str:
        name = f"k{len(self.consts)}"
        self.consts[name] = value
        return name

    def name(self, prefix: str) -> str:
        self._names += 1
        return f"{prefix}{self._names}"

    def fail_if(self, condition: str) -> None:
        self.lines.append(f"    if {condition}: return None")

    def define(self, source: str, name: str) -> Any:
        """The function ``name`` that ``source`` (generated here) defines over the constants; its
        ``__doc__`` is the source, for reading and debugging."""
        namespace = dict(self.consts)
        exec(compile(source, f"<tpustrategy {name}>", "exec"), namespace)  # noqa: S102 - generated above
        fn = namespace[name]
        fn.__doc__ = source
        return fn


def compile_guard(key: Key) -> Guard | None:
    """``guard(args, split)``: the dynamic inputs of a call (no keyword arguments) whose key is
    ``key``, else None. Each entry's check is its ``_walk`` branch read backwards::

        def guard(args, split):
            if len(args) != 2: return None
            x1 = args[0]
            if type(x1) is not _ArrayImpl or x1.shape != k5 or ...: return None
            x2 = args[1]
            if type(x2) is not _Mirrored: return None
            e = x2.leaf(split)
            if e is None or (e[0] is not k6 and e[0] != k6): return None
            return [x1, e[1]]

    Returns None for a key with keyword arguments' entries it was not made for.
    """
    w = Writer()
    w.fail_if(f"len(args) != {int(key[0])}")
    arrays: list[str] = []
    pos = _guard_items(w, key, 1, [f"args[{i}]" for i in range(int(key[0]))], arrays)
    if pos != len(key):
        return None
    source = "def guard(args, split):\n" + "\n".join(w.lines) + f"\n    return [{', '.join(arrays)}]\n"
    guard: Guard = w.define(source, "guard")
    return guard


def _guard_items(w: Writer, key: Key, pos: int, exprs: list[str], arrays: list[str]) -> int:
    """The checks of the values ``exprs`` (Python expressions) against ``key`` from ``pos``;
    returns the position after them (-1: an entry it does not know)."""
    for expr in exprs:
        if pos < 0 or pos >= len(key):
            return -1
        pos = _guard_item(w, key, pos, expr, arrays)
    return pos


def _guard_item(w: Writer, key: Key, pos: int, expr: str, arrays: list[str]) -> int:
    entry = key[pos]
    x = w.name("x")
    w.lines.append(f"    {x} = {expr}")
    if isinstance(entry, LeafSpec):
        spec = w.const(entry)
        if entry.kind is ARRAY:
            shape, dtype, weak = (w.const(v) for v in (entry.shape, entry.dtype, entry.weak_type))
            a = w.name("a")  # the aval's fields (an array's ``shape``... are Python properties reading them)
            w.fail_if(f"type({x}) is not _ArrayImpl")
            w.lines.append(f"    {a} = {x}.aval")
            w.fail_if(f"{a}.shape != {shape} or {a}.dtype != {dtype} or {a}.weak_type != {weak}")
            arrays.append(x)
        elif entry.kind is NUMPY:
            w.fail_if(f"type({x}) is not _ndarray or {x}.shape != {w.const(entry.shape)} "
                      f"or {x}.dtype != {w.const(entry.dtype)}")
            arrays.append(x)
        elif entry.kind is PER_REPLICA or entry.kind is MIRRORED:
            e = w.name("e")
            w.fail_if(f"type({x}) is not {'_Mirrored' if entry.kind is MIRRORED else '_PerReplica'}")
            w.lines.append(f"    {e} = {x}.leaf(split)")
            w.fail_if(f"{e} is None or ({e}[0] is not {spec} and {e}[0] != {spec})")
            arrays.append(f"{e}[1]")
        else:
            return -1
        return pos + 1
    head = entry[0] if isinstance(entry, tuple) and entry else None
    if head is STATIC:
        w.fail_if(f"type({x}) is not {w.const(entry[1])} or {x} != {w.const(entry[2])}")
        return pos + 1
    if head is SEQUENCE:
        t, n = entry[1], entry[2]
        w.fail_if(f"type({x}) is not {w.const(t)} or len({x}) != {n}")
        return _guard_items(w, key, pos + 1, [f"{x}[{i}]" for i in range(n)], arrays)
    if head is DICT:
        names = entry[1]
        w.fail_if(f"type({x}) is not dict or len({x}) != {len(names)}")
        w.lines.append("    try:")
        w.lines.append(f"        if tuple(sorted({x})) != {w.const(names)}: return None")
        w.lines.append("    except TypeError: return None")
        return _guard_items(w, key, pos + 1, [f"{x}[{w.const(name)}]" for name in names], arrays)
    return -1


# What is not an argument ----------------------------------------------------------------------
def not_an_argument(value: Any, api: str, path: str) -> Exception | None:
    """The error for ``value`` (at ``path``, e.g. ``args[0]``) given to ``api`` as an argument,
    or None when it may be one. A distributed dataset or iterator is not a replica function's
    argument: its batches are."""
    from tpustrategy._src.context import contracts

    name = type(value).__name__
    if name == "DistributedDataset" or contracts.is_pullable(value):
        what = "distributed dataset" if name == "DistributedDataset" else "distributed iterator"
        return TypeError(
            f"{api}: {path} is a {what}, but the replica function takes one batch: each replica's "
            f"piece of it. Received: {path} of type {name}.\nFix: pass a batch, "
            "strategy.run(fn, args=(next(iterator),)), e.g. `for batch in dist_dataset: "
            "strategy.run(fn, args=(batch,))`; inside a tps.function call next(iterator) there.")
    return None


def refuse_in_run(value: Any, path: str) -> Exception | None:
    """``not_an_argument`` for ``strategy.run`` (``signature.classify``'s ``refuse``)."""
    return not_an_argument(value, "strategy.run", path)
