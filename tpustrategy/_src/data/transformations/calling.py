"""How a dataset function is called on an element: a tuple element spreads over the
function's arguments, a scalar string goes in as a `StringScalar` and leaves as ``bytes``
(TensorFlow's calling convention for ``map``, ``filter``, ``flat_map`` and the others).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.string_scalar import StringScalar


def call_fn(fn: Callable[..., Any], element: Any) -> Any:
    """``fn(*element)`` for plain tuples, ``fn(element)`` otherwise (``tf.data`` rule).

    A scalar string argument is passed as a `StringScalar` (``bytes`` that also
    indexes like TensorFlow's 0-d string tensor, ``eg[np.newaxis]``); one
    returned unchanged comes back as plain ``bytes``.
    """
    wrapped = False
    if type(element) is tuple:
        if bytes in map(type, element):
            element = tuple(StringScalar(a) if type(a) is bytes else a for a in element)
            wrapped = True
        out = fn(*element)
    elif type(element) is bytes:
        out = fn(StringScalar(element))
        wrapped = True
    else:
        out = fn(element)
    if type(out) is list:
        out = tuple(out)
    if not wrapped:
        return out
    # Scalars handed in as StringScalar leave as plain bytes (also inside a returned tuple/dict).
    if type(out) is StringScalar:
        return bytes(out)
    if type(out) is tuple:
        if StringScalar not in map(type, out):
            return out
        return tuple(bytes(v) if type(v) is StringScalar else v for v in out)
    if type(out) is dict:
        return {k: bytes(v) if type(v) is StringScalar else v for k, v in out.items()}
    return out


def call_map_fn(fn: Callable[..., Any], element: Any) -> Any:
    """``call_fn`` for ``Dataset.map``: a function that returns None is an error, not an element."""
    out = call_fn(fn, element)
    if out is None:
        name = getattr(fn, "__qualname__", None) or repr(fn)
        raise TypeError(
            f"Dataset.map: the map function {name!r} returned None; a map function must return the new "
            "element (an array, or a tuple/dict of arrays).\nFix: add the missing `return`, or use "
            "Dataset.filter to drop elements."
        )
    return out
