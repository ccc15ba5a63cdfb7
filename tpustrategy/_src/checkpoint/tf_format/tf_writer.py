"""Writing a Checkpoint in TensorFlow's format (``write(path, format="tensorflow")``).

The objects are walked as TensorFlow's ``ObjectGraphView`` walks trackables:
breadth first from the root, each object once (a variable shared by two
objects is one node with two incoming edges), children in order — the
Checkpoint's by name, then ``save_counter``; an object's attributes in the
order they were set; a dict's items; a list's indices. Each node's first
path names its key (``net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE``; ``.`` and
``/`` in names escaped as ``..`` and ``.S``). What becomes a node:

- ``tps.Variable``s (their value; a sync-on-read one's aggregate, as TF),
  Keras variables, NumPy/JAX arrays and Python numbers and strings: a value;
- nested Checkpoints, dicts, lists, tuples and objects whose attributes hold
  values (a model, a layer, an optimizer): a node with children. For Keras
  layers and optimizers, Keras's own bookkeeping (``_tracker``, ``_layers``,
  ``_inbound_nodes``, metrics, seed generators) is left out, as TensorFlow's
  Keras leaves it out, so TensorFlow restores into the same Keras 3
  architecture with ``assert_consumed()``.

Data are written in node order with the object graph last and the index
sorted by key, as TensorFlow's ``BundleWriter`` does: for the same variables
(same names) the files are byte-identical to TensorFlow's. Counters that
TensorFlow keeps in ``int64`` (``save_counter``, an optimizer's
``iterations``) are written as ``int64`` even when JAX holds them in 32 bits.
"""

from __future__ import annotations

import collections
import os
from typing import Any

import numpy as np

from tpustrategy._src.checkpoint import adapter, multihost
from tpustrategy._src.checkpoint.holder import NamedObjects
from tpustrategy._src.checkpoint.tf_format import bundle, object_graph, wire

_KERAS_SKIP = frozenset({
    "_tracker", "_layers", "_inbound_nodes", "_outbound_nodes", "_metrics", "_seed_generators",
    "_non_trainable_variables", "_loss_tracker", "_compile_metrics", "_compile_loss", "_metrics_names",
    "_tps_strategy", "_parent_path", "_tps_state", "_tps_plain_state", "_layer", "_trainable_variables_indices",
    "_functional_input_layer"})
_FOREIGN = ("jax", "jaxlib", "numpy", "builtins", "threading", "functools", "typing", "types", "abc",
            "weakref", "logging", "tpustrategy._src.strategy", "tpustrategy._src.devices",
            "tpustrategy._src.cluster", "optax")
_INT64_NAMES = ("iteration", "iterations", "_iterations")


def _escape(name: str) -> str:
    return name.replace(".", "..").replace("/", ".S")


def _keras_kind(x: Any) -> str | None:
    if "keras" not in __import__("sys").modules:
        return None
    import keras

    if isinstance(x, keras.metrics.Metric):
        return "metric"
    if isinstance(x, keras.layers.Layer):
        return "layer"
    if isinstance(x, keras.optimizers.Optimizer):
        return "optimizer"
    return None


def _is_value(x: Any) -> bool:
    return (adapter.is_variable(x) or adapter.is_keras_variable(x) or isinstance(x, (np.ndarray, np.generic))
            or type(x).__module__.startswith(("jax", "jaxlib")) and hasattr(x, "shape")
            or isinstance(x, (bool, int, float, str, bytes)))


