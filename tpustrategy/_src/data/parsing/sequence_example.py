"""Parsing serialized ``tf.train.SequenceExample`` records (``tf.io.parse_sequence_example``).

A SequenceExample is a ``context`` (a ``Features`` message, as in an
``Example``) and ``feature_lists``: per key, a list of ``Feature`` steps.

* The context is an ``Example``'s field 1 under the same field number, so each
  record's context fields, cut out as they are, form an ``Example`` that
  :func:`.example._parse` reads by its fast paths (FixedLen, VarLen, Ragged).
* The feature lists are read into ``(values, count per step)`` for each
  requested key, with the number of steps of each record: by a vectorised
  walk over the joined records (:mod:`._sequence_walk`), or, for what that
  walk steps aside from, record by record with protobuf (:func:`_lists_by_protobuf`,
  which also raises the errors). :mod:`.composite` turns those into the
  results of ``FixedLenSequenceFeature``, ``VarLenFeature`` and ``RaggedFeature``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from tpustrategy._src.data.parsing import _sequence_walk, composite
from tpustrategy._src.data.parsing._sequence_walk import Lists
from tpustrategy._src.data.parsing.dtypes import _KIND_OF, _STRING
from tpustrategy._src.data.parsing.example import (
    FixedLenFeature,
    VarLenFeature,
    _as_batch,
    _check_features,
    _parse,
)
from tpustrategy._src.data.parsing.example_proto import SequenceExample
from tpustrategy._src.data.parsing.feature_kinds import FixedLenSequenceFeature, RaggedFeature
from tpustrategy._src.errors import InvalidArgumentError

_CONTEXT_KINDS = (VarLenFeature, FixedLenFeature, RaggedFeature)
_SEQUENCE_KINDS = (VarLenFeature, FixedLenSequenceFeature, RaggedFeature)
_TF_TYPE = {np.dtype(np.int64): "int64", np.dtype(np.float32): "float", _STRING: "string"}


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _name(names: list[str] | None, i: int) -> str:
    return names[i] if names else "<unknown>"


def _decode_error(names: list[str] | None, i: int, b: bytes, e: Exception) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"Could not parse example input, value: '{b[:64]!r}' (Name: {_name(names, i)}, serialized[{i}]; "
        f"protobuf says: {e}).\nFix: check that the records are SequenceExamples and that the file was read "
        "with the right compression_type.")


def _lists_by_protobuf(batch: list[bytes], keys: dict[str, np.dtype], names: list[str] | None,
                       ) -> tuple[list[bytes], dict[str, Lists]]:
    """Each record's context as Example bytes, and the feature lists of ``keys``, read with protobuf."""
    contexts: list[bytes] = []
    rows: dict[str, tuple[list[Any], list[int], list[int], list[bool]]] = {k: ([], [], [], []) for k in keys}
    for i, b in enumerate(batch):
        try:
            seq = SequenceExample.FromString(b)
        except DecodeError as e:
            raise _decode_error(names, i, b, e) from None
        ctx = seq.context.SerializeToString()
        contexts.append(b"\n" + _varint(len(ctx)) + ctx if seq.HasField("context") else b"")
        fl = seq.feature_lists.feature_list
        for key, dtype in keys.items():
            values, counts, steps, present = rows[key]
            if key not in fl:
                steps.append(0)
                present.append(False)
                continue
            want = _KIND_OF[dtype]
            feats = fl[key].feature
            for t, feat in enumerate(feats):
                kind = feat.WhichOneof("kind")
                if kind is None:
                    counts.append(0)
                    continue
                if kind != want:
                    raise InvalidArgumentError(
                        f"Name: {_name(names, i)}, Feature list: {key}, Index: {t}.  Data types don't match. "
                        f"Expected type: {_TF_TYPE[dtype]}\nThe step is stored as {kind}. Fix: request {key!r} "
                        "with the dtype it is stored with, or write every step of the list with one kind.")
                vals = getattr(feat, kind).value
                values.append(vals)
                counts.append(len(vals))
            steps.append(len(feats))
            present.append(True)
    out = {}
    for key, dtype in keys.items():
        values, counts, steps, present = rows[key]
        flat = [v for vals in values for v in vals]
        if dtype == _STRING:
            arr = np.empty(len(flat), dtype=object)
            arr[:] = flat
        else:
            arr = np.array(flat, dtype=dtype)
        out[key] = Lists(arr, np.array(counts, np.int64), np.array(steps, np.int64), np.array(present, bool))
    return contexts, out


