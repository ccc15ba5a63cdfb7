"""`RaggedRows`: a result TensorFlow gives as a ``tf.RaggedTensor`` (one ragged last dimension).

JAX and NumPy have no ragged arrays. ``tf.strings.split(lines)`` of ``N``
lines gives ``N`` rows of different lengths; here that is a `RaggedRows` with
the fields of ``tpsd.RaggedBatch`` (the form ``Dataset.ragged_batch`` gives):
``values`` the rows padded at the end (``b""`` for strings, 0 for numbers) to
the longest, ``row_lengths`` each row's length, and ``shapes`` each row's shape
(``row_lengths[..., None]``). An input of shape ``S`` gives ``values`` of shape
``[*S, longest]`` and ``row_lengths`` of shape ``S``. ``to_list()`` gives the
unpadded rows (TensorFlow's ``rt.to_list()``), ``to_tensor()`` the padded array
(TensorFlow's ``rt.to_tensor()``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from tpustrategy._src.strings.tensor import OBJECT


class RaggedRows(NamedTuple):
    """Rows of different lengths (TensorFlow's ``tf.RaggedTensor`` with one ragged dimension).

    Attributes:
      values: ``[*S, longest]`` the rows padded at the end with ``b""`` (strings) or 0.
      row_lengths: ``[*S]`` int64, each row's length (TensorFlow's ``rt.row_lengths()``).
      shapes: ``[*S, 1]`` int64, each row's shape, as in ``tpsd.RaggedBatch``.

    Example:
      >>> r = tps.strings.split([b"a b", b"c"])
      >>> r.values.tolist(), r.row_lengths.tolist()   # ([[b'a', b'b'], [b'c', b'']], [2, 1])
      >>> r.to_list()                                   # [[b'a', b'b'], [b'c']]
    """

    values: Any
    row_lengths: Any
    shapes: Any

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the values (object for strings)."""
        return np.asarray(self.values).dtype

    @property
    def row_splits(self) -> np.ndarray:
        """``[rows + 1]`` int64 offsets of each row in ``flat_values`` (TensorFlow's ``rt.row_splits``)."""
        lengths = np.asarray(self.row_lengths, dtype=np.int64).reshape(-1)
        splits: np.ndarray = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        return splits

    def nrows(self) -> int:
        """The number of rows (TensorFlow's ``rt.nrows()``; all leading positions for a multi-dimensional input)."""
        return int(np.asarray(self.row_lengths).size)

    @property
    def flat_values(self) -> np.ndarray:
        """The rows' values one after another, without padding (TensorFlow's ``rt.flat_values``)."""
        flat: np.ndarray = np.asarray(self.values)[self.mask()]
        return flat

    def mask(self) -> np.ndarray:
        """``values``-shaped booleans: True where a row has a value, False on padding."""
        values = np.asarray(self.values)
        return np.arange(values.shape[-1]) < np.asarray(self.row_lengths)[..., None]

    def to_list(self) -> list[Any]:
        """The unpadded rows as nested Python lists (TensorFlow's ``rt.to_list()``)."""
        values, lengths = np.asarray(self.values), np.asarray(self.row_lengths)

        def rows(v: np.ndarray, n: np.ndarray) -> list[Any]:
            if n.ndim == 0:
                row: list[Any] = v[: int(n)].tolist()
                return row
            return [rows(v[i], n[i]) for i in range(n.shape[0])]

        return rows(values, lengths)

    def to_tensor(self, default_value: Any = None) -> np.ndarray:
        """The padded array, with ``default_value`` (else ``b""`` or 0) on padding (``rt.to_tensor()``)."""
        values = np.asarray(self.values)
        if default_value is None:
            return values.copy()
        out = values.copy()
        if out.dtype == OBJECT and isinstance(default_value, str):
            default_value = default_value.encode("utf-8")
        out[~self.mask()] = default_value
        return out


def from_rows(rows: list[Any], leading: tuple[int, ...], dtype: Any) -> RaggedRows:
    """A `RaggedRows` of ``rows`` (one sequence per position of ``leading``, in row-major order)."""
    dtype = np.dtype(dtype)
    lengths = np.array([len(r) for r in rows], dtype=np.int64).reshape(leading)
    longest = int(lengths.max()) if lengths.size else 0
    count = len(rows)
    if dtype == OBJECT:
        values = np.empty((*leading, longest), dtype=OBJECT)
        flat = values.reshape(count, longest)
        for i, row in enumerate(rows):
            flat[i, :] = list(row) + [b""] * (longest - len(row))
    else:
        values = np.zeros((*leading, longest), dtype=dtype)
        flat = values.reshape(count, longest)
        for i, row in enumerate(rows):
            flat[i, : len(row)] = row
    return RaggedRows(values, lengths, lengths[..., None].copy())


def is_ragged(value: Any) -> bool:
    """Whether ``value`` is ragged: a `RaggedRows`, or anything with ``values`` and ``row_lengths``."""
    return hasattr(value, "values") and hasattr(value, "row_lengths") and not isinstance(value, np.ndarray)


def rows_of(value: Any) -> tuple[list[list[Any]], tuple[int, ...]]:
    """The unpadded rows of a ragged value (row-major) and its leading shape."""
    values = np.asarray(value.values)
    lengths = np.asarray(value.row_lengths)
    flat_values = values.reshape(lengths.size, values.shape[-1])
    rows = [flat_values[i, : int(n)].tolist() for i, n in enumerate(lengths.reshape(-1).tolist())]
    return rows, lengths.shape


def ragged_map(value: Any, op: Any) -> RaggedRows:
    """``op`` applied to a ragged value's padded ``values``; padding set back to ``b""`` / 0 in the result.

    For element-wise ops, which TensorFlow applies to a ``RaggedTensor``'s values.
    """
    values = np.asarray(value.values)
    result = np.asarray(op(values))
    mask = np.arange(values.shape[-1]) < np.asarray(value.row_lengths)[..., None]
    result = result.copy()
    result[~mask] = b"" if result.dtype == OBJECT else 0
    lengths = np.asarray(value.row_lengths)
    shapes = np.asarray(getattr(value, "shapes", lengths[..., None]))
    return RaggedRows(result, lengths, shapes)
