"""Immutable lookup tables (``tf.lookup.StaticHashTable``, ``StaticVocabularyTable``).

A table maps keys (strings as ``bytes``/``str``, or integers) to values;
``lookup(keys)`` takes a scalar or an array of any shape and returns an array
of the same shape (a NumPy scalar for a scalar key), with ``default_value``
for missing keys (``StaticHashTable``) or an out-of-vocabulary bucket id
(``StaticVocabularyTable``: ``vocab_size + hash(key) % num_oov_buckets``).
NumPy only, no JAX: use them inside ``tpsd.Dataset.map`` (on the host, where
strings live), as TensorFlow programs use ``tf.lookup`` inside ``dataset.map``.
"""

from __future__ import annotations

import abc
import hashlib
from typing import Any

import numpy as np

from tpustrategy._src.lookup.initializers import (
    STRING,
    KeyValueTensorInitializer,
    TextFileInitializer,
)


def _normalise(key: Any) -> Any:
    if isinstance(key, str):
        return key.encode("utf-8")
    if isinstance(key, np.generic):
        return key.item()
    return key


def _check_initializer(initializer: Any, api: str) -> None:
    if not isinstance(initializer, (KeyValueTensorInitializer, TextFileInitializer)):
        raise TypeError(
            f"{api}: initializer must be a tps.lookup.KeyValueTensorInitializer or "
            f"TextFileInitializer; received {type(initializer).__name__}: {initializer!r}.\nFix: "
            f"{api.split('.')[-1]}(tps.lookup.KeyValueTensorInitializer(keys, values), ...).")


