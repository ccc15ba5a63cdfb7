"""Parsing serialized ``tf.train.Example`` records into dicts of NumPy arrays.

``parse_example(batch, features)`` and ``parse_single_example(serialized,
features)`` follow ``tf.io.parse_example`` semantics with NumPy results:

* ``FixedLenFeature(shape, dtype, default_value)``: an array of ``shape`` per
  example (``[batch] + shape`` for a batch); strings as object arrays of
  ``bytes``. A missing feature (or one whose ``Feature`` has no kind set) takes
  the default, or is an error when there is none.
* ``VarLenFeature(dtype)``: a 1-D array of one example's values; for a batch
  the pair ``(values, row_lengths)``.
* ``FixedLenSequenceFeature``, ``SparseFeature``, ``RaggedFeature``
  (:mod:`.feature_kinds`): read as VarLen lists of their keys, then built by
  :mod:`.composite` -- rows padded to the batch's longest, a
  ``tps.sparse.SparseTensor``, a ``RaggedBatch`` or ``RaggedTensorValue``.

Three ways to the same result: when every serialized example in a batch has
the same length and the same bytes outside the requested numeric payloads (the
usual case for fixed-size numeric features), the batch is decoded with a few
NumPy operations over one byte matrix (:mod:`._example_layout`); any other
batch of well-formed records -- bytes features, VarLen lists, mixed layouts --
by the vectorised wire-format walks of :mod:`._batch_scan`; and whatever those
step aside from (malformed records, kind or count mismatches, missing
required features, protobuf's merge rules) is parsed record by record by
protobuf (``_parse_records``), which also produces every error message. All
give identical results.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from tpustrategy._src.data.parsing import _batch_scan, _batch_walk, _example_layout, composite
from tpustrategy._src.data.parsing.dtypes import (
    _INT64,
    _KIND_OF,
    _NAME_OF,
    _STRING,
    canonical_dtype,
)
from tpustrategy._src.data.parsing.example_proto import Example
from tpustrategy._src.data.parsing.feature_kinds import (
    FixedLenSequenceFeature,
    RaggedFeature,
    SparseFeature,
)
from tpustrategy._src.errors import InvalidArgumentError


@dataclass(frozen=True)
class FixedLenFeature:
    """A feature with a fixed number of values per example (``tf.io.FixedLenFeature``).

    Args:
      shape: the shape of one example's value; ``[]`` for a scalar.
      dtype: "int64", "float32" or "string" (or a NumPy equivalent).
      default_value: used when an example lacks the feature; ``None`` makes the
        feature required. Either ``prod(shape)`` values (reshaped to ``shape``)
        or a single value, which is broadcast (TensorFlow accepts only the
        former).
    """

    shape: Sequence[int]
    dtype: Any
    default_value: Any = field(default=None, compare=False)
    _default: np.ndarray | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        api = "FixedLenFeature"
        shape = self.shape
        if isinstance(shape, int | np.integer):
            shape = (int(shape),)
        try:
            dims = tuple(shape)
        except TypeError:
            dims = None
        if dims is None or not all(
            isinstance(d, int | np.integer) and not isinstance(d, bool) and d >= 0 for d in dims
        ):
            raise ValueError(
                f"{api}: shape must be a list of non-negative ints, e.g. [] for a scalar "
                f"or [64]. Received: shape={self.shape!r}.\nFix: give every dimension; "
                "for a variable number of values use VarLenFeature(dtype)."
            )
        dims = tuple(int(d) for d in dims)
        object.__setattr__(self, "shape", dims)
        dtype = canonical_dtype(self.dtype, api=api)
        object.__setattr__(self, "dtype", dtype)
        if self.default_value is not None:
            object.__setattr__(self, "_default", self._make_default(dims, dtype))

    def _make_default(self, dims: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        value = self.default_value
        if dtype == _STRING:
            flat = np.asarray(value, dtype=object).reshape(-1)
            flat = np.array([v.encode() if isinstance(v, str) else v for v in flat] or [], object)
            bad = [v for v in flat if not isinstance(v, bytes)]
            if bad:
                raise ValueError(
                    f"FixedLenFeature: default_value for a string feature must be bytes or "
                    f"str. Received: {value!r}."
                )
        else:
            try:
                flat = np.asarray(value, dtype=dtype).reshape(-1)
            except (TypeError, ValueError) as e:
                raise ValueError(
                    f"FixedLenFeature: default_value {value!r} cannot be converted to "
                    f"{_NAME_OF[dtype]} ({e})."
                ) from None
        size = int(np.prod(dims))
        if flat.size == size:
            out = flat.reshape(dims)
        elif flat.size == 1:
            out = np.full(dims, flat[0], dtype=dtype)
        else:
            raise ValueError(
                f"FixedLenFeature: default_value has {flat.size} values but shape {list(dims)} "
                f"needs {size}. Received: default_value={value!r}.\nFix: give exactly "
                f"{size} values (they are reshaped to the shape) or a single value "
                "(broadcast)."
            )
        out.setflags(write=False)
        return out


@dataclass(frozen=True)
class VarLenFeature:
    """A feature with any number of values per example (``tf.io.VarLenFeature``).

    Args:
      dtype: "int64", "float32" or "string" (or a NumPy equivalent).
    """

    dtype: Any

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype, api="VarLenFeature"))


Spec = FixedLenFeature | VarLenFeature
AnySpec = FixedLenFeature | VarLenFeature | FixedLenSequenceFeature | SparseFeature | RaggedFeature
_KINDS = (FixedLenFeature, VarLenFeature, FixedLenSequenceFeature, SparseFeature, RaggedFeature)
_KIND_LIST = "FixedLenFeature, VarLenFeature, FixedLenSequenceFeature, SparseFeature or RaggedFeature"


def _check_features(api: str, features: object, kinds: tuple[type, ...] = _KINDS) -> dict[str, Any]:
    if not isinstance(features, Mapping) or not features:
        raise ValueError(
            f"{api}: features must be a non-empty dict of name -> {_KIND_LIST}. "
            f"Received: {features!r:.200}."
        )
    out: dict[str, Any] = {}
    for key, spec in features.items():
        if isinstance(spec, _KINDS) and not isinstance(spec, kinds):
            raise ValueError(f"Unsupported {type(spec).__name__} {spec!r} for key '{key}'\nFix: {api} accepts "
                             f"{', '.join(k.__name__ for k in kinds)} here.")
        if not isinstance(spec, kinds):
            names = [k.__name__ for k in kinds]
            raise TypeError(
                f"{api}: features[{key!r}] must be a {names[0]} or {names[1]}"
                + (f" (or {', '.join(names[2:])})" if len(names) > 2 else "")
                + f". Received: {spec!r:.200} of type {type(spec).__name__}.\nFix: e.g. "
                "FixedLenFeature([], 'int64') or VarLenFeature('float32')."
            )
        if not isinstance(key, str):
            raise TypeError(f"{api}: feature names must be str. Received: {key!r}.")
        out[key] = spec
    return out


def _base_specs(specs: dict[str, Any]) -> dict[str, Spec] | None:
    """The FixedLen / VarLen reads that ``specs`` need (None if they are all FixedLen / VarLen).

    A FixedLenSequence, Sparse or Ragged feature reads VarLen lists of its keys. As in
    TensorFlow, a key is read one way only: dense (FixedLen, FixedLenSequence), sparse (VarLen,
    SparseFeature keys) and ragged (RaggedFeature keys) keys must not intersect, and a key
    read twice the same way needs the same dtype.
    """
    if all(isinstance(s, FixedLenFeature | VarLenFeature) for s in specs.values()):
        return None
    groups: dict[str, dict[str, np.dtype]] = {"dense": {}, "sparse": {}, "ragged": {}}

    def add(group: str, key: str, dtype: np.dtype) -> None:
        seen = groups[group].get(key)
        if seen is not None and seen != dtype:
            raise ValueError(f"Conflicting type {_NAME_OF[seen]} vs {_NAME_OF[dtype]} for feature {key}.\n"
                             f"Fix: read {key!r} with one dtype.")
        groups[group][key] = dtype

    for key, spec in specs.items():
        if isinstance(spec, FixedLenFeature | FixedLenSequenceFeature):
            add("dense", key, spec.dtype)
        elif isinstance(spec, VarLenFeature):
            add("sparse", key, spec.dtype)
        elif isinstance(spec, SparseFeature):
            for ix in sorted(spec.index_keys):
                add("sparse", ix, _INT64)
            add("sparse", spec.value_key, spec.dtype)
        else:
            add("ragged", key if spec.value_key is None else spec.value_key, spec.dtype)
            for part in spec.partitions:
                if not isinstance(part, RaggedFeature.UniformRowLength):
                    add("ragged", part.key, _INT64)
    for a, b in (("dense", "sparse"), ("dense", "ragged"), ("ragged", "sparse")):
        both = set(groups[a]) & set(groups[b])
        if both:
            raise ValueError(
                f"{a.capitalize()} and {b} keys must not intersect; {a}_keys: {sorted(groups[a])}, {b}_keys: "
                f"{sorted(groups[b])}, intersection: {both}\nFix: read each key with one kind of feature.")
    base: dict[str, Spec] = {}
    for key, spec in specs.items():
        if isinstance(spec, FixedLenFeature):
            base[key] = spec
    for group in ("dense", "sparse", "ragged"):
        for key, dtype in groups[group].items():
            if key not in base:
                base[key] = VarLenFeature(dtype)
    return base


def _compose(specs: dict[str, Any], raw: dict[str, Any], batched: bool) -> dict[str, Any]:
    """The results of ``specs`` (in their order) from the FixedLen / VarLen reads ``raw`` (batched)."""
    out: dict[str, Any] = {}
    for key, spec in specs.items():
        if isinstance(spec, FixedLenFeature | VarLenFeature):
            out[key] = raw[key] if batched else _one(raw[key])
        elif isinstance(spec, FixedLenSequenceFeature):
            values, counts = raw[key]
            composite.check_stride(counts, tuple(spec.shape), key, spec.dtype)
            rows = composite.padded_rows(values, counts, tuple(spec.shape), spec._pad, spec.dtype)
            out[key] = rows if batched else rows[0]
        elif isinstance(spec, SparseFeature):
            out[key] = composite.sparse(key, spec, [raw[ix] for ix in spec.index_keys], raw[spec.value_key],
                                        batched)
        else:
            vk = key if spec.value_key is None else spec.value_key
            parts = {p.key: raw[p.key] for p in spec.partitions if not isinstance(p, RaggedFeature.UniformRowLength)}
            flat, rows, levels = composite.ragged_parts(key, spec, raw[vk], parts)
            out[key] = composite.ragged_result(flat, rows if batched else None, levels, spec.row_splits_dtype)
    return out


def _as_batch(api: str, serialized: object) -> list[bytes]:
    if isinstance(serialized, np.ndarray):
        if serialized.ndim != 1:
            raise ValueError(
                f"{api}: serialized must be a 1-D batch of serialized Examples. Received: "
                f"an array of shape {serialized.shape}.\nFix: reshape it to 1-D, or use "
                "parse_single_example for one record."
            )
        serialized = serialized.tolist()
    if isinstance(serialized, bytes | str):
        raise TypeError(
            f"{api}: serialized must be a batch (list or 1-D array) of serialized "
            "Examples, not one bytes object.\nFix: use parse_single_example(serialized, "
            "features) for one record, or pass [serialized]."
        )
    batch = list(serialized)  # type: ignore[call-overload]
    for i, b in enumerate(batch):
        if type(b) is not bytes:
            if isinstance(b, bytes | bytearray | memoryview):
                batch[i] = bytes(b)
            else:
                raise TypeError(
                    f"{api}: serialized[{i}] must be bytes (a serialized Example). "
                    f"Received: {type(b).__name__}."
                )
    return batch


def _decode(api: str, batch: list[bytes]) -> list[Any]:
    out = []
    for i, b in enumerate(batch):
        try:
            out.append(Example.FromString(b))
        except DecodeError as e:
            raise ValueError(
                f"{api}: serialized[{i}] is not a valid serialized tf.train.Example "
                f"({len(b)} bytes; protobuf says: {e}).\nFix: check that the records are "
                "Examples (not raw tensors or SequenceExamples) and that the file was "
                "read with the right compression_type."
            ) from None
    return out


_TF_TYPE = {"int64_list": "int64", "float_list": "float", "bytes_list": "string"}


def _type_error(api: str, key: str, index: int, kind: str, dtype: np.dtype) -> ValueError:
    return InvalidArgumentError(
        f"Name: <unknown>, Key: {key}, Index: {index}.  Data types don't match. Data type: {_TF_TYPE[kind]} but "
        f"expected type: {_TF_TYPE[_KIND_OF[dtype]]}\n"
        f"{api}: feature {key!r} of example {index} is stored as {kind} but was requested "
        f"as {_NAME_OF[dtype]} (it would be read from {_KIND_OF[dtype]}).\nFix: request "
        f"dtype={_KIND_NAMES[kind]!r} for {key!r}, or write the feature with "
        f"{_KIND_OF[dtype]}."
    )


_KIND_NAMES = {"int64_list": "int64", "float_list": "float32", "bytes_list": "string"}


def _values(api: str, examples: list[Any], key: str, dtype: np.dtype) -> list[Any]:
    """Per example: the feature's value container, or None if it is missing."""
    want = _KIND_OF[dtype]
    out: list[Any] = []
    for i, ex in enumerate(examples):
        fmap = ex.features.feature
        if key not in fmap:
            out.append(None)
            continue
        feat = fmap[key]
        kind = feat.WhichOneof("kind")
        if kind is None:
            out.append(None)
        elif kind != want:
            raise _type_error(api, key, i, kind, dtype)
        else:
            out.append(getattr(feat, kind).value)
    return out


