"""The values of a TensorFlow-written checkpoint (``ckpt-N.index`` + data) by key.

What ``tps.train.load_checkpoint`` of TensorFlow's files reads (``inspection.TFCheckpointReader``
is the reader the user gets; this module knows the files). Keys are the bundle's own
(``net/l1/kernel/.ATTRIBUTES/VARIABLE_VALUE``, ``_CHECKPOINTABLE_OBJECT_GRAPH``, a tf.keras 2
model's ``model/layer_with_weights-0/kernel/.OPTIMIZER_SLOT/optimizer/m/...``, a TF1 Saver's
variable names); the parts of a sliced variable are put together into the full tensor, as
TensorFlow's reader does. Values are NumPy arrays (bfloat16 as ``ml_dtypes.bfloat16``, strings
as ``bytes`` in an ``object`` array; a scalar string as ``bytes``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.checkpoint.tf_format.bundle import BundleReader, numpy_dtype

_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"


class TFValues:
    """The saved values of one TensorFlow checkpoint.

    Args:
      path: the checkpoint prefix (``".../ckpt-3"``, without ``.index``).
    """

    def __init__(self, path: str):
        self._bundle = BundleReader(path, "tps.train.load_checkpoint")

    def find(self, name: str) -> str | None:
        """The key ``name`` names (a key, or an object path without ``/.ATTRIBUTES/...``), or None."""
        for candidate in (name, name + _VALUE):
            if candidate in self._bundle.entries:
                return candidate
        return None

    def keys(self) -> list[str]:
        """Every key, in the bundle's order."""
        return self._bundle.keys()

    def get(self, key: str) -> Any:
        """The value of ``key`` (raises ``tps.errors.DataLossError`` naming the file when damaged)."""
        value = self._bundle.get(key)
        return value.item() if value.dtype == object and value.ndim == 0 else value

    def shapes(self) -> dict[str, list[int]]:
        """Every key -> its shape (a list of ints)."""
        return {key: list(self._bundle.entries[key].shape) for key in self._bundle.keys()}

    def dtypes(self) -> dict[str, np.dtype]:
        """Every key -> its NumPy dtype (strings: ``object``; bfloat16: ``ml_dtypes.bfloat16``)."""
        return {key: numpy_dtype(self._bundle.entries[key].dtype) for key in self._bundle.keys()}

    def __len__(self) -> int:
        return len(self._bundle.entries)
