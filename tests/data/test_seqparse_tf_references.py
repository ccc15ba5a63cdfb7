"""FixedLenSequence / Sparse / Ragged features and SequenceExample parsing against TensorFlow 2.21.

``fixtures/seqparse_references.json`` holds, per case, serialized records, the
call, the feature specs as data and TensorFlow's results or error
(``tools/make_seqparse_fixtures.py``; the inputs follow TensorFlow's
``parsing_ops_test.py``). Our results are converted to TensorFlow's forms
(SparseTensor triples, RaggedTensor flat values and nested row splits) and
compared value by value, dtype by dtype.
"""

from __future__ import annotations

import base64
import json
import pathlib
import re

import numpy as np
import pytest

import tpustrategy.data as tpsd
import tpustrategy.io as tpsio
from tpustrategy.errors import InvalidArgumentError
from tpustrategy.sparse import SparseTensor

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "seqparse_references.json"
CASES = json.loads(FIXTURE.read_text())["cases"]

# Where we differ from TensorFlow on purpose (docs/pending/seqparse.md): TensorFlow's batched
# RaggedFeature does not check that each example's partition describes its own values (it returns
# the values of one example in another's rows); we raise.
RAISES_WHERE_TF_DOES_NOT = {"ragged_misaligned"}


def spec(d: dict) -> object:
    kind = d["kind"]
    if kind == "FixedLenFeature":
        return tpsd.FixedLenFeature(d["shape"], d["dtype"], default_value=d.get("default_value"))
    if kind == "VarLenFeature":
        return tpsd.VarLenFeature(d["dtype"])
    if kind == "FixedLenSequenceFeature":
        return tpsd.FixedLenSequenceFeature(d["shape"], d["dtype"], allow_missing=d.get("allow_missing", False),
                                            default_value=d.get("default_value"))
    if kind == "SparseFeature":
        return tpsd.SparseFeature(d["index_key"], d["value_key"], d["dtype"], d["size"],
                                  already_sorted=d.get("already_sorted", False))
    parts = [getattr(tpsd.RaggedFeature, p[0])(p[1]) for p in d.get("partitions", [])]
    return tpsd.RaggedFeature(d["dtype"], value_key=d.get("value_key"), partitions=parts,
                              row_splits_dtype=d.get("row_splits_dtype", "int32"), validate=d.get("validate", False))


def specs(d: dict | None) -> dict | None:
    return None if d is None else {k: spec(v) for k, v in d.items()}


def tf_array(d: dict) -> np.ndarray:
    if d["dtype"] == "string":
        out = np.empty(len(d["b64"]), dtype=object)
        out[:] = [base64.b64decode(v) for v in d["b64"]]
        return out.reshape(d["shape"])
    return np.array(d["values"], dtype=d["dtype"]).reshape(d["shape"])


def assert_array(ours: object, want: dict, what: str) -> None:
    expected = tf_array(want)
    got = np.asarray(ours) if not isinstance(ours, bytes) else np.array(ours, dtype=object)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != TensorFlow's {expected.shape}"
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != TensorFlow's {expected.dtype}"
    assert got.tolist() == expected.tolist(), f"{what}: {got.tolist()} != TensorFlow's {expected.tolist()}"


