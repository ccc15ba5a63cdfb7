"""What the object walks see of a ``Checkpoint``: its named objects and its root object.

``Checkpoint`` (``checkpoint.py``) sits above the modules that save and restore it
(``writer``, ``reader``, ``deferred``, ``tf_format``); they walk a Checkpoint's objects
through this base class, so none of them imports the class that calls them. A
`NamedObjects` keeps only private attributes: every public attribute name of a
Checkpoint is a name the user may give an object (``ckpt.model``).

Attributes (of every instance):
  _objects: the objects given by name (``Checkpoint(model=...)`` or ``ckpt.model = ...``).
  _root: the optional root object whose state-holding attributes are saved too.
  _pending: ``(key, deferred.Pending)`` records of saved values waiting for an object
    to appear under this Checkpoint (deferred restoration).
"""

from __future__ import annotations

from typing import Any


class NamedObjects:
    """The base of ``tps.train.Checkpoint``: objects by name, and a root object."""

    _objects: dict[str, Any]
    _root: Any
    _pending: list[tuple[str, Any]]

    def __init__(self, root: Any = None):
        object.__setattr__(self, "_objects", {})
        object.__setattr__(self, "_root", root)
        object.__setattr__(self, "_pending", [])

    def __getattr__(self, name: str) -> Any:
        objects = self.__dict__.get("_objects", {})
        if name in objects:
            return objects[name]
        raise AttributeError(f"'Checkpoint' object has no attribute {name!r} (it holds: {sorted(objects)})")

    def __delattr__(self, name: str) -> None:
        if name in self._objects:
            del self._objects[name]
        else:
            object.__delattr__(self, name)