def _object_array(flat: list[bytes], shape: tuple[int, ...]) -> np.ndarray:
    arr = np.empty(len(flat), dtype=object)
    arr[:] = flat
    return arr.reshape(shape)


def _parse_fixed(api: str, examples: list[Any], key: str, spec: FixedLenFeature) -> np.ndarray:
    size = int(np.prod(spec.shape))
    rows = _values(api, examples, key, spec.dtype)
    default = None if spec._default is None else spec._default.reshape(-1).tolist()
    for i, row in enumerate(rows):
        if row is None:
            if default is None:
                raise ValueError(
                    f"{api}: required feature {key!r} (dtype {_NAME_OF[spec.dtype]}, shape "
                    f"{list(spec.shape)}) is missing from example {i}.\nFix: give "
                    f"FixedLenFeature a default_value for {key!r}, use VarLenFeature to "
                    "allow missing values, or check the feature name."
                )
            rows[i] = default
        elif len(row) != size:
            raise ValueError(
                f"{api}: feature {key!r} of example {i} has {len(row)} values, but "
                f"FixedLenFeature shape {list(spec.shape)} needs exactly {size}.\nFix: "
                f"correct the shape, or use VarLenFeature({_NAME_OF[spec.dtype]!r}) for a "
                "variable number of values."
            )
    shape = (len(rows), *spec.shape)
    if spec.dtype == _STRING:
        return _object_array(list(itertools.chain.from_iterable(rows)), shape)
    if size == 1:
        return np.fromiter((r[0] for r in rows), dtype=spec.dtype, count=len(rows)).reshape(shape)
    flat = np.fromiter(
        itertools.chain.from_iterable(rows), dtype=spec.dtype, count=len(rows) * size
    )
    return flat.reshape(shape)