def as_sparse(ours: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Our SparseTensor, VarLen ``(values, row_lengths)`` or 1-D VarLen values as TensorFlow's triple."""
    if isinstance(ours, SparseTensor):
        return ours.indices, ours.values, ours.dense_shape
    if isinstance(ours, np.ndarray):  # one example's VarLen values
        return np.arange(ours.size, dtype=np.int64)[:, None], ours, np.array([ours.size], np.int64)
    values, lengths = ours
    lengths = np.asarray(lengths)
    idx = []
    for pos in np.ndindex(*lengths.shape):
        idx += [(*pos, j) for j in range(int(lengths[pos]))]
    longest = int(lengths.max()) if lengths.size else 0
    indices = np.array(idx, dtype=np.int64).reshape(-1, lengths.ndim + 1)
    return indices, values, np.array([*lengths.shape, longest], np.int64)


def as_ragged(ours: object) -> tuple[np.ndarray, list[np.ndarray]]:
    """Our RaggedBatch or RaggedTensorValue as TensorFlow's flat values and nested row splits."""
    if isinstance(ours, tpsd.RaggedTensorValue):
        return ours.flat_values, list(ours.nested_row_splits)
    assert isinstance(ours, tpsd.RaggedBatch), type(ours)
    lengths = np.asarray(ours.row_lengths)
    rows = [ours.values[i, :int(n)] for i, n in enumerate(lengths)]
    flat = np.concatenate(rows) if rows else ours.values.reshape(0, *ours.values.shape[2:])
    splits = np.concatenate([[0], np.cumsum(lengths)]).astype(lengths.dtype)
    return flat, [splits]


def assert_results(ours: dict, want: dict, what: str) -> None:
    assert list(sorted(ours)) == sorted(want), f"{what}: keys {sorted(ours)} != TensorFlow's {sorted(want)}"
    for key, w in want.items():
        got = ours[key]
        if w["type"] == "dense":
            assert_array(got, w["value"], f"{what}[{key!r}]")
        elif w["type"] == "sparse":
            indices, values, shape = as_sparse(got)
            assert_array(indices, w["indices"], f"{what}[{key!r}].indices")
            assert_array(values, w["values"], f"{what}[{key!r}].values")
            assert_array(shape, w["dense_shape"], f"{what}[{key!r}].dense_shape")
        else:
            flat, splits = as_ragged(got)
            assert_array(flat, w["flat_values"], f"{what}[{key!r}].flat_values")
            assert len(splits) == len(w["nested_row_splits"]), f"{what}[{key!r}]: ragged rank"
            for i, (s, ws) in enumerate(zip(splits, w["nested_row_splits"])):
                assert_array(s, ws, f"{what}[{key!r}].nested_row_splits[{i}]")


def call(case: dict) -> dict:
    records = [base64.b64decode(r) for r in case["records"]]
    kind = case["call"]
    if kind == "parse_example":
        return {"features": tpsd.parse_example(records, specs(case["features"]))}
    if kind == "parse_single_example":
        return {"features": tpsd.parse_single_example(records[0], specs(case["features"]))}
    names = case.get("names")
    if kind == "parse_sequence_example":
        ctx, lists, lengths = tpsd.parse_sequence_example(records, specs(case.get("context")),
                                                          specs(case.get("sequence")), example_names=names)
        return {"context": ctx, "feature_lists": lists, "lengths": lengths}
    ctx, lists = tpsd.parse_single_sequence_example(records[0], specs(case.get("context")),
                                                    specs(case.get("sequence")),
                                                    example_name=None if names is None else names[0])
    return {"context": ctx, "feature_lists": lists}


def _ours_error(case: dict) -> Exception:
    with pytest.raises(Exception) as info:
        call(case)
    return info.value


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_tensorflow(name: str) -> None:
    case = CASES[name]
    tf = case["tf"]
    if name in RAISES_WHERE_TF_DOES_NOT:
        with pytest.raises(InvalidArgumentError, match="values and partitions are not aligned"):
            call(case)
        return
    if "error" in tf:
        err = _ours_error(case)
        want_type = {"InvalidArgumentError": InvalidArgumentError, "ValueError": ValueError,
                     "TypeError": TypeError}[tf["error"]["type"]]
        assert isinstance(err, want_type), f"raised {type(err).__name__}: {err}; TensorFlow raised {want_type}"
        message = tf["error"]["message"]
        if name == "keys_intersect":  # TensorFlow formats this one as a tuple
            message = "Dense and ragged keys must not intersect"
        elif name == "sparse_count_mismatch":
            message = "Dimensions 1 and 2 are not compatible"
        elif name.startswith("seq_ragged_misaligned"):
            message = "Feature b: values and partitions are not aligned"
        elif message.startswith("Unsupported") and " for key " in message:
            message = message.split(" ")[0] + " " + message.split(" ")[1]  # our repr of the spec differs
            assert f"for key '{'a'}'" in str(err)
        assert str(err).startswith(message) or message in str(err), f"{err!s} does not carry {message!r}"
        assert "Fix:" in str(err), f"no fix in {err!s}"
        return
    ours = call(case)
    for part, want in tf.items():
        assert_results(ours[part], want, f"{name}.{part}")


def test_tf_io_names_are_tpsd_names() -> None:
    for n in ("FixedLenSequenceFeature", "SparseFeature", "RaggedFeature", "parse_sequence_example",
              "parse_single_sequence_example"):
        assert getattr(tpsio, n) is getattr(tpsd, n)


def test_fixture_covers_every_kind() -> None:
    text = json.dumps(CASES)
    for kind in ("FixedLenSequenceFeature", "SparseFeature", "RaggedFeature", "RowSplits", "RowLengths",
                 "RowStarts", "RowLimits", "ValueRowIds", "UniformRowLength"):
        assert re.search(kind, text), kind
    calls = {c["call"] for c in CASES.values()}
    assert calls == {"parse_example", "parse_single_example", "parse_sequence_example",
                     "parse_single_sequence_example"}