class _Walk:
    """The nodes of an object graph, breadth first (see the module docstring)."""

    def __init__(self, root: Any, save_counter: int | None):
        self.nodes: list[wire.TrackableObject] = []
        self.objects: list[Any] = []
        self.values: dict[int, np.ndarray] = {}
        self._ids: dict[int, int] = {}
        self._holds: dict[int, bool] = {}
        self._pure: set[int] = set()  # dicts/lists given to a Checkpoint (their Python values count)
        self.paths: list[str] = []
        self._save_counter = save_counter
        self._root = root
        self._walk()

    def _node(self, obj: Any, path: str) -> tuple[int, bool]:
        key = id(obj)
        if key in self._ids:
            return self._ids[key], False
        index = len(self.nodes)
        self._ids[key] = index
        self.nodes.append(wire.TrackableObject())
        self.objects.append(obj)
        self.paths.append(path)
        return index, True

    def children(self, obj: Any) -> list[tuple[str, Any]]:
        """The named children of ``obj`` that hold state, in TensorFlow's order.

        Python numbers and strings are values only when given to a Checkpoint
        directly or in dicts/lists given to it (an object's plain attributes
        and the lists inside a Keras layer are its configuration).
        """
        if isinstance(obj, _Counter):
            return []
        if isinstance(obj, NamedObjects):  # a Checkpoint
            items = list(obj._objects.items())
            if obj._root is not None:
                items = [(k, v) for k, v in self._attributes(obj._root) if k not in obj._objects] + items
            items.sort(key=lambda kv: kv[0])
            if obj is self._root and self._save_counter is not None:
                items.append(("save_counter", _Counter(self._save_counter)))
            pure = True
        elif isinstance(obj, dict):
            items, pure = [(str(k), v) for k, v in obj.items()], id(obj) in self._pure
        elif isinstance(obj, (list, tuple)):
            items, pure = [(str(i), v) for i, v in enumerate(obj)], id(obj) in self._pure
        else:
            items, pure = self._attributes(obj), False
        out = []
        for name, value in items:
            if isinstance(value, (bool, int, float, str, bytes)) and not pure:
                continue
            if pure and isinstance(value, (dict, list, tuple)):
                self._pure.add(id(value))
            if self._holds_state(value):
                out.append((name, value))
        return out

    def _attributes(self, obj: Any) -> list[tuple[str, Any]]:
        kind = _keras_kind(obj)
        if kind == "metric":
            return []
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict):
            return []
        out = []
        for name, value in attrs.items():
            if name.startswith("__") or (kind is not None and name in _KERAS_SKIP) or (
                    kind == "layer" and name == "_trainable_variables"):
                continue
            if kind is not None and not (_is_value(value) or _keras_kind(value) in ("layer", "optimizer")
                                         or isinstance(value, (list, tuple, dict))):
                continue  # Keras's helpers (tracked sets, initializers, nodes) hold no state of their own
            out.append((name, value))
        return out

    def _holds_state(self, x: Any, depth: int = 0) -> bool:
        if isinstance(x, _Counter) or _is_value(x):
            return True
        if x is None or depth > 16 or isinstance(x, type) or not hasattr(x, "__dict__") and not isinstance(
                x, (dict, list, tuple)):
            return False
        key = id(x)
        if key in self._holds:
            return self._holds[key]
        self._holds[key] = False  # cycles hold nothing more
        module = type(x).__module__ or ""
        if (not isinstance(x, (dict, list, tuple)) and any(module == m or module.startswith(m + ".") for m in _FOREIGN)
                or adapter.is_strategy(x) or adapter.is_dataset(x) or adapter.is_iterator(x)):
            return False
        result = any(self._holds_state(v, depth + 1) for _, v in self.children(x))
        self._holds[key] = result
        return result

    def _walk(self) -> None:
        root_id, _ = self._node(self._root, "")
        queue = collections.deque([root_id])
        while queue:
            index = queue.popleft()
            obj = self.objects[index]
            if _is_value(obj) or isinstance(obj, _Counter):
                continue
            for name, child in self.children(obj):
                path = f"{self.paths[index]}/{_escape(name)}" if self.paths[index] else _escape(name)
                child_id, new = self._node(child, path)
                self.nodes[index].children.append((name, child_id))
                if new:
                    queue.append(child_id)

    def tensors(self) -> list[tuple[str, np.ndarray, int]]:
        """``(key, value, node)`` of every value node, in node order."""
        out = []
        for index, obj in enumerate(self.objects):
            if not (_is_value(obj) or isinstance(obj, _Counter)):
                continue
            key = f"{self.paths[index]}/.ATTRIBUTES/{object_graph.VALUE}"
            value, full_name = _value_of(obj, self.paths[index])
            self.nodes[index].attributes.append(wire.SerializedTensor(object_graph.VALUE, full_name, key))
            out.append((key, value, index))
        return out


def _mark_values(nodes: list[wire.TrackableObject]) -> None:
    """``has_checkpoint_values``: whether a node or a node below it holds a value."""
    memo: dict[int, bool] = {}

    def has(index: int, seen: frozenset[int]) -> bool:
        if index not in memo:
            node = nodes[index]
            memo[index] = bool(node.attributes) or any(
                has(child, seen | {index}) for _, child in node.children if child not in seen)
        return memo[index]

    for index, node in enumerate(nodes):
        node.has_checkpoint_values = has(index, frozenset())


class _Counter:
    """``save_counter``: an int64 value node."""

    def __init__(self, value: int):
        self.value = value


def _host(x: Any) -> np.ndarray:
    """``x`` on the host; an array spread over several processes read from this process's copy or gathered."""
    import jax

    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        if x.sharding.is_fully_replicated:
            return np.asarray(x.addressable_shards[0].data)
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def _value_of(obj: Any, path: str) -> tuple[np.ndarray, str]:
    if isinstance(obj, _Counter):
        return np.asarray(obj.value, np.int64), "save_counter"
    last = path.rsplit("/", 1)[-1]
    if adapter.is_variable(obj):
        value = _host(obj.read_value())
        name = str(getattr(obj, "name", "Variable")).removesuffix(":0")
    elif adapter.is_keras_variable(obj):
        value = np.asarray(obj)
        name = str(obj.path)
    else:
        value = _host(obj)
        name = last
    if value.dtype.kind == "U":
        value = np.asarray(value.item().encode("utf-8"), dtype=object)
    elif value.dtype.kind == "S":
        value = np.asarray(value.item(), dtype=object)
    tail = name.rsplit("/", 1)[-1]
    if value.dtype.kind in "iu" and value.ndim == 0 and (last in _INT64_NAMES or tail in _INT64_NAMES):
        value = value.astype(np.int64)  # TensorFlow's optimizers count iterations in int64
    return value, name