def _list_keys(specs: dict[str, Any]) -> dict[str, np.dtype]:
    """The feature-list keys ``specs`` read and their dtypes (TensorFlow's rules for shared keys)."""
    groups: dict[str, dict[str, np.dtype]] = {"dense": {}, "sparse": {}, "ragged": {}}
    for key, spec in specs.items():
        if isinstance(spec, FixedLenSequenceFeature):
            if spec.default_value is not None:
                raise ValueError(f"Value feature_list.dense_defaults[{key}] must be None\nFix: a feature list's "
                                 "rows are padded with 0 (b'' for strings); drop default_value.")
            group, reads = "dense", [(key, spec.dtype)]
        elif isinstance(spec, VarLenFeature):
            group, reads = "sparse", [(key, spec.dtype)]
        else:
            group = "ragged"
            reads = [(key if spec.value_key is None else spec.value_key, spec.dtype)]
            reads += [(p.key, np.dtype(np.int64)) for p in spec.partitions
                      if not isinstance(p, RaggedFeature.UniformRowLength)]
        for k, dtype in reads:
            seen = groups[group].get(k)
            if seen is not None and seen != dtype:
                raise ValueError(f"Conflicting type {seen} vs {dtype} for feature {k}.")
            groups[group][k] = dtype
    for a, b in (("dense", "sparse"), ("dense", "ragged"), ("ragged", "sparse")):
        both = set(groups[a]) & set(groups[b])
        if both:
            raise ValueError(f"{a.capitalize()} and {b} keys must not intersect; {a}_keys: {sorted(groups[a])}, "
                             f"{b}_keys: {sorted(groups[b])}, intersection: {both}")
    out: dict[str, np.dtype] = {}
    for reads_of_group in groups.values():
        out.update(reads_of_group)
    return out


