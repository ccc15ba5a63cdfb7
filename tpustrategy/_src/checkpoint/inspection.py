"""Reading a checkpoint without the objects it was saved from (``tf.train.load_checkpoint``).

``load_checkpoint(path)`` returns a `CheckpointReader` over the saved values
by name; ``list_variables(path)`` lists ``(name, shape)`` pairs. Names are
TensorFlow's: ``"<object path>/.ATTRIBUTES/VARIABLE_VALUE"`` for variables and
arrays (``"net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE"``), ``".../ITERATOR_STATE"``
for an iterator's position (a JSON string), plus
``"save_counter/.ATTRIBUTES/VARIABLE_VALUE"``; ``get_tensor`` also accepts the
object path alone (``"net/l1/kernel"``). A sync-on-read variable reads as its
aggregated value, as TensorFlow saves it (one with aggregation NONE as its
``[replicas, ...]`` components). Values come back as NumPy arrays.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from tpustrategy._src.checkpoint import arrays, files, fingerprint, recovery
from tpustrategy._src.checkpoint.tf_format import tf_reader
from tpustrategy._src.errors import DataLossError, NotFoundError

_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"
_ITERATOR = "/.ATTRIBUTES/ITERATOR_STATE"
_SAVE_COUNTER = "save_counter" + _VALUE


class CheckpointReader:
    """The saved values of one checkpoint by name (``tf.train.load_checkpoint``'s reader).

    Args:
      path: a checkpoint (as returned by ``save``) — not a folder of them;
        use `load_checkpoint` for that.
    """

    def __new__(cls, path: str) -> CheckpointReader:
        if cls is CheckpointReader and isinstance(path, (str, os.PathLike)) and os.path.isfile(
                os.fspath(path) + ".index"):  # TensorFlow's own files (tf_format)
            return super().__new__(TFCheckpointReader)
        return super().__new__(cls)

    def __init__(self, path: str):
        api = "tps.train.load_checkpoint"
        path = files.resolve(path)
        self._path = path
        manifest = files.read_manifest(path, api)
        files.verify(path, manifest, api)
        self._manifest = manifest
        self._records: dict[str, tuple[str, Any]] = {}  # name -> (what, detail)
        for key, meta in manifest["objects"].items():
            kind = meta["kind"]
            if kind in ("variable", "array"):
                part = "value" if "value" in meta["parts"] else "components"
                shape = list(meta["shape"]) if part == "value" else [meta["replicas"], *meta["shape"]]
                self._records[key + _VALUE] = ("array", (meta["parts"][part], shape, meta["dtype"]))
            elif kind == "value":
                self._records[key + _VALUE] = ("value", meta["value"])
            else:
                self._records[key + _ITERATOR] = ("iterator", key)
        self._records[_SAVE_COUNTER] = ("value", int(manifest.get("save_counter", 0)))

    def _name(self, name: str, api: str) -> str:
        """The key ``name`` stands for (a full key or an object path); NotFoundError listing the keys."""
        if not isinstance(name, str):
            raise TypeError(f"CheckpointReader.{api}: tensor_str must be a str; received "
                            f"{type(name).__name__}: {name!r}.")
        key = self._find(name)
        if key is not None:
            return key
        names = self._keys()
        shown = ", ".join(names[:20])
        raise NotFoundError(
            f"Key {name} not found in checkpoint {self._path} (CheckpointReader.{api}). It holds: "
            f"{shown}{' ...' if len(names) > 20 else ''}.\nFix: use a name from "
            "reader.get_variable_to_shape_map() (or tps.train.list_variables(path)).")

    def _find(self, name: str) -> str | None:
        for candidate in (name, name + _VALUE, name + _ITERATOR):
            if candidate in self._records:
                return candidate
        return None

    def _keys(self) -> list[str]:
        return sorted(self._records)

    def has_tensor(self, tensor_str: str) -> bool:
        """Whether the checkpoint holds ``tensor_str`` (a full name or an object path)."""
        try:
            self._name(tensor_str, "has_tensor")
        except NotFoundError:
            return False
        return True

    def get_tensor(self, tensor_str: str) -> Any:
        """The saved value of ``tensor_str`` as a NumPy array (an iterator's state: a JSON str).

        Raises:
          tps.errors.NotFoundError: the checkpoint holds no such name (the
            message lists the names it holds).
        """
        what, detail = self._records[self._name(tensor_str, "get_tensor")]
        if what == "value":
            return np.asarray(detail)
        if what == "iterator":
            return _iterator_state(self._path, self._manifest, detail)
        name, shape, dtype = detail
        target = np.empty(shape, np.dtype(dtype))
        api = "CheckpointReader.get_tensor"
        got = arrays.load(os.path.join(self._path, files.ARRAYS), {name: target}, api)
        recorded = self._manifest.get("fingerprints")
        if recorded is not None and fingerprint.compute(got, like=recorded)[name] != recorded.get(name):
            raise DataLossError(
                f"{api}: checkpoint {self._path!r} is damaged: the data read for {tensor_str!r} is "
                f"not what was saved (its content fingerprint differs).",
                filename=os.path.join(self._path, files.ARRAYS))
        return np.asarray(got[name])

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        """Every saved name -> its shape (a list of ints)."""
        return {name: self._shape(name) for name in sorted(self._records)}

    def get_variable_to_dtype_map(self) -> dict[str, np.dtype]:
        """Every saved name -> its NumPy dtype (``object`` for iterator states)."""
        out = {}
        for name in sorted(self._records):
            what, detail = self._records[name]
            if what == "array":
                out[name] = np.dtype(detail[2])
            elif what == "value":
                out[name] = np.asarray(detail).dtype
            else:
                out[name] = np.dtype(object)
        return out

    def _shape(self, name: str) -> list[int]:
        what, detail = self._records[name]
        return list(detail[1]) if what == "array" else []

    def __repr__(self) -> str:
        return f"<tps.train.CheckpointReader {self._path!r}: {len(self._records)} values>"


class TFCheckpointReader(CheckpointReader):
    """A `CheckpointReader` over TensorFlow's checkpoint files (``tf_format.tf_reader`` reads them)."""

    def __init__(self, path: str):
        self._path = path
        self._values = tf_reader.TFValues(path)

    def _find(self, name: str) -> str | None:
        return self._values.find(name)

    def _keys(self) -> list[str]:
        return self._values.keys()

    def get_tensor(self, tensor_str: str) -> Any:
        """The saved value of ``tensor_str`` (a key, or an object path without ``/.ATTRIBUTES/...``).

        Raises:
          tps.errors.NotFoundError: no such key (the message lists the keys).
          tps.errors.DataLossError: its bytes are damaged (naming the file).
        """
        return self._values.get(self._name(tensor_str, "get_tensor"))

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        """Every key -> its shape (a list of ints)."""
        return self._values.shapes()

    def get_variable_to_dtype_map(self) -> dict[str, np.dtype]:
        """Every key -> its NumPy dtype (strings: ``object``; bfloat16: ``ml_dtypes.bfloat16``)."""
        return self._values.dtypes()

    def __repr__(self) -> str:
        return f"<tps.train.CheckpointReader {self._path!r} (TensorFlow format): {len(self._values)} values>"


def _iterator_state(path: str, manifest: dict[str, Any], key: str) -> Any:
    count = int(manifest["process_count"])
    full = os.path.join(path, *files.iterator_file(0, count).split("/"))
    states = files.read_json(full, "CheckpointReader.get_tensor")["states"]
    return np.asarray(json.dumps(states[key]))


def load_checkpoint(ckpt_dir_or_file: str | os.PathLike[str]) -> CheckpointReader:
    """A `CheckpointReader` for a checkpoint, or for the newest one in a folder (``tf.train.load_checkpoint``).

    Example:
      >>> reader = tps.train.load_checkpoint("/tmp/ckpts")
      >>> reader.get_tensor("net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE")

    Raises:
      ValueError: a folder without complete checkpoints.
      tps.errors.NotFoundError: nothing at the path.
      tps.errors.DataLossError: the checkpoint is damaged.
    """
    return CheckpointReader(recovery.resolve_checkpoint(ckpt_dir_or_file, "tps.train.load_checkpoint"))


def list_variables(ckpt_dir_or_file: str | os.PathLike[str]) -> list[tuple[str, list[int]]]:
    """``(name, shape)`` of every saved value, sorted by name (``tf.train.list_variables``)."""
    reader = CheckpointReader(recovery.resolve_checkpoint(ckpt_dir_or_file, "tps.train.list_variables"))
    return sorted(reader.get_variable_to_shape_map().items())


def load_variable(ckpt_dir_or_file: str | os.PathLike[str], name: str) -> Any:
    """The saved value of ``name`` in a checkpoint or a folder's newest one (``tf.train.load_variable``).

    ``name`` is a key (``"net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE"``) or an
    object path (``"net/l1/kernel"``); a trailing ``":0"`` is ignored, as in TF.
    """
    if isinstance(name, str) and name.endswith(":0"):
        name = name[:-2]
    reader = CheckpointReader(recovery.resolve_checkpoint(ckpt_dir_or_file, "tps.train.load_variable"))
    return reader.get_tensor(name)
