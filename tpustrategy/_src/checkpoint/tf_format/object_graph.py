"""The object graph of a TensorFlow checkpoint, and matching it with Python objects.

A ``tf.train.Checkpoint`` stores, under the key
``_CHECKPOINTABLE_OBJECT_GRAPH``, a ``TrackableObjectGraph``: node 0 is the
root checkpoint, each node lists its children by local name (an attribute
name, a list index, a dict key) and the values saved for it (attribute
``VARIABLE_VALUE`` under a checkpoint key such as
``net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE``: the names on the first path
a breadth-first walk found). Restoring follows the edges, not the keys:
a child named ``n`` of a node matched to object ``o`` is matched to
``o``'s attribute ``n`` (or item ``n`` of a list or dict), so the same
architecture built again finds its values however its keys were spelled —
Keras 3's ``model/_functional/_operations/1/_kernel`` included.
"""

from __future__ import annotations

import collections
from typing import Any

from tpustrategy._src.checkpoint import recovery
from tpustrategy._src.checkpoint.holder import NamedObjects
from tpustrategy._src.checkpoint.tf_format import wire
from tpustrategy._src.checkpoint.tf_format.bundle import BundleReader

OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
VALUE = "VARIABLE_VALUE"


def read_object_graph(reader: BundleReader, api: str) -> list[wire.TrackableObject]:
    """The decoded object graph of a bundle.

    Raises:
      ValueError: a name-based (``tf.compat.v1.train.Saver``) checkpoint without one.
      tps.errors.DataLossError: one that does not parse.
    """
    from tpustrategy._src.checkpoint.tf_format.bundle import _damaged

    if OBJECT_GRAPH_KEY not in reader.entries:
        raise ValueError(
            f"{api}: the checkpoint {reader.prefix!r} does not appear to be object-based (saved with "
            f"TF2): it has no {OBJECT_GRAPH_KEY!r} key; it was likely written by TF1's name-based "
            "Saver.\nFix: read its values by name with tps.train.load_checkpoint(path).get_tensor(name).")
    try:
        nodes = wire.decode_object_graph(reader.get(OBJECT_GRAPH_KEY).item())
    except wire.WireError as e:
        raise _damaged(reader.index_path, f"the object graph does not parse ({e})", api) from None
    for node in nodes:
        for _, child in node.children:
            if not 0 <= child < len(nodes):
                raise _damaged(reader.index_path, f"the object graph names node {child} of {len(nodes)}", api)
    if not nodes:
        raise _damaged(reader.index_path, "the object graph has no root node", api)
    return nodes


def child_of(obj: Any, name: str) -> Any:
    """The Python object at edge ``name`` of ``obj`` (None when it has none)."""
    if isinstance(obj, NamedObjects):  # a Checkpoint: its named objects, then its root's attributes
        if name in obj._objects:
            return obj._objects[name]
        root = obj._root
        return None if root is None else child_of(root, name)
    if isinstance(obj, dict):
        if name in obj:
            return obj[name]
        return obj.get(int(name)) if name.lstrip("-").isdigit() else None
    if isinstance(obj, (list, tuple)):
        if name.isdigit() and int(name) < len(obj):
            return obj[int(name)]
        return None
    if isinstance(obj, (str, bytes, int, float, bool)) or obj is None:
        return None
    attrs = getattr(obj, "__dict__", None)
    return attrs.get(name) if attrs is not None else None


def match(nodes: list[wire.TrackableObject], root: Any, start: int = 0) -> dict[int, Any]:
    """Node id -> the Python object its edges lead to from ``root`` (breadth first, first wins).

    ``root`` stands for node ``start`` (the root, 0, unless a subgraph is matched).
    """
    found: dict[int, Any] = {start: root}
    queue = collections.deque([start])
    while queue:
        node_id = queue.popleft()
        obj = found[node_id]
        for name, child_id in nodes[node_id].children:
            if child_id in found:
                continue
            child = child_of(obj, name)
            if child is None:
                continue
            found[child_id] = child
            queue.append(child_id)
    return found


def node_at(nodes: list[wire.TrackableObject], names: list[str]) -> int | None:
    """The node the edges ``names`` lead to from the root, or None."""
    node = 0
    for name in names:
        child = dict(nodes[node].children).get(name)
        if child is None:
            return None
        node = child
    return node


def node_paths(nodes: list[wire.TrackableObject]) -> dict[int, str]:
    """Node id -> its first breadth-first path (``"net/l1"``; the root is ``"(root)"``)."""
    paths = {0: ""}
    queue = collections.deque([0])
    while queue:
        node_id = queue.popleft()
        for name, child in nodes[node_id].children:
            if child not in paths:
                paths[child] = f"{paths[node_id]}/{name}" if paths[node_id] else name
                queue.append(child)
    return {k: v or "(root)" for k, v in paths.items()}


class CheckpointView:
    """A read-only view of a TensorFlow checkpoint's object graph (``tf.train.CheckpointView``).

    Args:
      save_path: the checkpoint (``".../ckpt-3"``, without ``.index``).

    Example:
      >>> view = tps.train.CheckpointView("/tmp/ckpts/ckpt-1")
      >>> view.children(0)                 # {'net': 1, 'save_counter': 2}
      >>> view.match(tps.train.Checkpoint(net=net))   # {0: ckpt, 1: net, ...}

    Raises:
      ValueError: the checkpoint has no object graph (TF1's name-based Saver).
    """

    def __init__(self, save_path: Any):
        api = "tps.train.CheckpointView"
        prefix = recovery.resolve_checkpoint(save_path, api)
        reader = BundleReader(prefix, api)
        self._nodes = read_object_graph(reader, api)

    def children(self, node_id: int) -> dict[str, int]:
        """The children of node ``node_id``: local name -> node id."""
        if not isinstance(node_id, int) or not 0 <= node_id < len(self._nodes):
            raise ValueError(
                f"CheckpointView.children: node_id must be an int in [0, {len(self._nodes)}); "
                f"received {node_id!r}.\nFix: start from the root, node 0.")
        return {name: child for name, child in self._nodes[node_id].children}

    def descendants(self) -> list[int]:
        """Every node id reachable from the root, breadth first (the root, 0, first)."""
        return list(node_paths(self._nodes))

    def match(self, obj: Any) -> dict[int, Any]:
        """Node id -> the object of ``obj``'s graph that the checkpoint's edges lead to."""
        return match(self._nodes, obj)

    def __repr__(self) -> str:
        return f"<tps.train.CheckpointView: {len(self._nodes)} nodes>"