def _parse_var(
    api: str, examples: list[Any], key: str, spec: VarLenFeature
) -> tuple[np.ndarray, np.ndarray]:
    rows = [() if r is None else r for r in _values(api, examples, key, spec.dtype)]
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    total = int(lengths.sum())
    flat = itertools.chain.from_iterable(rows)
    if spec.dtype == _STRING:
        return _object_array(list(flat), (total,)), lengths
    return np.fromiter(flat, dtype=spec.dtype, count=total), lengths


def _parse(api: str, batch: list[bytes], specs: dict[str, Any], batched: bool = True) -> dict[str, Any]:
    base = _base_specs(specs)
    if base is None:
        raw = _parse_base(api, batch, specs)
        return raw if batched else {k: _one(v) for k, v in raw.items()}
    for key, spec in specs.items():
        if isinstance(spec, FixedLenSequenceFeature) and not spec.allow_missing:
            raise ValueError("Unsupported: FixedLenSequenceFeature requires allow_missing to be True.\n"
                             f"Fix: FixedLenSequenceFeature(..., allow_missing=True) for {key!r} (in an Example "
                             "a missing feature gives zero rows).")
    return _compose(specs, _parse_base(api, batch, base), batched)


def _parse_base(api: str, batch: list[bytes], specs: dict[str, Spec]) -> dict[str, Any]:
    fast = None
    if len(batch) >= _batch_scan.MIN_BATCH:
        fast = _example_layout.parse_uniform_batch(batch, specs)
    if fast is None:
        fast = _batch_scan.parse_batch(batch, specs)
    if fast is not None:
        return fast
    return _parse_records(api, batch, specs)


