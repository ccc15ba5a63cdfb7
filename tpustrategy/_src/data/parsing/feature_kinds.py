"""The composite feature kinds: ``FixedLenSequenceFeature``, ``SparseFeature``, ``RaggedFeature``.

Each is TensorFlow's ``tf.io`` class of the same name and fields. They are
parsed from the same per-example value lists a ``VarLenFeature`` reads (see
:mod:`.composite`), so every parse path that reads VarLen lists reads them.

``RaggedTensorValue`` is the result of a ``RaggedFeature`` with more than one
ragged dimension (TensorFlow's ``tf.compat.v1.ragged.RaggedTensorValue``: the
NumPy form of a ``tf.RaggedTensor``); a result with one ragged dimension is a
``tpsd.RaggedBatch``, as ``Dataset.ragged_batch`` gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from tpustrategy._src.data.parsing.dtypes import canonical_dtype

_STRING = np.dtype(object)


def _dims(api: str, shape: object) -> tuple[int, ...]:
    if isinstance(shape, int | np.integer):
        shape = (int(shape),)
    try:
        dims: tuple[Any, ...] | None = tuple(shape)  # type: ignore[arg-type]
    except TypeError:
        dims = None
    if dims is None or not all(isinstance(d, int | np.integer) and not isinstance(d, bool) for d in dims):
        raise ValueError(
            f"{api}: shape must be a list of positive ints (the shape of one step), e.g. [] or [3]. "
            f"Received: shape={shape!r}.\nFix: give every dimension of one row; the number of rows "
            "is the variable dimension.")
    for d in dims:
        if d < 0:
            raise ValueError(f"Dimension {int(d)} must be >= 0 ({api}: shape={list(dims)}).\n"
                             "Fix: give positive dimensions.")
    if any(d == 0 for d in dims):
        raise ValueError(
            f"{api}: All dimensions must be positive for shape {list(dims)}: a row of zero values "
            "has no length to divide by.\nFix: give positive dimensions.")
    return tuple(int(d) for d in dims)


@dataclass(frozen=True)
class FixedLenSequenceFeature:
    """Rows of a fixed shape, any number of them (``tf.io.FixedLenSequenceFeature``).

    In ``parse_example`` / ``parse_single_example`` a feature's values are cut
    into rows of ``shape`` (``allow_missing=True`` is required there, as in
    TensorFlow); a batch is padded with ``default_value`` (a scalar; 0 or
    ``b""`` when None) to its longest example: ``[batch, rows, *shape]``. In
    the ``sequence_features`` of ``parse_sequence_example`` every step of the
    feature list is one row; a missing feature list is an error unless
    ``allow_missing``.

    Args:
      shape: the shape of one row.
      dtype: "int64", "float32" or "string" (or a NumPy equivalent).
      allow_missing: whether a missing feature (list) gives zero rows.
      default_value: the scalar that pads the rows of a batch.
    """

    shape: Sequence[int]
    dtype: Any
    allow_missing: bool = False
    default_value: Any = field(default=None, compare=False)
    _pad: Any = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        api = "FixedLenSequenceFeature"
        object.__setattr__(self, "shape", _dims(api, self.shape))
        dtype = canonical_dtype(self.dtype, api=api)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "_pad", _pad_value(api, self.default_value, dtype))


def _pad_value(api: str, value: Any, dtype: np.dtype) -> Any:
    if value is None:
        return b"" if dtype == _STRING else dtype.type(0)
    flat = np.asarray(value, dtype=object if dtype == _STRING else None).reshape(-1)
    if flat.size != 1:
        raise ValueError(
            f"{api}: default_value pads the rows of a batch and must be one value (a scalar). "
            f"Received: default_value={value!r} ({flat.size} values).\nFix: pass a scalar such as 0.")
    item = flat[0]
    if dtype == _STRING:
        if isinstance(item, str):
            item = item.encode()
        if not isinstance(item, bytes):
            raise ValueError(f"{api}: default_value for a string feature must be bytes or str. "
                             f"Received: {value!r}.\nFix: pass e.g. b'' or 'pad'.")
        return item
    try:
        return np.asarray(item, dtype=dtype)[()]
    except (TypeError, ValueError) as e:
        raise ValueError(f"{api}: default_value {value!r} cannot be converted to {dtype} ({e}).\nFix: pass a "
                         f"number of the feature's dtype.") from None


@dataclass(frozen=True)
class SparseFeature:
    """A sparse tensor from index and value features (``tf.io.SparseFeature``).

    Every example stores its values under ``value_key`` and, for each
    dimension, their positions under the ``index_key`` (one key, or a list of
    keys for a multi-dimensional tensor), as int64 lists of the same length.
    Parsing gives a ``tps.sparse.SparseTensor`` of dense shape ``[batch,
    *size]`` (``size`` for one example) whose entries are sorted by index in
    each example unless ``already_sorted``.

    Args:
      index_key: a key or a list of keys (one per dimension) of int64 features.
      value_key: the key of the values.
      dtype: "int64", "float32" or "string" (or a NumPy equivalent).
      size: the dense size of each dimension (an int or a list).
      already_sorted: whether the values are stored in index order.
    """

    index_key: Any
    value_key: str
    dtype: Any
    size: Any
    already_sorted: bool = False

    def __post_init__(self) -> None:
        if not self.index_key:
            raise ValueError(f"Missing index_key for SparseFeature {self}.\nFix: name the int64 feature(s) "
                             "holding the values' indices, e.g. SparseFeature('ix', 'val', 'float32', 100).")
        if not self.value_key:
            raise ValueError(f"Missing value_key for SparseFeature {self}.\nFix: name the feature holding the "
                             "values, e.g. SparseFeature('ix', 'val', 'float32', 100).")
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype, api="SparseFeature"))
        keys = [self.index_key] if isinstance(self.index_key, str) else list(self.index_key)
        size = self.size
        sizes = [size] if isinstance(size, int | np.integer) else list(size)
        if len(sizes) != len(keys) or not all(isinstance(s, int | np.integer) and s >= 0 for s in sizes):
            raise ValueError(
                f"SparseFeature: size must give one non-negative int per index key ({len(keys)}). "
                f"Received: index_key={self.index_key!r}, size={size!r}.\nFix: e.g. "
                "SparseFeature(['ix0', 'ix1'], 'val', 'float32', [10, 3]).")

    @property
    def index_keys(self) -> list[str]:
        """The index keys as a list (one per dimension)."""
        return [self.index_key] if isinstance(self.index_key, str) else list(self.index_key)

    @property
    def sizes(self) -> list[int]:
        """The dense sizes as a list of ints."""
        return [int(self.size)] if isinstance(self.size, int | np.integer) else [int(s) for s in self.size]




class RowSplits(NamedTuple):
    """``RaggedFeature.RowSplits(key)``: the feature ``key`` holds the row splits."""

    key: str


class RowLengths(NamedTuple):
    """``RaggedFeature.RowLengths(key)``: the feature ``key`` holds the row lengths."""

    key: str


class RowStarts(NamedTuple):
    """``RaggedFeature.RowStarts(key)``: the feature ``key`` holds the row starts."""

    key: str


class RowLimits(NamedTuple):
    """``RaggedFeature.RowLimits(key)``: the feature ``key`` holds the row limits."""

    key: str


class ValueRowIds(NamedTuple):
    """``RaggedFeature.ValueRowIds(key)``: the feature ``key`` holds each value's row id."""

    key: str


