"""``Checkpoint.restore`` of a TensorFlow-written checkpoint.

The checkpoint's object graph is matched with this Checkpoint's objects by
following its edges (`object_graph.match`), as TensorFlow does; every node
that holds a ``VARIABLE_VALUE`` and found an object gets its value:

- a ``tps.Variable`` (mirrored, sync-on-read, plain) or a Keras variable:
  the saved value, placed on the variable's devices (any replica count; a
  sync-on-read variable's saved value is its aggregate, spread as our own
  checkpoints do: SUM on the first replica, else on every replica);
- a NumPy array (written in place), a ``jax.Array`` or a Python number in a
  dict, list, attribute or this Checkpoint: replaced by the saved value;
- ``save_counter``: the Checkpoint's counter;
- a built ``tps.optimizers.Adam`` where a Keras 3 Adam was saved: its optax
  ``mu`` / ``nu`` / ``count`` get Keras's ``_momentums`` / ``_velocities`` /
  ``_iterations`` (the same quantities; other optimizers match by attribute
  name only, ``_iterations``).

The saved dtype must be the variable's, or its 64-bit form when JAX's
64-bit types are off (int64 -> int32, float64 -> float32, ...: the value is
narrowed, as a JAX array of that dtype would be). Everything is read and
checked before anything changes. Values that found no object wait for it
(`TFPending`, TensorFlow's deferred restoration): a variable attached later
at their path (``model.dense.kernel = v``), a model built after ``restore``,
an item appended to a restored list, takes its saved value when it is set.
The returned status has TensorFlow's
semantics: ``assert_consumed`` fails while a saved value found no object or
an object of this Checkpoint found no value; ``assert_existing_objects_matched``
only checks the objects; ``expect_partial`` marks a partial restore as meant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from tpustrategy._src.checkpoint import adapter, deferred
from tpustrategy._src.checkpoint.graph import Graph
from tpustrategy._src.checkpoint.holder import NamedObjects
from tpustrategy._src.checkpoint.status import CheckpointLoadStatus
from tpustrategy._src.checkpoint.tf_format import object_graph
from tpustrategy._src.checkpoint.tf_format.bundle import BundleReader

_NARROW = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32),
           np.dtype(np.float64): np.dtype(np.float32), np.dtype(np.complex128): np.dtype(np.complex64)}


def is_tf_checkpoint(path: str) -> bool:
    """Whether ``path`` is a TensorFlow checkpoint prefix (``path.index`` exists)."""
    import os

    return os.path.isfile(path + ".index")


def _face(x: Any) -> Any:
    """The ``tps.Variable`` to restore through (a Keras variable's companion), or None."""
    if adapter.is_variable(x):
        return x
    if adapter.is_keras_variable(x):
        from tpustrategy._src.keras import variables as variables_lib

        return variables_lib.checkpoint_state(x)
    return None


def _fit(value: np.ndarray, dtype: np.dtype, shape: tuple[int, ...], key: str, api: str) -> np.ndarray:
    if tuple(value.shape) != tuple(shape):
        raise ValueError(
            f"{api}: {key!r} was saved with shape {tuple(value.shape)}, but the object restored into "
            f"has shape {tuple(shape)}.\nFix: build the model with the same configuration as when it "
            "was saved, or leave this object out of the Checkpoint you restore into.")
    if value.dtype == dtype:
        return value
    if _NARROW.get(value.dtype) == dtype:
        if dtype.kind in "iu" and value.size:
            info = np.iinfo(dtype)
            if value.min() < info.min or value.max() > info.max:
                raise ValueError(
                    f"{api}: {key!r} holds {value.dtype} values outside {dtype} (from {value.min()} to "
                    f"{value.max()}), and 64-bit types are off, so the object restored into is {dtype}."
                    "\nFix: jax.config.update('jax_enable_x64', True) before creating the objects, "
                    "or leave this object out.")
        with np.errstate(over="ignore"):  # float64 beyond float32's range becomes +-inf, as a cast does
            return value.astype(dtype)
    raise ValueError(
        f"{api}: {key!r} was saved with dtype {value.dtype}, but the object restored into has dtype "
        f"{dtype}.\nFix: create it with dtype {value.dtype} (with 64-bit types off, its 32-bit form).")


def _putter(parent: Any, name: str) -> Callable[[Any], None] | None:
    if isinstance(parent, NamedObjects):  # a Checkpoint: its named objects, then its root's attributes
        if name in parent._objects:
            return lambda v: parent._objects.__setitem__(name, v)
        return None if parent._root is None else _putter(parent._root, name)
    if isinstance(parent, dict):
        key = name if name in parent else int(name)
        return lambda v: parent.__setitem__(key, v)
    if isinstance(parent, list):
        return lambda v: parent.__setitem__(int(name), v)
    if hasattr(parent, "__dict__") and not isinstance(parent, tuple):
        return lambda v: setattr(parent, name, v)
    return None


def _parents(nodes: list[Any], found: dict[int, Any]) -> dict[int, tuple[Any, str]]:
    out: dict[int, tuple[Any, str]] = {}
    for node_id in found:
        for name, child in nodes[node_id].children:
            if child in found and child not in out and child != 0:
                out[child] = (found[node_id], name)
    return out


def _underlying(x: Any) -> int:
    """The identity of the variable ``x`` stands for (a Keras variable's companion: the Keras variable)."""
    return id(getattr(x, "keras_variable", x))


def restore(ckpt: NamedObjects, prefix: str, api: str, *, make_graph: Callable[[], Graph],
            set_save_counter: Callable[[int], None]) -> CheckpointLoadStatus:
    """Restores the TensorFlow checkpoint ``prefix`` into ``ckpt`` (module docstring).

    Args:
      ckpt: the Checkpoint restored into (its objects are matched with the saved graph).
      prefix, api: the checkpoint and the API restoring it (for errors).
      make_graph: ``ckpt``'s flattened objects (`graph.Graph`), built after the values
        are in place: its variables that found no value are the status's ``missing``.
      set_save_counter: stores the saved ``save_counter`` into ``ckpt``.
    """
    reader = BundleReader(prefix, api)
    nodes = object_graph.read_object_graph(reader, api)
    found = object_graph.match(nodes, ckpt)
    parents = _parents(nodes, found)
    extra = _keras_adam_into_optax(nodes, found)
    root_children = dict(nodes[0].children)
    counter_node = root_children.get("save_counter")
    actions: list[Callable[[], None]] = []
    matched: list[str] = []
    matched_ids: set[int] = set()
    unused: list[str] = []
    for node_id, node in enumerate(nodes):
        for attr in node.attributes:
            key = attr.checkpoint_key
            if node_id == counter_node and node_id not in found and attr.name == object_graph.VALUE:
                count = int(reader.get(key))
                actions.append(lambda count=count: set_save_counter(count))
                matched.append(key)
                continue
            obj = found.get(node_id)
            if obj is None or attr.name != object_graph.VALUE or key not in reader.entries:
                unused.append(key)
                continue
            action = _plan(obj, parents.get(node_id), reader.get(key), key, api)
            if action is None:
                unused.append(key)
                continue
            actions.append(action)
            matched.append(key)
            matched_ids.add(_underlying(obj))
    for count_var, node_id in extra:  # an optax Adam's step count: the Keras optimizer's iterations
        key = nodes[node_id].attributes[0].checkpoint_key if nodes[node_id].attributes else None
        if key in reader.entries:
            actions.append(_plan(count_var, None, reader.get(key), key, api))
            matched_ids.add(_underlying(count_var))
    for action in actions:
        action()
    graph = make_graph()
    missing = [key for key, entry in graph.entries.items()
               if entry.kind == "variable" and _underlying(entry.obj) not in matched_ids]
    status = CheckpointLoadStatus(prefix, matched, unused, missing)
    paths = object_graph.node_paths(nodes)
    waiting = {attr.checkpoint_key: {"node": node_id, "aliases": [paths[node_id]]}
               for node_id, node in enumerate(nodes) for attr in node.attributes
               if attr.checkpoint_key in set(unused)}
    status._pending = deferred.begin(ckpt, graph, TFPending(prefix, nodes, waiting, api) if waiting else None)
    return status


def _segments(key: str) -> list[str]:
    """A graph key's edge names (``graph._segment`` escapes ``/`` and ``%``)."""
    return [part.replace("%2F", "/").replace("%25", "%") for part in key.split("/")] if key else []


class TFPending(deferred.Pending):
    """The values of a TensorFlow checkpoint still waiting for their objects (deferred restoration).

    ``remaining`` maps each checkpoint key to its node; an object set later at
    a path of the object graph is matched with the subgraph below that node,
    as `restore` matches the whole graph, and gets the values waiting there.
    """

    def __init__(self, prefix: str, nodes: list[Any], remaining: dict[str, Any], api: str):
        super().__init__(prefix, {}, remaining, api)
        self._nodes = nodes

    def restore_new(self, make_graph: Callable[[], Graph], key: str, value: Any,
                    put: Callable[[Any], None]) -> tuple[list[str], Graph]:
        start = object_graph.node_at(self._nodes, _segments(key))
        if start is None:
            return [], make_graph()
        found = object_graph.match(self._nodes, value, start)
        parents = _parents(self._nodes, found)
        reader: BundleReader | None = None
        actions: list[Callable[[], None]] = []
        restored: list[str] = []
        for node_id, obj in found.items():
            for attr in self._nodes[node_id].attributes:
                ck = attr.checkpoint_key
                if ck not in self.remaining or attr.name != object_graph.VALUE:
                    continue
                reader = reader or BundleReader(self.path, self.api)
                if ck not in reader.entries:
                    continue
                action = _plan(obj, parents.get(node_id), reader.get(ck), ck, self.api,
                               put=put if node_id == start else None)
                if action is not None:
                    actions.append(action)
                    restored.append(ck)
        for action in actions:  # every value read and checked first
            action()
        return restored, make_graph()


def _keras_adam_into_optax(nodes: list[Any], found: dict[int, Any]) -> list[tuple[Any, int]]:
    """Matches a Keras 3 Adam's slots with a built ``tps.optimizers.Adam``'s optax state.

    Keras's ``_momentums/i`` and ``_velocities/i`` are optax's ``mu`` and ``nu``
    of the i-th variable (the same update rule), ``_trainable_variables/i`` the
    i-th variable it updates; its ``_iterations`` is also optax's ``count``. Adds the slot nodes to ``found``; returns the count
    variables with the ``_iterations`` node to restore them from.
    """
    from tpustrategy._src.optimizers.optimizer import Optimizer as base
    out: list[tuple[Any, int]] = []
    for node_id, obj in list(found.items()):
        if not isinstance(obj, base) or not obj.built:
            continue
        edges = dict(nodes[node_id].children)
        if not {"_momentums", "_velocities", "_iterations"} <= set(edges):
            continue
        slots = obj.variables[1:]
        updated = list(vars(obj).get(adapter.VAR_LIST) or ())  # the variables it was built for
        for edge, part in (("_momentums", "/mu/"), ("_velocities", "/nu/"), ("_trainable_variables", None)):
            if edge not in edges:
                continue
            saved = sorted((int(n), c) for n, c in nodes[edges[edge]].children if n.isdigit())
            mine = updated if part is None else [v for v in slots if part in str(v.name)]
            if len(mine) == len(saved):
                for (_, child), var in zip(saved, mine):
                    found.setdefault(child, var)
        out += [(v, edges["_iterations"]) for v in slots if str(v.name).split(":")[0].endswith("/count")]
    return out


def _plan(obj: Any, parent: tuple[Any, str] | None, value: np.ndarray, key: str,
          api: str, put: Callable[[Any], None] | None = None) -> Callable[[], None] | None:
    """How to put ``value`` into ``obj`` (checked now, done later), or None if it cannot hold one.

    ``put`` replaces ``obj`` in its place (else its ``parent`` edge is used).
    """
    given = put
    face = _face(obj)
    if face is not None:
        fitted = _fit(value, np.dtype(face.dtype), tuple(face.shape), key, api)
        return lambda: adapter.assign_host_value(face, fitted)
    if isinstance(obj, np.ndarray):
        fitted = _fit(value, obj.dtype, obj.shape, key, api)
        if obj.flags.writeable:
            return lambda: np.copyto(obj, fitted)
    elif isinstance(obj, jax.Array):
        fitted = _fit(value, np.dtype(obj.dtype), tuple(obj.shape), key, api)
        sharding = obj.sharding
        put = given or (None if parent is None else _putter(*parent))
        return None if put is None else (lambda: put(jax.device_put(fitted, sharding)))
    elif isinstance(obj, (bool, int, float, str, np.generic)):
        put = given or (None if parent is None else _putter(*parent))
        if put is None:
            return None
        if isinstance(obj, str):
            scalar: Any = value.item()
            scalar = scalar.decode("utf-8", errors="surrogateescape") if isinstance(scalar, bytes) else str(scalar)
        else:
            scalar = type(obj)(value.item()) if not isinstance(obj, np.generic) else value.astype(obj.dtype)[()]
        return lambda: put(scalar)
    else:
        return None
    put = given or (None if parent is None else _putter(*parent))
    return None if put is None else (lambda: put(fitted))