def write(ckpt: Any, prefix: str, save_counter: int | None, api: str) -> list[str]:
    """Writes ``ckpt``'s objects as the TensorFlow checkpoint ``prefix``; returns the files written.

    On several processes every process calls it (SPMD) and the result is
    TensorFlow's sharded bundle: process ``k`` of ``n`` writes
    ``prefix.data-0000k-of-0000n`` with every ``n``-th value (in node order,
    the object graph on process 0), then process 0 writes the one
    ``prefix.index`` naming each value's shard, offset, size and CRC32C --
    what TensorFlow's ``MergeBundles`` makes of per-device shards.
    """
    walk = _Walk(ckpt, save_counter)
    tensors = walk.tensors()
    if not tensors:
        raise ValueError(f"{api}: the Checkpoint holds no values to write.\nFix: pass the objects to "
                         "save, e.g. tps.train.Checkpoint(model=model).")
    _mark_values(walk.nodes)
    ordered = {key: value for key, value, _ in tensors}
    ordered[object_graph.OBJECT_GRAPH_KEY] = np.asarray(wire.encode_object_graph(walk.nodes), dtype=object)
    directory = os.path.dirname(prefix)
    count = multihost.process_count()
    if count == 1:
        if directory:
            os.makedirs(directory, exist_ok=True)
        return bundle.write_bundle(prefix, ordered)
    return _write_sharded(prefix, ordered, directory, api)


def _write_sharded(prefix: str, ordered: dict[str, np.ndarray], directory: str, api: str) -> list[str]:
    """`write` on several processes: one data shard each, process 0's index (see `write`)."""
    count, index = multihost.process_count(), multihost.process_index()
    multihost.agree(api, "the checkpoint's name (the last part of its path)",
                    multihost.text_fingerprint(os.path.basename(os.path.abspath(prefix))))
    prefix = multihost.broadcast_text(os.path.abspath(prefix))  # one bundle: the chief's path
    directory = os.path.dirname(prefix)
    keys = list(ordered)
    multihost.agree(api, "the TensorFlow checkpoint's keys (the same objects on every process)",
                    multihost.text_fingerprint("\n".join(keys)))
    graph = len(keys) - 1  # the object graph goes to process 0's shard, as TensorFlow writes it last
    owner = [0 if i == graph else i % count for i in range(len(keys))]
    data_path = bundle.data_filename(prefix, index, count)
    entries: dict[str, wire.BundleEntry] = {}
    error: BaseException | None = None
    try:
        if directory:
            os.makedirs(directory, exist_ok=True)
        data, entries = bundle.encode_shard(
            {k: ordered[k] for i, k in enumerate(keys) if owner[i] == index}, index)
        bundle.put_file(data_path, data)
    except BaseException as e:  # every process must learn of it before process 0 writes the index
        error = e
    multihost.sync(api, "writing its TensorFlow data shard", error)
    placed = np.zeros((len(keys), 3, 4), np.int64)  # 16-bit parts: the all-gather may carry only 32-bit ints
    for i, key in enumerate(keys):
        if key in entries:
            for j, number in enumerate((entries[key].offset, entries[key].size, entries[key].crc32c)):
                placed[i, j] = [(number >> (16 * part)) & 0xFFFF for part in range(4)]
    parts = multihost.allgather(placed.reshape(-1)).reshape(count, len(keys), 3, 4)
    gathered = sum(parts[..., part].astype(np.uint64) << np.uint64(16 * part) for part in range(4))
    if index == 0:
        try:
            merged = {}
            for i, key in enumerate(keys):
                offset, size, crc = (int(x) for x in gathered[owner[i], i])
                value = np.asarray(ordered[key])
                merged[key] = wire.BundleEntry(bundle.dtype_code(value.dtype), list(value.shape), owner[i],
                                               offset, size, crc)
            bundle.put_file(prefix + ".index", bundle.index_bytes(merged, count))
        except BaseException as e:
            error = e
    multihost.sync(api, "writing the TensorFlow index", error)
    return [prefix + ".index", data_path]


FORMATS = ("tpustrategy", "tensorflow")


def wants_tensorflow(value: Any, api: str) -> bool:
    """Whether ``format=`` asks for TensorFlow's files (checks the argument)."""
    if value in FORMATS:
        return value == "tensorflow"
    raise ValueError(
        f"{api}: format must be one of {FORMATS}; received {value!r}.\nFix: format='tensorflow' "
        "writes TensorFlow's own ckpt.index + ckpt.data-00000-of-00001 files (tf.train.Checkpoint "
        "reads them); the default 'tpustrategy' writes this library's checkpoint folder.")
