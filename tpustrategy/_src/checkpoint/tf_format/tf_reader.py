"""``tps.train.load_checkpoint`` of a TensorFlow-written checkpoint (``ckpt-N.index`` + data).

Keys are the bundle's own (``net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE``,
``_CHECKPOINTABLE_OBJECT_GRAPH``, a tf.keras 2 model's
``model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/...``, a
TF1 Saver's variable names); the parts of a sliced variable are put
together into the full tensor, as TensorFlow's reader does. Values are
NumPy arrays (bfloat16 as ``ml_dtypes.bfloat16``, strings as ``bytes`` in an
``object`` array; a scalar string as ``bytes``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.checkpoint.inspection import CheckpointReader
from tpustrategy._src.checkpoint.tf_format.bundle import BundleReader, numpy_dtype
from tpustrategy._src.errors import NotFoundError

_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"


class TFCheckpointReader(CheckpointReader):
    """A `CheckpointReader` over TensorFlow's checkpoint files."""

    def __init__(self, path: str):
        self._path = path
        self._bundle = BundleReader(path, "tps.train.load_checkpoint")

    def _name(self, name: str, api: str) -> str:
        if not isinstance(name, str):
            raise TypeError(f"CheckpointReader.{api}: tensor_str must be a str; received "
                            f"{type(name).__name__}: {name!r}.")
        for candidate in (name, name + _VALUE):
            if candidate in self._bundle.entries:
                return candidate
        names = self._bundle.keys()
        shown = ", ".join(names[:20])
        raise NotFoundError(
            f"Key {name} not found in checkpoint {self._path} (CheckpointReader.{api}). It holds: "
            f"{shown}{' ...' if len(names) > 20 else ''}.\nFix: use a name from "
            "reader.get_variable_to_shape_map() (or tps.train.list_variables(path)).")

    def get_tensor(self, tensor_str: str) -> Any:
        """The saved value of ``tensor_str`` (a key, or an object path without ``/.ATTRIBUTES/...``).

        Raises:
          tps.errors.NotFoundError: no such key (the message lists the keys).
          tps.errors.DataLossError: its bytes are damaged (naming the file).
        """
        value = self._bundle.get(self._name(tensor_str, "get_tensor"))
        return value.item() if value.dtype == object and value.ndim == 0 else value

    def get_variable_to_shape_map(self) -> dict[str, list[int]]:
        """Every key -> its shape (a list of ints)."""
        return {key: list(self._bundle.entries[key].shape) for key in self._bundle.keys()}

    def get_variable_to_dtype_map(self) -> dict[str, np.dtype]:
        """Every key -> its NumPy dtype (strings: ``object``; bfloat16: ``ml_dtypes.bfloat16``)."""
        return {key: numpy_dtype(self._bundle.entries[key].dtype) for key in self._bundle.keys()}

    def __repr__(self) -> str:
        return f"<tps.train.CheckpointReader {self._path!r} (TensorFlow format): {len(self._bundle.entries)} values>"