class UniformRowLength(NamedTuple):
    """``RaggedFeature.UniformRowLength(length)``: rows of ``length`` values each (no feature)."""

    length: int


def _dtype_name(dtype: Any) -> str | None:
    """``"int32"`` for "int32", np.int32, its dtype or an object named so (``tf.int32``); else a name or None."""
    if isinstance(dtype, str):
        return dtype
    name = getattr(dtype, "name", None)
    if isinstance(name, str):
        return name
    try:
        return np.dtype(dtype).name
    except TypeError:
        return None


_PARTITIONS = (RowSplits, RowLengths, RowStarts, RowLimits, ValueRowIds, UniformRowLength)
_SPLITS_DTYPES = {"int32": np.dtype(np.int32), "int64": np.dtype(np.int64)}


@dataclass(frozen=True)
class RaggedFeature:
    """A ragged tensor from a value feature and partition features (``tf.io.RaggedFeature``).

    Without partitions, each example's values are one row: a batch gives a
    ``tpsd.RaggedBatch`` (``values`` padded, ``row_lengths``), one example a
    1-D array. Each partition (outermost first) adds a dimension, read from
    the feature named by its key (``RowSplits``, ``RowLengths``, ``RowStarts``,
    ``RowLimits``, ``ValueRowIds``) or of a fixed length
    (``UniformRowLength``); a result with more than one ragged dimension is a
    ``RaggedTensorValue``.

    Args:
      dtype: "int64", "float32" or "string" (or a NumPy equivalent).
      value_key: the feature holding the values (default: the feature's own key).
      partitions: the partitions, outermost first.
      row_splits_dtype: "int32" (default) or "int64": the dtype of the row
        lengths / splits of the result.
      validate: accepted for TensorFlow's signature; partitions are always
        checked (a misaligned partition raises ``InvalidArgumentError``).
    """

    dtype: Any
    value_key: str | None = None
    partitions: Sequence[Any] = ()
    row_splits_dtype: Any = "int32"
    validate: bool = False

    RowSplits = RowSplits
    RowLengths = RowLengths
    RowStarts = RowStarts
    RowLimits = RowLimits
    ValueRowIds = ValueRowIds
    UniformRowLength = UniformRowLength

    def __post_init__(self) -> None:
        if self.value_key is not None and (not isinstance(self.value_key, str) or not self.value_key):
            raise ValueError("Argument `value_key` must be a non-empty string; got "
                             f"{self.value_key!r}.\nFix: pass the feature key of the values, or None.")
        try:
            dtype = canonical_dtype(self.dtype, api="RaggedFeature")
        except ValueError:
            raise ValueError("Argument `dtype` must be int64, float32, or bytes; got "
                             f"{self.dtype!r}.\nFix: pass 'int64', 'float32' or 'string'.") from None
        object.__setattr__(self, "dtype", dtype)
        name = _dtype_name(self.row_splits_dtype)
        if name not in _SPLITS_DTYPES:
            raise ValueError("Argument `row_splits_dtype` must be int32 or int64; got "
                             f"{self.row_splits_dtype!r}.\nFix: pass 'int32' (the default) or 'int64'.")
        object.__setattr__(self, "row_splits_dtype", _SPLITS_DTYPES[name])
        if not isinstance(self.partitions, list | tuple):
            raise TypeError("Argument `partitions` must be a list or tuple. Received"
                            f"partitions={self.partitions} of type {type(self.partitions).__name__}.\nFix: e.g. "
                            "partitions=[RaggedFeature.RowLengths('lengths')].")
        for p in self.partitions:
            if not isinstance(p, _PARTITIONS):
                raise TypeError("Argument `partitions` must be a list of partition objects "
                                f"{[c.__name__ for c in _PARTITIONS]}; got: {p!r}.\nFix: e.g. "
                                "RaggedFeature.RowSplits('splits') or RaggedFeature.UniformRowLength(2).")
            if isinstance(p, UniformRowLength) and (not isinstance(p.length, int | np.integer) or p.length < 0):
                raise ValueError(f"RaggedFeature.UniformRowLength: length must be a non-negative int; got "
                                 f"{p.length!r}.\nFix: pass the number of values in each row.")
        object.__setattr__(self, "partitions", tuple(self.partitions))
        if not isinstance(self.validate, bool):
            raise TypeError(f"Argument `validate` must be a bool; got {self.validate!r}\nFix: pass True or False "
                            "(partitions are always checked here).")


