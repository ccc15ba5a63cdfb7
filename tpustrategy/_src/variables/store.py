"""Where a ``tps.Variable``'s concrete value lives: on the variable, or in a program's ``Store``.

A compiled program that runs in a loop reads all its variables, passes them to XLA, and
writes the new values back. Done variable by variable that is Python per variable per call
(read, sharding check, reference count, write-back), which on one device costs more than
``jax.jit``'s own dispatch. So a program keeps its variables' current values as **one flat
list** (a ``Store``): a call passes that list to the program as it is, checks the whole list
with one flag, and writes the new values back with one slice assignment
(``execution.specialised``). Each variable reads its value from the list by index, so reads
outside calls see the program's last write.

- A variable starts with its value on itself (``_own``); ``claim`` moves it into a program's
  store (at the store's position for it), out of whichever store held it before.
- ``Store.ok``: every value in the list is one this store's program may take as it is (a
  concrete array where the program takes it: the program checked it when it claimed the
  variables, or wrote it itself). Any other write of a variable in the store — ``assign``
  outside a program, a restore, another program's write-back, another store claiming it —
  goes through ``STORED_VALUE``'s setter and clears ``ok``, so the next call takes the
  checked path and claims again.

A variable class that keeps its value elsewhere (Keras's, in the Keras variable) overrides
``_value``; ``storable`` says which variables a store may hold.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any


class Store:
    """A program's variables' current values, one flat list (``values[i]`` is ``variables[i]``'s)."""

    __slots__ = ("values", "variables", "targets", "ok", "exported", "tick", "__weakref__")

    def __init__(self, variables: list[Any], targets: list[Any]) -> None:
        self.variables = list(variables)
        self.targets = list(targets)  # where each value must lie (the programs' shardings)
        self.values: list[Any] = [None] * len(self.variables)
        self.ok = False
        # Whether a value in the list may be held elsewhere too: set by every read of a slot (a
        # value handed out: the user's ``read_value``, a checkpoint copying it) and by a claim;
        # while it is clear, the call donates without counting references.
        self.exported = True
        # ``tick()``: counts the store's program's calls (returns the count before this one).
        self.tick = itertools.count().__next__


def _get(var: Any) -> Any:
    store = var._store
    if store is None:
        return var._own
    store.exported = True
    return store.values[var._index]


def _set(var: Any, value: Any) -> None:
    store = var._store
    if store is None:
        var._own = value
    else:
        store.values[var._index] = value
        store.ok = False  # a value its program has not checked


# ``tps.Variable._value``: the variable's one concrete value (a tracer while a program computes
# its first value), wherever it lives.
STORED_VALUE = property(_get, _set, doc="The variable's value (on the variable, or in its program's store).")


class StoredValue:
    """The mixin of ``tps.Variable``: ``_value`` read from and written to its store."""

    _store: Store | None = None
    _index: int = 0
    _own: Any = None
    _value = STORED_VALUE

    def __getstate__(self) -> dict[str, Any]:
        """A copy's (``copy.copy``, pickle) attributes: the value on the copy, no store slot."""
        state = dict(self.__dict__)
        if not storable(self):
            return state
        state.pop("_store", None)
        state.pop("_index", None)
        state["_own"] = _get(self)
        return state


# The store of each set of variables (programs over the same variables, placed alike, share one).
_shared: weakref.WeakValueDictionary[frozenset[int], Store] = weakref.WeakValueDictionary()


def shared(variables: list[Any], targets: list[Any]) -> Store:
    """The store of ``variables`` (taken at ``targets``): the one another program over the same
    variables placed alike made (two programs over one model's state, a ``strategy.run`` and a
    ``tps.function`` around it, share it: neither takes the values out of the other's list),
    else a new one in this order."""
    key = frozenset(map(id, variables))
    found = _shared.get(key)
    if found is not None and len(found.variables) == len(variables):
        where = {id(v): t for v, t in zip(found.variables, found.targets)}
        if all(where.get(id(v)) == t for v, t in zip(variables, targets)):
            return found
    made = _shared[key] = Store(variables, targets)
    return made


def storable(var: Any) -> bool:
    """Whether ``var`` keeps its value through ``STORED_VALUE`` (a store may hold it)."""
    return getattr(type(var), "_value", None) is STORED_VALUE


def claim(store: Store) -> int:
    """Moves every variable of ``store`` into it (its value with it), out of the store that
    held it before (whose slot is emptied, so an old list keeps no buffer alive and its
    program claims again). Leaves ``store.ok`` for the caller to set once it checked the values.
    Returns how many variables came from elsewhere."""
    values = store.values
    moved = 0
    for i, var in enumerate(store.variables):
        old = var._store
        if old is store and var._index == i:
            continue
        value = _get(var)
        if old is not None:
            old.values[var._index] = None
            old.ok = False
        else:
            var._own = None
        var._store = store
        var._index = i
        values[i] = value
        moved += 1
    store.exported = True  # a value moved in may be held where it was read before
    return moved


def detach(var: Any) -> None:
    """Gives ``var`` (a copy whose attributes were copied from another variable) its own value
    slot: the value it reads now, on itself."""
    if storable(var):
        value = _get(var)
        var.__dict__.pop("_store", None)
        var.__dict__.pop("_index", None)
        var._own = value