def _parse_records(api: str, batch: list[bytes], specs: dict[str, Spec]) -> dict[str, Any]:
    """Parses each record with protobuf: the reference path, and the one that raises."""
    examples = _decode(api, batch)
    out: dict[str, Any] = {}
    for key, spec in specs.items():
        if isinstance(spec, FixedLenFeature):
            out[key] = _parse_fixed(api, examples, key, spec)
        else:
            out[key] = _parse_var(api, examples, key, spec)
    return out


def parse_example(
    serialized: Sequence[bytes] | np.ndarray, features: Mapping[str, Spec]
) -> dict[str, Any]:
    """Parses a batch of serialized ``tf.train.Example`` records.

    Args:
      serialized: a list or 1-D object array of ``bytes``.
      features: feature name -> ``FixedLenFeature``, ``VarLenFeature``,
        ``FixedLenSequenceFeature`` (``allow_missing=True``), ``SparseFeature``
        or ``RaggedFeature``.

    Returns:
      A dict, in the order of ``features``: a FixedLen feature gives an array of
      shape ``[batch] + shape``; a VarLen feature gives ``(values,
      row_lengths)`` (``values`` 1-D, ``row_lengths`` int64 of length batch); a
      FixedLenSequence feature ``[batch, rows, *shape]`` padded with its
      ``default_value``; a SparseFeature a ``tps.sparse.SparseTensor`` of dense
      shape ``[batch, *size]``; a RaggedFeature a ``RaggedBatch`` (no ragged
      partitions) or a ``RaggedTensorValue``. Strings are object arrays of ``bytes``.

    Raises:
      ValueError: a record is not an Example; a required feature is missing; a
        feature is stored with another kind than requested; a FixedLen feature
        has the wrong number of values. Messages name the key and the example
        index.

    Example:
      >>> parse_example(batch, {"x": FixedLenFeature([64], "float32"),
      ...                       "label": FixedLenFeature([], "int64")})
      {'x': array(..., shape=(1024, 64)), 'label': array(..., shape=(1024,))}
    """
    api = "parse_example"
    specs = _check_features(api, features)
    return _parse(api, _as_batch(api, serialized), specs)