def _sequence_results(specs: dict[str, Any], lists: dict[str, Lists], batched: bool,
                      names: list[str] | None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    out: dict[str, Any] = {}
    lengths: dict[str, np.ndarray] = {}
    for key, spec in specs.items():
        if isinstance(spec, FixedLenSequenceFeature):
            got = lists[key]
            if not spec.allow_missing and not got.present.all():
                i = int(np.flatnonzero(~got.present)[0])
                raise InvalidArgumentError(
                    f"Name: {_name(names, i)}, Feature list '{key}' is required but could not be found.  Did you "
                    "mean to include it in feature_list_dense_missing_assumed_empty or "
                    f"feature_list_dense_defaults?\nFix: FixedLenSequenceFeature(..., allow_missing=True) for "
                    f"{key!r} gives zero steps when the list is missing.")
            stride = int(np.prod(spec.shape, dtype=np.int64))
            bad = np.flatnonzero(got.step_counts != stride)
            if bad.size:
                _raise_step_count(key, spec, got, int(bad[0]), stride, names)
            rows = composite.padded_rows(got.values, got.steps * stride, tuple(spec.shape),
                                         b"" if spec.dtype == _STRING else spec.dtype.type(0), spec.dtype)
            out[key] = rows if batched else rows[0]
            if batched:
                lengths[key] = got.steps.astype(np.int64)
        elif isinstance(spec, VarLenFeature):
            got = lists[key]
            if batched:
                longest = int(got.steps.max()) if got.steps.size else 0
                row_lengths = composite.padded_rows(got.step_counts, got.steps, (), np.int64(0), np.dtype(np.int64))
                out[key] = (got.values, row_lengths.reshape(got.steps.size, longest))
            else:
                out[key] = (got.values, got.step_counts)
        else:
            vk = key if spec.value_key is None else spec.value_key
            got = lists[vk]
            parts = {}
            for p in spec.partitions:
                if isinstance(p, RaggedFeature.UniformRowLength):
                    continue
                pl = lists[p.key]
                if (pl.steps != got.steps).any():
                    raise InvalidArgumentError(
                        f"Feature {key}: values and partitions are not aligned (the feature list {p.key!r} has "
                        f"other numbers of steps than {vk!r}).\nFix: write one partition step per value step.")
                parts[p.key] = (pl.values, pl.step_counts)
            flat, rows, levels = composite.ragged_parts(key, spec, (got.values, got.step_counts), parts)
            out[key] = composite.ragged_result(flat, got.steps if batched else None, [rows, *levels],
                                               spec.row_splits_dtype)
    return out, lengths


def _raise_step_count(key: str, spec: FixedLenSequenceFeature, got: Lists, j: int, stride: int,
                      names: list[str] | None) -> None:
    """TensorFlow's error for the step ``j`` (over the batch) of a FixedLenSequence list with another count."""
    ends = np.cumsum(got.steps)
    rec = int(np.searchsorted(ends, j, side="right"))
    first = int(ends[rec] - got.steps[rec])
    shape = ",".join(map(str, spec.shape))
    fix = (f"\nFix: store exactly {stride} values in every step of {key!r}, or use VarLenFeature / RaggedFeature "
           "for steps of different lengths.")
    total = int(got.step_counts[first:int(ends[rec])].sum())
    if total % stride:
        raise InvalidArgumentError(f"Feature list '{key}' has an unexpected number of values.  Total values size: "
                                   f"{total} is not consistent with output shape: [?,{shape}]" + fix)
    raise InvalidArgumentError(f"Name: {_name(names, rec)}, Key: {key}, Index: {j - first}.  Number of values != "
                               f"expected.  values size: {int(got.step_counts[j])} but output shape: [{shape}]" + fix)


def _check_both(api: str, context_features: Any, sequence_features: Any, message: str,
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    if not (context_features or sequence_features):
        raise ValueError(message + "\nFix: pass context_features and/or sequence_features (dicts of features).")
    ctx = _check_features(api, context_features, _CONTEXT_KINDS) if context_features else {}
    seq = _check_features(api, sequence_features, _SEQUENCE_KINDS) if sequence_features else {}
    return ctx, seq


def _names(api: str, names: Any, n: int) -> list[str] | None:
    if names is None:
        return None
    flat = np.asarray(names, dtype=object).reshape(-1).tolist()
    flat = [v.decode() if isinstance(v, bytes) else str(v) for v in flat]
    if flat and len(flat) != n:
        raise InvalidArgumentError(f"{api}: example_names has {len(flat)} names for {n} records.\nFix: give one "
                                   "name per record, or none.")
    return flat or None


def _parse_sequences(api: str, batch: list[bytes], ctx: dict[str, Any], seq: dict[str, Any],
                     names: list[str] | None, batched: bool) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    keys = _list_keys(seq)
    walked = _sequence_walk.walk(batch, keys)
    if walked is None:
        contexts, lists = _lists_by_protobuf(batch, keys, names)
    else:
        contexts, lists = walked
    context_out = _parse(api, contexts, ctx, batched=batched) if ctx else {}
    try:
        seq_out, lengths = _sequence_results(seq, lists, batched, names)
    except InvalidArgumentError:
        if walked is None:
            raise
        _, lists = _lists_by_protobuf(batch, keys, names)  # the same error, or protobuf's first one
        seq_out, lengths = _sequence_results(seq, lists, batched, names)
    return context_out, seq_out, lengths


def parse_sequence_example(serialized: Sequence[bytes] | np.ndarray,
                           context_features: Mapping[str, Any] | None = None,
                           sequence_features: Mapping[str, Any] | None = None,
                           example_names: Any = None, name: str | None = None,
                           ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Parses a batch of serialized ``tf.train.SequenceExample`` records (``tf.io.parse_sequence_example``).

    Args:
      serialized: a list or 1-D object array of ``bytes``.
      context_features: name -> ``FixedLenFeature``, ``VarLenFeature`` or ``RaggedFeature``
        for the ``context``; results as :func:`parse_example`'s.
      sequence_features: name -> ``FixedLenSequenceFeature``, ``VarLenFeature`` or
        ``RaggedFeature`` for the ``feature_lists``.
      example_names: optional names of the records, used in error messages.
      name: accepted for TensorFlow's signature (no graph here).

    Returns:
      ``(context, feature_lists, lengths)``. A ``FixedLenSequenceFeature`` gives
      ``[batch, steps, *shape]`` (shorter sequences padded with 0 / ``b""``) and
      ``lengths[key]`` the int64 number of steps of each record; a
      ``VarLenFeature`` gives ``(values, row_lengths)`` with ``row_lengths``
      ``[batch, steps]`` (0 past a record's steps); a ``RaggedFeature`` a
      ``RaggedTensorValue`` ``[batch, (steps), (values), ...]``.

    Raises:
      ValueError: no features, or features TensorFlow rejects (a
        ``default_value`` on a ``FixedLenSequenceFeature``, a key read two ways).
      InvalidArgumentError: a record is not a SequenceExample; a required
        feature list is missing; a step has another kind or count than requested.

    Example:
      >>> ctx, lists, lengths = parse_sequence_example(batch, {"label": FixedLenFeature([], "int64")},
      ...                                              {"tokens": FixedLenSequenceFeature([], "int64")})
    """
    api = "parse_sequence_example"
    ctx, seq = _check_both(api, context_features, sequence_features,
                           "Both `context_features` and `sequence_features` argument are None, but at least one "
                           "should have values.")
    batch = _as_batch(api, serialized)
    return _parse_sequences(api, batch, ctx, seq, _names(api, example_names, len(batch)), batched=True)


def parse_single_sequence_example(serialized: bytes | np.ndarray,
                                  context_features: Mapping[str, Any] | None = None,
                                  sequence_features: Mapping[str, Any] | None = None,
                                  example_name: Any = None, name: str | None = None,
                                  ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parses one serialized ``tf.train.SequenceExample`` (``tf.io.parse_single_sequence_example``).

    Args:
      serialized: the record (``bytes``; a 0-d object array is accepted).
      context_features: as :func:`parse_sequence_example`; results as :func:`parse_single_example`'s.
      sequence_features: as :func:`parse_sequence_example`.
      example_name: optional name of the record, used in error messages.
      name: accepted for TensorFlow's signature.

    Returns:
      ``(context, feature_lists)``: a ``FixedLenSequenceFeature`` gives
      ``[steps, *shape]``; a ``VarLenFeature`` ``(values, row_lengths)`` with
      one length per step; a ``RaggedFeature`` a ``RaggedBatch`` of the steps
      (a ``RaggedTensorValue`` with partitions).

    Raises:
      ValueError, InvalidArgumentError: as :func:`parse_sequence_example`.
    """
    api = "parse_single_sequence_example"
    ctx, seq = _check_both(api, context_features, sequence_features,
                           "Both context_features and sequence_features are None, but at least one should have "
                           "values.")
    if isinstance(serialized, np.ndarray) and serialized.ndim == 0:
        serialized = serialized.item()
    if isinstance(serialized, bytearray | memoryview):
        serialized = bytes(serialized)
    if not isinstance(serialized, bytes):
        raise TypeError(f"{api}: serialized must be one bytes object (a serialized SequenceExample). Received: "
                        f"{type(serialized).__name__}.\nFix: use parse_sequence_example for a batch.")
    names = None if example_name is None else _names(api, [example_name], 1)
    context, lists, _ = _parse_sequences(api, [serialized], ctx, seq, names, batched=False)
    return context, lists