class RaggedTensorValue(NamedTuple):
    """A ragged array as NumPy arrays (TensorFlow's ``tf.compat.v1.ragged.RaggedTensorValue``).

    Row ``i`` is ``values[row_splits[i]:row_splits[i + 1]]``; ``values`` is an
    array or another ``RaggedTensorValue`` (one more ragged dimension).

    Example:
      >>> rt = RaggedTensorValue(RaggedTensorValue(np.arange(3.0), np.array([0, 1, 3])), np.array([0, 2, 2]))
      >>> rt.to_list()   # [[[0.0], [1.0, 2.0]], []]
    """

    values: Any
    row_splits: Any

    @property
    def flat_values(self) -> np.ndarray:
        """The innermost values array (TensorFlow's ``rt.flat_values``)."""
        v = self.values
        while isinstance(v, RaggedTensorValue):
            v = v.values
        flat: np.ndarray = v
        return flat

    @property
    def nested_row_splits(self) -> tuple[np.ndarray, ...]:
        """The row splits of every ragged dimension, outermost first."""
        out, v = [self.row_splits], self.values
        while isinstance(v, RaggedTensorValue):
            out.append(v.row_splits)
            v = v.values
        return tuple(out)

    @property
    def ragged_rank(self) -> int:
        """The number of ragged dimensions."""
        return len(self.nested_row_splits)

    @property
    def dtype(self) -> np.dtype:
        """The dtype of the values."""
        return np.asarray(self.flat_values).dtype

    def row_lengths(self) -> np.ndarray:
        """Each row's length (TensorFlow's ``rt.row_lengths()``)."""
        return np.diff(self.row_splits)

    def nrows(self) -> int:
        """The number of rows."""
        return int(len(self.row_splits) - 1)

    def to_list(self) -> list[Any]:
        """The rows as nested Python lists (TensorFlow's ``rt.to_list()``)."""
        inner = self.values.to_list() if isinstance(self.values, RaggedTensorValue) else self.values.tolist()
        s = [int(x) for x in self.row_splits]
        return [inner[a:b] for a, b in zip(s[:-1], s[1:])]
