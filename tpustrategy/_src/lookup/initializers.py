"""Where a lookup table's keys and values come from (``tf.lookup`` initializers).

``KeyValueTensorInitializer`` takes two equally long 1-D sequences;
``TextFileInitializer`` reads one entry per line of a text file, the key and
the value taken from a column (split on ``delimiter``), the whole line
(``TextFileIndex.WHOLE_LINE``) or the line number (``TextFileIndex.LINE_NUMBER``).
Strings are kept as ``bytes`` (UTF-8), as ``tpustrategy.data`` holds them. NumPy
only: no JAX, so tables work inside ``tpsd.Dataset.map``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

STRING = np.dtype(object)


class TextFileIndex:
    """Special column indices of ``TextFileInitializer`` (``tf.lookup.TextFileIndex``)."""

    WHOLE_LINE = -2
    LINE_NUMBER = -1


def as_dtype(dtype: Any, api: str, argument: str) -> np.dtype:
    """A NumPy dtype; ``str``/``bytes``/``"string"``/``object`` mean strings (``object`` of bytes)."""
    if dtype in (str, bytes, "string", "str", "bytes", object) or getattr(dtype, "name", None) == "string":
        return STRING
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{api}: {argument} must be a dtype (e.g. np.int64, np.float32 or str); "
                        f"received {dtype!r}.") from None


def to_array(values: Any, dtype: np.dtype | None, api: str, argument: str) -> np.ndarray:
    """A 1-D array of ``values``; strings become an object array of bytes."""
    array = np.asarray(values, dtype=object if dtype is None or dtype == STRING else None)
    if array.ndim != 1:
        raise ValueError(f"{api}: {argument} must be 1-D; received shape {array.shape}.\nFix: pass a "
                         "flat list or array, e.g. keys=['a', 'b'].")
    flat = list(array.tolist())
    if all(isinstance(v, (str, bytes, np.str_, np.bytes_)) for v in flat) and flat:
        if dtype is not None and dtype != STRING:
            raise TypeError(f"{api}: {argument} holds strings but its dtype is {dtype}.\nFix: give "
                            "the dtype str for string keys or values, or pass numbers.")
        out = np.empty(len(flat), object)
        out[:] = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in flat]
        return out
    if any(isinstance(v, (str, bytes)) for v in flat):
        raise TypeError(f"{api}: {argument} mixes strings and numbers ({flat[:5]!r}...).")
    return np.asarray(flat, dtype=dtype if dtype is not None and dtype != STRING else None)


class KeyValueTensorInitializer:
    """Keys and values given as two 1-D sequences (``tf.lookup.KeyValueTensorInitializer``).

    Args:
      keys: the keys (strings or integers).
      values: one value per key.
      key_dtype: optional key dtype. value_dtype: optional value dtype.
      name: accepted for compatibility.

    Raises:
      ValueError: keys and values differ in length, or are not 1-D.
    """

    def __init__(self, keys: Any, values: Any, key_dtype: Any = None, value_dtype: Any = None,
                 name: str | None = None):
        api = "tps.lookup.KeyValueTensorInitializer"
        kd = as_dtype(key_dtype, api, "key_dtype") if key_dtype is not None else None
        vd = as_dtype(value_dtype, api, "value_dtype") if value_dtype is not None else None
        self._keys = to_array(keys, kd, api, "keys")
        self._values = to_array(values, vd, api, "values")
        if len(self._keys) != len(self._values):
            raise ValueError(f"{api}: keys and values must have the same length; received "
                             f"{len(self._keys)} keys and {len(self._values)} values.\nFix: give one "
                             "value per key.")
        self.key_dtype = self._keys.dtype
        self.value_dtype = self._values.dtype

    def entries(self) -> tuple[np.ndarray, np.ndarray]:
        """The ``(keys, values)`` arrays."""
        return self._keys, self._values


class TextFileInitializer:
    """Entries read from a text file, one per line (``tf.lookup.TextFileInitializer``).

    Args:
      filename: the file.
      key_dtype, value_dtype: ``np.int64`` (or another integer/float dtype) or ``str``.
      key_index, value_index: the column (0-based, split on ``delimiter``), or
        ``TextFileIndex.WHOLE_LINE`` (-2) / ``TextFileIndex.LINE_NUMBER`` (-1).
      vocab_size: read only the first ``vocab_size`` lines (None: all).
      delimiter: the column separator (default a tab).
      name: accepted for compatibility.
      value_index_offset: added to line numbers used as values.
    """

    def __init__(self, filename: Any, key_dtype: Any, key_index: int, value_dtype: Any,
                 value_index: int, vocab_size: int | None = None, delimiter: str = "\t",
                 name: str | None = None, value_index_offset: int = 0):
        api = "tps.lookup.TextFileInitializer"
        for argument, index in (("key_index", key_index), ("value_index", value_index)):
            if not isinstance(index, int) or index < TextFileIndex.WHOLE_LINE:
                raise ValueError(f"{api}: {argument} must be a column >= 0, TextFileIndex.WHOLE_LINE "
                                 f"(-2) or TextFileIndex.LINE_NUMBER (-1); received {index!r}.")
        if vocab_size is not None and (not isinstance(vocab_size, int) or vocab_size <= 0):
            raise ValueError(f"{api}: vocab_size must be a positive int or None; received {vocab_size!r}.")
        kd, vd = as_dtype(key_dtype, api, "key_dtype"), as_dtype(value_dtype, api, "value_dtype")
        try:
            with open(filename, "rb") as f:
                lines = f.read().splitlines()
        except FileNotFoundError:
            from tpustrategy._src.errors import NotFoundError

            raise NotFoundError(f"{api}: {filename}; No such file or directory.") from None
        if vocab_size is not None:
            if len(lines) < vocab_size:
                from tpustrategy._src.errors import InvalidArgumentError

                raise InvalidArgumentError(
                    f"{api}: invalid vocab_size in {filename}: expected {vocab_size} lines, the file "
                    f"has {len(lines)}.")
            lines = lines[:vocab_size]
        sep = delimiter.encode("utf-8")

        def column(i: int, line: bytes, index: int, dtype: np.dtype, offset: int = 0) -> Any:
            if index == TextFileIndex.LINE_NUMBER:
                return i + offset
            text = line if index == TextFileIndex.WHOLE_LINE else _field(line, sep, index, filename, i, api)
            if dtype == STRING:
                return text
            try:
                return dtype.type(text.decode("utf-8"))
            except ValueError:
                from tpustrategy._src.errors import InvalidArgumentError

                raise InvalidArgumentError(f"{api}: line {i} of {filename}: field {text!r} is not a "
                                           f"{dtype}.") from None

        keys = [column(i, line, key_index, kd) for i, line in enumerate(lines)]
        values = [column(i, line, value_index, vd, value_index_offset) for i, line in enumerate(lines)]
        self._keys = to_array(keys, kd, api, "keys")
        self._values = to_array(values, vd, api, "values")
        self.key_dtype, self.value_dtype = self._keys.dtype, self._values.dtype
        self.filename = filename

    def entries(self) -> tuple[np.ndarray, np.ndarray]:
        """The ``(keys, values)`` arrays."""
        return self._keys, self._values


def _field(line: bytes, sep: bytes, index: int, filename: Any, i: int, api: str) -> bytes:
    fields = line.split(sep)
    if index >= len(fields):
        from tpustrategy._src.errors import InvalidArgumentError

        raise InvalidArgumentError(f"{api}: line {i} of {filename} has {len(fields)} fields; column "
                                   f"{index} was asked for.")
    return fields[index]
