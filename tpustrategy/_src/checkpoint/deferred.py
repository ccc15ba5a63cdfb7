"""Deferred restoration: saved values wait for the objects created after ``restore``.

TensorFlow's object-graph checkpoints (TensorFlow's own files, through
``tf_format.restore.TFPending``, and ours) restore a value as soon as an object
appears at its path, even after ``restore`` returned ("delayed restoration"):
a variable attached later (``fake_layer.kernel = v``), an item appended to a
restored list or set in a restored dict, the variables a lazily built model
creates on its first call. Here ``restore`` keeps the values that found no
object in a `Pending` record and watches the places under which they wait:

- a ``Checkpoint`` (its ``__setattr__`` asks this module);
- a plain Python object (a model, a layer): its class is swapped for a
  subclass whose ``__setattr__`` asks this module, and swapped back once
  nothing waits under it (``pickle``/``copy`` see the original class);
- a list or dict: replaced by a `TrackedList` / `TrackedDict` (subclasses of
  ``list``/``dict``) whose ``append``/``extend``/``__setitem__``/``update``
  restore the new items.

A value is restored once; the load status (``assert_consumed``) sees what is
still waiting. If values are still waiting when the record is dropped, a
warning lists them unless ``expect_partial()`` was called, as in TensorFlow.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import jax

from tpustrategy._src.checkpoint import reader
from tpustrategy._src.checkpoint.graph import Graph, _segment

_LOG = logging.getLogger("tpustrategy")
_ATTR = "__tps_deferred__"


class Pending:
    """The saved values of one restore that have not found their objects yet.

    Attributes:
      path: the checkpoint.
      manifest: its manifest (read and checked once, by ``restore``).
      remaining: saved key -> record, for the values still waiting.
    """

    def __init__(self, path: str, manifest: dict[str, Any], remaining: dict[str, Any], api: str):
        self.path, self.manifest, self.api = path, manifest, api
        self.remaining = dict(remaining)
        self._flags = {"partial": False}
        weakref.finalize(self, _warn_unrestored, path, self.remaining, self._flags)

    def expect_partial(self) -> None:
        self._flags["partial"] = True

    def cancel(self) -> None:
        """A newer restore into the same Checkpoint replaces this one."""
        self.remaining.clear()

    def restore_new(self, make_graph: Callable[[], Graph], key: str, value: Any,
                    put: Callable[[Any], None]) -> tuple[list[str], Graph]:
        """Restores what waits for ``value``, just set at ``key``; returns the keys restored and its graph."""
        status, _, graph = reader.restore(make_graph, self.path, self.api, manifest=self.manifest,
                                          saved=self.remaining)
        left = set(status.unused)
        return [k for k in self.remaining if k not in left], graph

    def waits_under(self, key: str) -> bool:
        """Whether a value waits at ``key`` or below it."""
        if not key:
            return bool(self.remaining)
        below = key + "/"
        for saved_key, meta in self.remaining.items():
            for name in (saved_key, *meta.get("aliases", ())):
                if name == key or name.startswith(below):
                    return True
        return False


def _warn_unrestored(path: str, remaining: dict[str, Any], flags: dict[str, bool]) -> None:
    if remaining and not flags["partial"]:
        listing = "\n".join(f"  (root).{k.replace('/', '.')}" for k in list(remaining)[:20])
        _LOG.warning(
            "A restore of checkpoint %s ended with values that no object claimed; to silence this "
            "warning, call status.expect_partial() on the status that Checkpoint.restore returned. "
            "Values in the checkpoint that could not be found in the restored object:\n%s", path, listing)


Watchers = list[tuple[str, Pending]]


def _child(prefix: str, name: Any) -> str:
    return f"{prefix}/{_segment(name)}" if prefix else _segment(name)


def start(root: Any, graph: Graph, unused: Iterable[str], manifest: dict[str, Any], path: str,
          api: str) -> Pending | None:
    """After ``root.restore``: keeps the unused values waiting; returns the record (or None)."""
    saved = manifest["objects"]
    remaining = {k: saved[k] for k in unused}
    return begin(root, graph, Pending(path, manifest, remaining, api) if remaining else None)


def begin(root: Any, graph: Graph, pending: Pending | None) -> Pending | None:
    """Replaces ``root``'s waiting values by ``pending``'s and watches where they wait."""
    for _, old in root._pending:
        old.cancel()
    root._pending.clear()
    if pending is None or not pending.remaining:
        return None
    root._pending.append(("", pending))
    if root._root is not None:
        _watch_object(root._root, "", pending)
    _watch(graph, pending)
    return pending


def _watch(graph: Graph, pending: Pending) -> None:
    """Watches every place of ``graph`` under which values of ``pending`` wait."""
    for key, ckpt in graph.checkpoints.items():
        if pending.waits_under(key) and all(p is not pending for _, p in ckpt._pending):
            ckpt._pending.append((key, pending))
    for key, obj in graph.shells.items():
        if pending.waits_under(key):
            _watch_object(obj, key, pending)
    for key, (container, put) in graph.containers.items():
        if pending.waits_under(key):
            tracked = _track(container, key, pending)
            if tracked is not container:
                put(tracked)


def restore_into(prefix: str, name: Any, value: Any, put: Callable[[Any], None],
                 watchers: Watchers, strict: bool) -> Any:
    """Restores the values waiting for ``value``, just set as ``name`` under ``prefix``.

    Returns the value to keep in its place: a list or dict under which values
    still wait comes back as a `TrackedList` / `TrackedDict`.
    """
    holder = {"value": value}

    def put_here(new: Any) -> None:
        holder["value"] = new
        put(new)

    for watched, pending in list(watchers):
        if watched != prefix or not pending.waits_under(_child(prefix, name)):
            continue
        def make_graph(pending: Pending = pending) -> Graph:
            return Graph([(str(name), holder["value"], put_here, strict)], pending.api,
                         prefix=prefix, restoring=True)

        key = _child(prefix, name)
        restored, graph = pending.restore_new(make_graph, key, holder["value"], put_here)
        for done in restored:
            pending.remaining.pop(done, None)
        current = holder["value"]
        if isinstance(current, (list, dict)) and pending.waits_under(key):
            tracked = _track(current, key, pending)
            if tracked is not current:
                put_here(tracked)
        _watch(graph, pending)
    return holder["value"]


def prune(watchers: Watchers) -> None:
    """Drops the watchers under which nothing waits any more."""
    watchers[:] = [(k, p) for k, p in watchers if p.waits_under(k)]


# Plain objects -------------------------------------------------------------------------------
_HOOKED: dict[type, type] = {}


def _unpickle(cls: type) -> Any:
    return cls.__new__(cls)


def _hooked_class(cls: type) -> type | None:
    if getattr(cls, "__tps_original__", None) is not None:
        return cls
    if cls in _HOOKED:
        return _HOOKED[cls]

    def __setattr__(self: Any, name: str, value: Any) -> None:
        cls.__setattr__(self, name, value)
        watchers = self.__dict__.get(_ATTR)
        if watchers and not name.startswith("__"):
            for prefix in {k for k, _ in watchers}:
                restore_into(prefix, name, value, lambda v: cls.__setattr__(self, name, v),
                             watchers, strict=False)
            prune(watchers)
            if not watchers:
                _unwatch(self, cls)

    def __reduce_ex__(self: Any, protocol: Any) -> Any:
        state = {k: v for k, v in self.__dict__.items() if k != _ATTR}
        return (_unpickle, (cls,), state)

    try:
        sub = type(cls)(cls.__name__, (cls,), {
            "__setattr__": __setattr__, "__reduce_ex__": __reduce_ex__, "__module__": cls.__module__,
            "__qualname__": cls.__qualname__, "__tps_original__": cls})
    except Exception:  # a metaclass that refuses subclasses: no deferred restoration for it
        sub = None
    _HOOKED[cls] = sub
    return sub


def _watch_object(obj: Any, key: str, pending: Pending) -> None:
    watchers = obj.__dict__.get(_ATTR)
    if watchers is None:
        original = type(obj)
        sub = _hooked_class(original)
        if sub is None:
            return
        try:
            object.__setattr__(obj, "__class__", sub)
        except TypeError:
            return
        watchers = []
        obj.__dict__[_ATTR] = watchers
    if (key, pending) not in [(k, p) for k, p in watchers]:
        watchers.append((key, pending))


def _unwatch(obj: Any, original: type) -> None:
    obj.__dict__.pop(_ATTR, None)
    object.__setattr__(obj, "__class__", original)


# Lists and dicts -----------------------------------------------------------------------------
class TrackedList(list):
    """A list of a restored checkpoint whose new items get their saved values (TF's ListWrapper)."""

    _tps_watchers: Watchers

    def _restore(self, index: int) -> None:
        watchers = getattr(self, "_tps_watchers", None)
        if not watchers:
            return
        for prefix in {k for k, _ in watchers}:
            restore_into(prefix, index, self[index], lambda v: list.__setitem__(self, index, v),
                         watchers, strict=True)
        prune(watchers)

    def append(self, item: Any) -> None:
        list.append(self, item)
        self._restore(len(self) - 1)

    def extend(self, items: Iterable[Any]) -> None:
        start = len(self)
        list.extend(self, items)
        for i in range(start, len(self)):
            self._restore(i)

    def __iadd__(self, items: Iterable[Any]) -> TrackedList:  # type: ignore[override,misc]
        self.extend(items)
        return self

    def insert(self, index: Any, item: Any) -> None:
        n = len(self)
        at = min(index if index >= 0 else max(n + index, 0), n)
        list.insert(self, index, item)
        self._restore(at)

    def __setitem__(self, index: Any, item: Any) -> None:
        list.__setitem__(self, index, item)
        if isinstance(index, int):
            self._restore(index % len(self))

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (list, (list(self),))


class TrackedDict(dict):
    """A dict of a restored checkpoint whose new items get their saved values."""

    _tps_watchers: Watchers

    def _restore(self, key: Any) -> None:
        watchers = getattr(self, "_tps_watchers", None)
        if not watchers:
            return
        for prefix in {k for k, _ in watchers}:
            restore_into(prefix, key, self[key], lambda v: dict.__setitem__(self, key, v),
                         watchers, strict=True)
        prune(watchers)

    def __setitem__(self, key: Any, value: Any) -> None:
        dict.__setitem__(self, key, value)
        self._restore(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        new = dict(*args, **kwargs)
        for key, value in new.items():
            self[key] = value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (dict, (dict(self),))


def _track(container: Any, key: str, pending: Pending) -> Any:
    if isinstance(container, (TrackedList, TrackedDict)):
        tracked = container
    elif type(container) is list:
        tracked = TrackedList(container)
    elif type(container) is dict:
        tracked = TrackedDict(container)
    else:
        return container
    watchers = tracked.__dict__.setdefault("_tps_watchers", [])
    if (key, pending) not in watchers:
        watchers.append((key, pending))
    return tracked


jax.tree_util.register_pytree_with_keys(
    TrackedList,
    lambda xs: ([(jax.tree_util.SequenceKey(i), x) for i, x in enumerate(xs)], None),
    lambda _, children: TrackedList(children),
    flatten_func=lambda xs: (list(xs), None),
)
jax.tree_util.register_pytree_with_keys(
    TrackedDict,
    lambda d: ([(jax.tree_util.DictKey(k), d[k]) for k in sorted(d)], tuple(sorted(d))),
    lambda keys, children: TrackedDict(zip(keys, children)),
    flatten_func=lambda d: ([d[k] for k in sorted(d)], tuple(sorted(d))),
)
