"""A dataset function's Python values read when the transformation is made, as TensorFlow does.

TensorFlow traces the function given to ``map`` (``filter``, ``flat_map``, ``interleave``,
``scan``, ``take_while``, ``group_by_window``) when the transformation is created, so a Python
value it closes over is read then: ``for i, ds in enumerate(parts): ds.map(lambda x: (x, i))``
gives each dataset its own ``i``. Here the function runs later, element by element, so its
closure is copied when the transformation is made: ``bound_now`` returns the same code over new
cells holding the values the closure has now. What is captured, exactly:

- the function's own closure variables (a ``lambda`` or nested ``def``'s free names): their
  current values; an object (a list, a lookup table, a model) is the same object, so changes
  made to it later are seen, as TensorFlow sees a captured resource;
- not globals, default arguments (already bound when the function was defined) or the closures
  of functions it calls;
- a function that assigns a closure variable (``nonlocal n; n += 1``) keeps its live cells (the
  assignment must reach the enclosing scope), and so does one with a cell not yet assigned.
"""

from __future__ import annotations

import dis
import types
from typing import Any


def bound_now(fn: Any) -> Any:
    """``fn`` over its closure's current values (``fn`` itself when there is nothing to bind)."""
    if type(fn) is not types.FunctionType or not fn.__closure__:
        return fn
    code = fn.__code__
    if _assigns_free_names(code):
        return fn
    cells = []
    for cell in fn.__closure__:
        try:
            cells.append(types.CellType(cell.cell_contents))
        except ValueError:  # an empty cell: the name is assigned after the function was made
            return fn
    bound = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(cells))
    bound.__kwdefaults__ = fn.__kwdefaults__
    bound.__qualname__ = fn.__qualname__
    bound.__doc__ = fn.__doc__
    bound.__module__ = fn.__module__
    bound.__dict__.update(fn.__dict__)
    bound.__wrapped__ = fn  # type: ignore[attr-defined]
    return bound


def _assigns_free_names(code: types.CodeType) -> bool:
    free = set(code.co_freevars)
    return any(ins.opname in ("STORE_DEREF", "DELETE_DEREF") and ins.argval in free
               for ins in dis.get_instructions(code))