def parse_single_example(
    serialized: bytes | np.ndarray, features: Mapping[str, Spec]
) -> dict[str, Any]:
    """Parses one serialized ``tf.train.Example``.

    Args:
      serialized: the record (``bytes``; a 0-d object array is accepted).
      features: feature name -> ``FixedLenFeature``, ``VarLenFeature``,
        ``FixedLenSequenceFeature``, ``SparseFeature`` or ``RaggedFeature``.

    Returns:
      A dict: a FixedLen feature gives an array of its ``shape`` (a NumPy scalar
      array for shape ``[]``, and ``bytes`` for a scalar string: strings are
      ``bytes``, as everywhere in a pipeline); a VarLen feature a 1-D array of
      its values; a FixedLenSequence feature ``[rows, *shape]``; a
      SparseFeature a ``SparseTensor`` of dense shape ``size``; a RaggedFeature
      an array (no ragged partitions), a ``RaggedBatch`` (one) or a
      ``RaggedTensorValue``.

    Raises:
      ValueError: as :func:`parse_example`.
    """
    api = "parse_single_example"
    plan = _record_plan(features)
    if plan is not None and isinstance(serialized, bytes):
        try:
            return _batch_walk.parse_record(bytes(serialized) if type(serialized) is not bytes else serialized,
                                            plan)
        except _batch_scan._STEP_ASIDE:
            pass  # the general path decides (and raises)
    specs = _check_features(api, features)
    if isinstance(serialized, np.ndarray) and serialized.ndim == 0:
        serialized = serialized.item()
    if isinstance(serialized, bytearray | memoryview):
        serialized = bytes(serialized)
    if not isinstance(serialized, bytes):
        raise TypeError(
            f"{api}: serialized must be one bytes object (a serialized Example). Received: "
            f"{type(serialized).__name__}.\nFix: use parse_example for a batch."
        )
    return _parse(api, [serialized], specs, batched=False)


# The walk plans of recent requests, by feature key and the identity of each feature spec (a
# plan keeps its specs alive, so an identity in a key cannot be reused by another spec).
_PLANS: dict[tuple[tuple[str, int], ...], _batch_walk.RecordPlan] = {}
_MAX_PLANS = 64


def _record_plan(features: Any) -> _batch_walk.RecordPlan | None:
    """The one-record walk's plan for a dict of FixedLen / VarLen features (None for any other
    request: the general path checks and parses it)."""
    if type(features) is not dict:
        return None
    key = tuple(zip(features, map(id, features.values())))
    plan = _PLANS.get(key)
    if plan is None:
        if not features or not all(type(k) is str and type(s) in (FixedLenFeature, VarLenFeature)
                                   for k, s in features.items()):
            return None
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        plan = _PLANS[key] = _batch_walk.RecordPlan(dict(features))
    return plan


def _one(batched: Any) -> Any:
    """The one example's value of a batch of one: a VarLen ``(values, lengths)`` pair's values; a
    scalar string as ``bytes``; else the array without its batch axis."""
    if isinstance(batched, tuple):
        return batched[0]
    if batched.ndim == 1 and batched.dtype == object:
        return bytes(batched[0])
    return batched[0, ...]
