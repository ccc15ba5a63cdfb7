"""The objects a checkpoint holds, flattened into named entries.

``Checkpoint(model=..., optimizer=..., iterator=..., step=...)`` is a tree of
objects; each piece of state in it gets a key made of the names on its path
(``"model/dense/kernel"``, ``"params/w1"``, ``"opt_state/0/mu/b"``), as in
TensorFlow's object-based checkpoints, so restoring into a differently built
but equally named object graph finds the same values. What is tracked:

- ``tps.Variable``: restored in place (entry kind ``"variable"``).
- Checkpointable iterators (``get_state``/``set_state``): in place (``"iterator"``).
- ``jax.Array``/NumPy arrays (``"array"``) and Python ``bool``/``int``/
  ``float``/``str`` (``"value"``): restoring puts a new value where the old
  one was (an attribute, a dict item, or a rebuilt pytree); a writeable NumPy
  array is also overwritten in place.
- Pytrees (dicts, lists, tuples, namedtuples, flax/optax/equinox state):
  their leaves, by key path. Mutable containers are updated in place.
- Nested ``Checkpoint``s and other objects: their attributes that hold any of
  the above (a model or optimizer object), like TensorFlow's tracking.

An object reachable by several paths (a variable shared by a model and an
optimizer) is saved once, under its first path, with the other paths as
aliases, so a restore that reaches it by any of them finds it.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from tpustrategy._src.checkpoint import adapter
from tpustrategy._src.checkpoint.holder import NamedObjects

VALUE_TYPES = (bool, int, float, str)
_FOREIGN_MODULES = ("jax", "jaxlib", "numpy", "builtins", "threading", "collections", "functools",
                    "typing", "types", "abc", "weakref", "logging", "tpustrategy._src.strategy",
                    "tpustrategy._src.devices", "tpustrategy._src.cluster")
_MAX_DEPTH = 32


@dataclasses.dataclass
class Entry:
    """One piece of state.

    Attributes:
      key: its path of names, joined by ``/``.
      kind: ``"variable"``, ``"iterator"``, ``"array"`` or ``"value"``.
      obj: the variable, iterator, array or Python value.
      put: for arrays and values, puts a restored value in its place.
    """

    key: str
    kind: str
    obj: Any
    put: Callable[[Any], None] | None = None


class Graph:
    """The flattened state of a set of named objects.

    Attributes:
      entries: key -> `Entry`, in a stable order.
      commits: functions to call after the ``put``s, which rebuild pytrees.
    """

    def __init__(self, objects: list[tuple[str, Any, Callable[[Any], None], bool]], api: str, *,
                 prefix: str = "", restoring: bool = False):
        """Flattens ``(name, value, put, strict)`` objects.

        ``strict`` objects must hold state (else TypeError); others (the
        attributes of a root object) are skipped when they hold none. With
        ``restoring``, a strict object that holds no state *yet* (a model whose
        variables are built on first call) is allowed: restoring waits for its
        variables (deferred restoration). ``prefix`` is the key of the object
        the names belong to (empty for a root Checkpoint).
        """
        self.entries: dict[str, Entry] = {}
        # For deferred restoration: the objects, Checkpoints and lists/dicts met, by key.
        self.shells: dict[str, Any] = {}
        self.checkpoints: dict[str, Any] = {}
        self.containers: dict[str, tuple[Any, Callable[[Any], None]]] = {}
        self._restoring = restoring
        self.aliases: dict[str, list[str]] = {}
        self.objects: dict[str, Any] = {}  # key -> each object whose attributes were visited
        self.commits: list[Callable[[], None]] = []
        self._api = api
        self._first: dict[int, str] = {}  # id of a variable/iterator -> its key
        self._path: set[int] = set()  # objects on the path being visited (cycles)
        self._visited: set[int] = set()  # objects whose arrays and values were added
        self._alias_depth = 0
        for name, value, put, strict in objects:
            key = f"{prefix}/{_segment(name)}" if prefix else _segment(name)
            if (not self._visit(value, key, put, strict=strict, depth=0) and strict
                    and not (restoring and (key in self.shells or key in self.checkpoints))):
                raise self._unsupported(name, value)

    # Visiting --------------------------------------------------------------------------------
    def _add(self, key: str, kind: str, obj: Any, put: Callable[[Any], None] | None = None) -> None:
        if key in self.entries:
            raise ValueError(f"{self._api}: two objects have the same checkpoint key {key!r}.")
        self.entries[key] = Entry(key, kind, obj, put)

    def _visit(self, value: Any, key: str, put: Callable[[Any], None], strict: bool, depth: int) -> bool:
        """Adds the entries of ``value``; returns whether it held any state."""
        if depth > _MAX_DEPTH:
            return False
        if "keras" in __import__("sys").modules:  # Keras models/optimizers/metrics: their variables
            from tpustrategy._src.keras.checkpoint import state_tree

            tree = state_tree(value)
            if tree is not None:
                return self._visit(tree, key, lambda new: None, strict, depth + 1)
        if adapter.is_variable(value) or adapter.is_iterator(value):
            first = self._first.get(id(value))
            if first is None:
                self._first[id(value)] = key
                self._add(key, "variable" if adapter.is_variable(value) else "iterator", value)
            elif first != key:
                self.aliases.setdefault(first, []).append(key)
            return True
        if isinstance(value, NamedObjects):  # a nested Checkpoint
            if id(value) in self._path:
                return True
            self.checkpoints.setdefault(key, value)
            self._path.add(id(value))
            found = False
            for name, child in value._objects.items():
                def put_child(new: Any, name: str = name, ckpt: Any = value) -> None:
                    ckpt._objects[name] = new

                found |= self._visit(child, f"{key}/{_segment(name)}", put_child, True, depth + 1)
            self._path.discard(id(value))
            return found
        if _is_array(value):
            if not self._aliasing:
                self._add(key, "array", value, put)
            return True
        if isinstance(value, VALUE_TYPES):
            if strict and not self._aliasing:
                self._add(key, "value", value, put)
            return strict
        if value is None:
            return False
        if isinstance(value, (list, dict)):
            self.containers.setdefault(key, (value, put))
        try:
            leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(value, is_leaf=_is_atom)
        except (TypeError, ValueError) as e:  # e.g. a dict keyed by variables (unsortable)
            if strict:
                raise TypeError(f"{self._api}: {key!r} cannot be flattened as a pytree: {e}") from None
            return False
        if not (len(leaves_with_paths) == 1 and leaves_with_paths[0][0] == () and leaves_with_paths[0][1] is value):
            return self._visit_tree(value, leaves_with_paths, treedef, key, put, strict, depth)
        return self._visit_object(value, key, strict, depth)

    @property
    def _aliasing(self) -> bool:
        return self._alias_depth > 0

    def _visit_tree(self, value: Any, leaves_with_paths: list[Any], treedef: Any, key: str,
                    put: Callable[[Any], None], strict: bool, depth: int) -> bool:
        leaves = [leaf for _, leaf in leaves_with_paths]
        holds_state = any(_holds_state(leaf) for leaf in leaves)
        if not holds_state and not strict:
            return False
        state = {"changed": False}

        def put_leaf(new: Any, i: int) -> None:
            leaves[i] = new
            state["changed"] = True

        found = False
        for i, (path, leaf) in enumerate(leaves_with_paths):
            leaf_key = "/".join([key, *(_segment(_path_name(p)) for p in path)])
            ok = self._visit(leaf, leaf_key, lambda new, i=i: put_leaf(new, i), True, depth + 1)
            if not ok and leaf is not None:
                raise ValueError(
                    f"{self._api}: {leaf_key!r} is a {type(leaf).__name__} ({_short(leaf)}), which a "
                    "checkpoint cannot hold.\nFix: keep only arrays, tps.Variables, iterators and "
                    "Python numbers/strings in checkpointed pytrees (mark other fields static, "
                    "e.g. flax.struct.field(pytree_node=False))."
                )
            found |= ok

        def rebuild() -> None:
            if state["changed"]:
                put(_in_place(value, jax.tree_util.tree_unflatten(treedef, leaves)))

        self.commits.append(rebuild)
        return found or strict

    def _visit_object(self, value: Any, key: str, strict: bool, depth: int) -> bool:
        if id(value) in self._path or not _trackable(value):
            return False
        self.shells.setdefault(key, value)
        # An object reached again only adds aliases for its variables and iterators.
        again = id(value) in self._visited
        self._path.add(id(value))
        self._alias_depth += again
        found = False
        try:
            for name, attr in sorted(vars(value).items()):
                if name.startswith("__") or callable(attr) and not _holds_state(attr) and not (
                        self._restoring and _trackable(attr) and not inspect.isroutine(attr)):
                    continue  # (a callable object, e.g. a layer, may get its variables later)

                def put_attr(new: Any, name: str = name, obj: Any = value) -> None:
                    setattr(obj, name, new)

                found |= self._visit(attr, f"{key}/{_segment(name)}", put_attr, False, depth + 1)
        finally:
            self._alias_depth -= again
            self._path.discard(id(value))
        if found:
            self._visited.add(id(value))
            self.objects.setdefault(key, value)
        return found

    def _unsupported(self, name: str, value: Any) -> Exception:
        if adapter.is_dataset(value):
            return TypeError(
                f"{self._api}: {name}= is a dataset ({type(value).__name__}); a checkpoint holds "
                "an iterator's position, not a dataset.\nFix: checkpoint the iterator you train "
                f"from: it = iter(dataset); tps.train.Checkpoint({name}=it)."
            )
        return TypeError(
            f"{self._api}: {name}= is a {type(value).__name__} ({_short(value)}), which holds no "
            "checkpointable state.\nFix: pass tps.Variables, arrays or pytrees of them (flax/optax "
            "state), iterators from iter(dataset) or iter(distributed_dataset), Python numbers, "
            "or objects whose attributes hold those."
        )


def _is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic, jax.ShapeDtypeStruct))


def _is_atom(x: Any) -> bool:
    return adapter.is_variable(x) or adapter.is_iterator(x) or isinstance(x, NamedObjects)


def _holds_state(x: Any, depth: int = 0, seen: frozenset[int] = frozenset()) -> bool:
    """Whether ``x`` holds a variable, iterator, array or trackable object holding one."""
    if _is_atom(x) or _is_array(x):
        return True
    if isinstance(x, VALUE_TYPES) or x is None or depth > _MAX_DEPTH or id(x) in seen:
        return False
    try:
        leaves = jax.tree_util.tree_leaves(x, is_leaf=_is_atom)
    except (TypeError, ValueError):
        return False
    seen = seen | {id(x)}
    if len(leaves) == 1 and leaves[0] is x:
        return _trackable(x) and any(
            _holds_state(v, depth + 1, seen) for k, v in vars(x).items() if not k.startswith("__"))
    return any(_holds_state(leaf, depth + 1, seen) for leaf in leaves)


def _trackable(x: Any) -> bool:
    if not hasattr(x, "__dict__") or isinstance(x, type) or adapter.is_strategy(x) or adapter.is_dataset(x):
        return False
    module = type(x).__module__ or ""
    return not any(module == m or module.startswith(m + ".") for m in _FOREIGN_MODULES)


def _in_place(old: Any, new: Any) -> Any:
    """Updates dicts and lists in place (callers may hold them); returns what to store."""
    if isinstance(old, dict) and isinstance(new, dict) and old.keys() == new.keys():
        for k in old:
            dict.__setitem__(old, k, _in_place(old[k], new[k]))
        return old
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        list.__setitem__(old, slice(None), [_in_place(a, b) for a, b in zip(old, new)])
        return old
    return new


def _path_name(p: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(p, attr):
            return str(getattr(p, attr))
    return str(p)


def _segment(name: Any) -> str:
    return str(name).replace("%", "%25").replace("/", "%2F")


def _short(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."