class _Table(abc.ABC):
    """Shared lookup over a dict built once."""

    _api = "tps.lookup.Table"

    def __init__(self, keys: np.ndarray, values: np.ndarray, value_dtype: np.dtype):
        self._keys, self._values = keys, values
        self.key_dtype = keys.dtype
        self.value_dtype = value_dtype
        self._index = {_normalise(k): v for k, v in zip(keys.tolist(), values.tolist())}
        if len(self._index) != len(keys):
            from tpustrategy._src.errors import FailedPreconditionError

            raise FailedPreconditionError(f"{self._api}: the initializer holds duplicate keys "
                                          f"({len(keys)} entries, {len(self._index)} distinct).")

    @abc.abstractmethod
    def _missing(self, key: Any) -> Any:
        """The value of a key the table does not hold (the default, or an OOV bucket)."""

    def _check_key(self, key: Any) -> Any:
        key = _normalise(key)
        is_text = isinstance(key, bytes)
        if (self.key_dtype == STRING) != is_text:
            from tpustrategy._src.errors import InvalidArgumentError

            want = "strings" if self.key_dtype == STRING else f"numbers ({self.key_dtype})"
            raise InvalidArgumentError(
                f"{self._api}.lookup: the table's keys are {want}; received the key {key!r} "
                f"({type(key).__name__}).\nFix: look up keys of the table's key dtype.")
        return key

    def lookup(self, keys: Any, name: str | None = None) -> Any:
        """The value of each key (an array shaped like ``keys``; a scalar for a scalar key)."""
        array = np.asarray(keys, dtype=object) if not isinstance(keys, np.ndarray) else keys
        if array.ndim == 0:
            key = self._check_key(array.item() if isinstance(array, np.ndarray) else keys)
            found = self._index.get(key)
            return np.asarray(found if found is not None else self._missing(key), self.value_dtype)[()]
        flat = [self._check_key(k) for k in array.reshape(-1).tolist()]
        out = np.empty(len(flat), self.value_dtype)
        for i, key in enumerate(flat):
            found = self._index.get(key)
            out[i] = found if found is not None else self._missing(key)
        return out.reshape(array.shape)

    __getitem__ = lookup

    def size(self, name: str | None = None) -> np.int64:
        """The number of entries (``StaticVocabularyTable``: plus the OOV buckets)."""
        return np.int64(len(self._index))

    def export(self, name: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The ``(keys, values)`` arrays of the table."""
        return self._keys.copy(), self._values.copy()


class StaticHashTable(_Table):
    """An immutable key -> value table with a default for missing keys (``tf.lookup.StaticHashTable``).

    Args:
      initializer: a ``KeyValueTensorInitializer`` or ``TextFileInitializer``.
      default_value: the value of a missing key (of the value dtype).
      name: accepted for compatibility.
      experimental_is_anonymous: accepted for compatibility.

    Example:
      >>> table = tps.lookup.StaticHashTable(
      ...     tps.lookup.KeyValueTensorInitializer(["a", "b"], [0, 1]), default_value=-1)
      >>> table.lookup(np.array([b"b", b"z"], dtype=object))
      array([ 1, -1])
    """

    _api = "tps.lookup.StaticHashTable"

    def __init__(self, initializer: Any, default_value: Any, name: str | None = None,
                 experimental_is_anonymous: bool = False):
        _check_initializer(initializer, self._api)
        keys, values = initializer.entries()
        default = np.asarray(default_value)
        if default.ndim != 0:
            raise ValueError(f"{self._api}: default_value must be a scalar; received shape {default.shape}.")
        if (values.dtype == STRING) != isinstance(_normalise(default.item()), bytes):
            raise TypeError(f"{self._api}: default_value={default_value!r} does not match the values' "
                            f"dtype {values.dtype if values.dtype != STRING else 'string'}.\nFix: pass a "
                            "default of the same kind as the values (e.g. -1 for ids, '' for strings).")
        self.default_value = _normalise(default.item())
        super().__init__(keys, values, values.dtype)

    def _missing(self, key: Any) -> Any:
        return self.default_value


def _bucket(key: Any, buckets: int) -> int:
    data = key if isinstance(key, bytes) else str(int(key)).encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") % buckets


class StaticVocabularyTable(_Table):
    """Vocabulary ids with hashed out-of-vocabulary buckets (``tf.lookup.StaticVocabularyTable``).

    Keys in the vocabulary get their value (an id); any other key gets
    ``vocab_size + bucket``, its bucket chosen by a stable 64-bit hash
    (BLAKE2b; TensorFlow uses FarmHash, so OOV buckets of the two differ).

    Args:
      initializer: a ``KeyValueTensorInitializer`` or ``TextFileInitializer`` with
        integer values.
      num_oov_buckets: >= 1, the number of out-of-vocabulary buckets.
      lookup_key_dtype: accepted for compatibility (the initializer's key dtype is used).
      name: accepted for compatibility.
    """

    _api = "tps.lookup.StaticVocabularyTable"

    def __init__(self, initializer: Any, num_oov_buckets: int, lookup_key_dtype: Any = None,
                 name: str | None = None, experimental_is_anonymous: bool = False):
        _check_initializer(initializer, self._api)
        if isinstance(num_oov_buckets, bool) or not isinstance(num_oov_buckets, (int, np.integer)) \
                or num_oov_buckets <= 0:
            raise ValueError(f"{self._api}: num_oov_buckets must be a positive int; received "
                             f"num_oov_buckets={num_oov_buckets!r}.\nFix: e.g. num_oov_buckets=1.")
        keys, values = initializer.entries()
        if values.dtype == STRING or not np.issubdtype(values.dtype, np.integer):
            raise TypeError(f"{self._api}: the initializer's values must be integer ids; received "
                            f"dtype {values.dtype}.\nFix: KeyValueTensorInitializer(keys, "
                            "range(len(keys)), value_dtype=np.int64).")
        self.num_oov_buckets = int(num_oov_buckets)
        super().__init__(keys, values.astype(np.int64), np.dtype(np.int64))
        self._vocab_size = len(self._index)

    def _missing(self, key: Any) -> int:
        return self._vocab_size + _bucket(key, self.num_oov_buckets)

    def size(self, name: str | None = None) -> np.int64:
        return np.int64(self._vocab_size + self.num_oov_buckets)
