"""Records TensorFlow 2.21's results for the composite feature kinds and SequenceExample parsing.

Writes ``tests/data/fixtures/seqparse_references.json``: for each case, the
serialized records (base64), the call (``parse_example``,
``parse_single_example``, ``parse_sequence_example``,
``parse_single_sequence_example``), the feature specs as data, and what
TensorFlow returned (dense arrays, SparseTensors, RaggedTensors as flat values
plus nested row splits) or raised (exception type and message).

The inputs follow the cases of TensorFlow's
``tensorflow/python/kernel_tests/io_ops/parsing_ops_test.py`` (sequence
examples, SparseFeature, RaggedFeature, FixedLenSequenceFeature), written
here as data.

Run from a scratch directory with TensorFlow's venv::

    cd /work/tfscratch && /work/tfvenv/bin/python /path/to/tools/make_seqparse_fixtures.py
"""

from __future__ import annotations

import base64
import json
import pathlib
import re
import sys

import numpy as np
import tensorflow as tf

OUT = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "fixtures" / "seqparse_references.json"


# --- records as data: {"key": ["f", [1, 2]] | ["i", [..]] | ["b", ["a"]] | ["none"]} --------------------------

def feature(desc):
    kind = desc[0]
    if kind == "none":
        return tf.train.Feature()
    if kind == "f":
        return tf.train.Feature(float_list=tf.train.FloatList(value=desc[1]))
    if kind == "i":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=desc[1]))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=[v.encode() for v in desc[1]]))


def features(d):
    return tf.train.Features(feature={k: feature(v) for k, v in d.items()})


def example(d):
    return tf.train.Example(features=features(d)).SerializeToString()


def sequence_example(context=None, lists=None):
    kwargs = {}
    if context is not None:
        kwargs["context"] = features(context)
    if lists is not None:
        kwargs["feature_lists"] = tf.train.FeatureLists(feature_list={
            k: tf.train.FeatureList(feature=[feature(s) for s in steps]) for k, steps in lists.items()})
    return tf.train.SequenceExample(**kwargs).SerializeToString()


# --- specs as data ---------------------------------------------------------------------------------------------

DT = {"int64": tf.int64, "float32": tf.float32, "string": tf.string, "int32": tf.int32}
PARTS = {"RowSplits": tf.io.RaggedFeature.RowSplits, "RowLengths": tf.io.RaggedFeature.RowLengths,
         "RowStarts": tf.io.RaggedFeature.RowStarts, "RowLimits": tf.io.RaggedFeature.RowLimits,
         "ValueRowIds": tf.io.RaggedFeature.ValueRowIds, "UniformRowLength": tf.io.RaggedFeature.UniformRowLength}


def spec(d):
    kind = d["kind"]
    if kind == "FixedLenFeature":
        return tf.io.FixedLenFeature(d["shape"], DT[d["dtype"]], default_value=d.get("default_value"))
    if kind == "VarLenFeature":
        return tf.io.VarLenFeature(DT[d["dtype"]])
    if kind == "FixedLenSequenceFeature":
        return tf.io.FixedLenSequenceFeature(d["shape"], DT[d["dtype"]], allow_missing=d.get("allow_missing", False),
                                             default_value=d.get("default_value"))
    if kind == "SparseFeature":
        return tf.io.SparseFeature(d["index_key"], d["value_key"], DT[d["dtype"]], d["size"],
                                   already_sorted=d.get("already_sorted", False))
    parts = [PARTS[p[0]](p[1]) for p in d.get("partitions", [])]
    return tf.io.RaggedFeature(DT[d["dtype"]], value_key=d.get("value_key"), partitions=parts,
                               row_splits_dtype=DT[d.get("row_splits_dtype", "int32")],
                               validate=d.get("validate", False))


def specs(d):
    return None if d is None else {k: spec(v) for k, v in d.items()}


# --- results as data --------------------------------------------------------------------------------------------

def array(a):
    a = np.asarray(a)
    if a.dtype.kind in "SO":
        return {"dtype": "string", "shape": list(a.shape),
                "b64": [base64.b64encode(bytes(v)).decode() for v in a.reshape(-1)]}
    return {"dtype": str(a.dtype), "shape": list(a.shape), "values": a.reshape(-1).tolist()}


def result(v):
    if isinstance(v, tf.SparseTensor):
        return {"type": "sparse", "indices": array(v.indices.numpy()), "values": array(v.values.numpy()),
                "dense_shape": array(v.dense_shape.numpy())}
    if isinstance(v, tf.RaggedTensor):
        return {"type": "ragged", "flat_values": array(v.flat_values.numpy()),
                "nested_row_splits": [array(s.numpy()) for s in v.nested_row_splits]}
    return {"type": "dense", "value": array(v.numpy())}


def results(d):
    return {k: result(v) for k, v in d.items()}


def run(case):
    call, records = case["call"], case["records"]
    try:
        if call == "parse_example":
            out = {"features": results(tf.io.parse_example(records, specs(case["features"])))}
        elif call == "parse_single_example":
            out = {"features": results(tf.io.parse_single_example(records[0], specs(case["features"])))}
        elif call == "parse_sequence_example":
            ctx, lists, lengths = tf.io.parse_sequence_example(
                records, specs(case.get("context")), specs(case.get("sequence")),
                example_names=case.get("names"))
            out = {"context": results(ctx), "feature_lists": results(lists), "lengths": results(lengths)}
        else:
            names = case.get("names")
            ctx, lists = tf.io.parse_single_sequence_example(
                records[0], specs(case.get("context")), specs(case.get("sequence")),
                example_name=None if names is None else names[0])
            out = {"context": results(ctx), "feature_lists": results(lists)}
    except (tf.errors.OpError, ValueError, TypeError) as e:
        kind = "InvalidArgumentError" if isinstance(e, tf.errors.InvalidArgumentError) else type(e).__name__
        msg = e.message if isinstance(e, tf.errors.OpError) else str(e)
        msg = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", msg)  # the graph function's name
        msg = re.sub(r"\s*\[Op:\w+\].*$", "", msg, flags=re.S)  # the op's name
        out = {"error": {"type": kind, "message": msg}}
    return out


def F(shape, dtype, **kw):
    return {"kind": "FixedLenFeature", "shape": shape, "dtype": dtype, **kw}


def V(dtype):
    return {"kind": "VarLenFeature", "dtype": dtype}


def FS(shape, dtype, **kw):
    return {"kind": "FixedLenSequenceFeature", "shape": shape, "dtype": dtype, **kw}


def SP(index_key, value_key, dtype, size, **kw):
    return {"kind": "SparseFeature", "index_key": index_key, "value_key": value_key, "dtype": dtype, "size": size,
            **kw}


def R(dtype, **kw):
    return {"kind": "RaggedFeature", "dtype": dtype, **kw}


def cases():
    out = {}

    def ex(name, call, recs, feats):
        out[name] = {"call": call, "records": [example(r) for r in recs], "features": feats}

    def seq(name, call, recs, context=None, sequence=None, names=None):
        out[name] = {"call": call, "records": [sequence_example(**r) for r in recs], "context": context,
                     "sequence": sequence, "names": names}

    sparse_recs = [
        {"val": ["f", [3, 4]], "idx": ["i", [5, 10]]},
        {"val": ["f", []], "idx": ["i", []]},
        {"val": ["none"]},
        {"val": ["f", [1, 2, -1]], "idx": ["i", [0, 9, 3]]},
    ]
    ex("sparse_feature", "parse_example", sparse_recs, {"sp": SP(["idx"], "val", "float32", [13])})
    ex("sparse_feature_key_string", "parse_example", sparse_recs, {"sp": SP("idx", "val", "float32", 13)})
    ex("sparse_feature_sorted_flag", "parse_example", sparse_recs[:2],
       {"sp": SP("idx", "val", "float32", 13, already_sorted=True)})
    ex("sparse_reuse", "parse_example", [
        {"val1": ["f", [3, 4]], "val2": ["f", [5, 6]], "idx": ["i", [5, 10]]},
        {"val1": ["f", []], "idx": ["i", []]}],
       {"sp1": SP("idx", "val1", "float32", 13), "sp2": SP("idx", "val2", "float32", 7, already_sorted=True)})
    ex("sparse_3d", "parse_example", [
        {"val": ["f", [3, 4]], "idx0": ["i", [5, 10]], "idx1": ["i", [0, 2]]},
        {"val": ["f", []], "idx0": ["i", []], "idx1": ["i", []]},
        {"val": ["none"]},
        {"val": ["f", [1, 2, -1]], "idx0": ["i", [0, 9, 3]], "idx1": ["i", [1, 0, 2]]}],
       {"sp": SP(["idx0", "idx1"], "val", "float32", [13, 3])})
    ex("sparse_3d_ties", "parse_example", [
        {"val": ["b", ["x", "y", "z", "w"]], "idx0": ["i", [2, 0, 2, 0]], "idx1": ["i", [1, 5, 0, 2]]}],
       {"sp": SP(["idx0", "idx1"], "val", "string", [3, 6])})
    ex("sparse_count_mismatch", "parse_example", [
        {"val": ["f", [3, 4]], "idx": ["i", [5]]}], {"sp": SP("idx", "val", "float32", 13)})
    ex("sparse_single", "parse_single_example", [
        {"val": ["b", ["a", "b"]], "idx": ["i", [3, 0]]}], {"sp": SP(["idx"], "val", "string", [13])})

    ragged_recs = [
        {"rt_c": ["f", [3, 4]]}, {"rt_c": ["f", []]}, {"rt_d": ["none"]},
        {"rt_c": ["f", [1, 2, -1]], "rt_d": ["b", ["hi"]]}]
    ragged_feats = {"rt_c": R("float32"), "rt_d": R("string", row_splits_dtype="int64")}
    ex("ragged_no_partitions", "parse_example", ragged_recs, ragged_feats)
    ex("ragged_no_partitions_x64", "parse_example", ragged_recs * 64, ragged_feats)
    part_recs = [
        {"rt_values": ["f", [3, 4, 5, 6]], "rt_splits": ["i", [0, 1, 4]], "rt_lengths": ["i", [1, 3]],
         "rt_starts": ["i", [0, 1]], "rt_limits": ["i", [1, 4]], "rt_rowids": ["i", [0, 1, 1, 1]]},
        {"rt_values": ["f", []], "rt_splits": ["i", [0]], "rt_lengths": ["i", []], "rt_starts": ["i", []],
         "rt_limits": ["i", []], "rt_rowids": ["i", []]},
        {"rt_values": ["none"], "rt_splits": ["i", [0]], "rt_lengths": ["none"], "rt_starts": ["none"],
         "rt_limits": ["none"], "rt_rowids": ["none"]},
        {"rt_values": ["f", [1, 2, -1, 8, 9, 5]], "rt_splits": ["i", [0, 3, 3, 5, 6]],
         "rt_lengths": ["i", [3, 0, 2, 1]], "rt_starts": ["i", [0, 3, 3, 5]], "rt_limits": ["i", [3, 3, 5, 6]],
         "rt_rowids": ["i", [0, 0, 0, 2, 2, 3]]}]
    part_feats = {
        "rt1": R("float32", value_key="rt_values", partitions=[["RowSplits", "rt_splits"]]),
        "rt2": R("float32", value_key="rt_values", partitions=[["RowLengths", "rt_lengths"]]),
        "rt3": R("float32", value_key="rt_values", partitions=[["RowStarts", "rt_starts"]]),
        "rt4": R("float32", value_key="rt_values", partitions=[["RowLimits", "rt_limits"]]),
        "rt5": R("float32", value_key="rt_values", partitions=[["ValueRowIds", "rt_rowids"]]),
        "uniform1": R("float32", value_key="rt_values", partitions=[["UniformRowLength", 2]]),
        "uniform2": R("float32", value_key="rt_values",
                      partitions=[["UniformRowLength", 2], ["RowSplits", "rt_splits"]]),
    }
    ex("ragged_partitions", "parse_example", part_recs, part_feats)
    ex("ragged_partitions_x16", "parse_example", part_recs * 16, part_feats)
    single_feats = dict(part_feats)
    del single_feats["uniform1"], single_feats["uniform2"]
    ex("ragged_partitions_single", "parse_single_example", part_recs[3:], single_feats)
    ex("ragged_nested", "parse_example", [
        {"rt_values": ["f", [1, 2, 3, 4, 5, 6, 7]], "lengths_axis2": ["i", [1, 2, 0, 1]],
         "lengths_axis3": ["i", [1, 2, 1, 3]], "splits_axis3": ["i", [0, 1, 3, 4, 7]]},
        {"rt_values": ["f", [1, 2, 3, 4, 5, 6, 7, 8]], "lengths_axis2": ["i", [2, 3]],
         "lengths_axis3": ["i", [3, 1, 1, 1, 2]], "splits_axis3": ["i", [0, 3, 4, 5, 6, 8]]}],
       {"rt1": R("float32", value_key="rt_values", row_splits_dtype="int64", partitions=[
           ["UniformRowLength", 2], ["RowLengths", "lengths_axis2"], ["RowSplits", "splits_axis3"]])})
    ex("ragged_misaligned", "parse_example", [
        {"rt_values": ["f", []], "rt_lengths": ["i", [5]]},
        {"rt_values": ["f", [1, 2, 3, 4, 5]], "rt_lengths": ["i", []]}],
       {"rt": R("float32", value_key="rt_values", partitions=[["RowLengths", "rt_lengths"]], validate=True)})
    ex("ragged_all_single", "parse_single_example", [{
        "rt_1d": ["f", [3, 4]], "rt_values": ["f", [5, 6, 7]], "rt_splits": ["i", [0, 1, 1, 3]],
        "rt_lengths": ["i", [1, 0, 2]], "rt_starts": ["i", [0, 1, 1]], "rt_limits": ["i", [1, 1, 3]],
        "rt_rowids": ["i", [0, 2, 2]], "rt_splits2": ["i", [0, 2, 3]], "val": ["b", ["a", "b"]],
        "idx": ["i", [0, 3]], "d": ["f", [0.0, 1.0]]}], {
        "sp": SP(["idx"], "val", "string", [13]),
        "d": FS([], "float32", allow_missing=True),
        "rt_1d": R("float32"),
        "rt_2d_with_splits": R("float32", value_key="rt_values", partitions=[["RowSplits", "rt_splits"]]),
        "rt_2d_with_rowids": R("float32", value_key="rt_values", partitions=[["ValueRowIds", "rt_rowids"]]),
        "rt_2d_with_uniform_row_length": R("float32", value_key="rt_values",
                                           partitions=[["UniformRowLength", 1]]),
        "rt_3d": R("float32", value_key="rt_values",
                   partitions=[["RowSplits", "rt_splits2"], ["RowSplits", "rt_splits"]]),
        "rt_3d_with_uniform_row_length": R("float32", value_key="rt_values",
                                           partitions=[["UniformRowLength", 1], ["RowSplits", "rt_splits"]]),
    })

    fls_recs = [
        {"a": ["f", [1, 1]], "b": ["b", ["b0_str", "b1_str"]], "c": ["i", [3, 4, 5]]},
        {"a": ["f", [-1, -1, 2, 2]], "b": ["b", ["b1"]], "c": ["i", [1]]},
        {"d": ["none"]},
    ]
    ex("fixed_len_sequence", "parse_example", fls_recs, {
        "a": FS([2], "float32", allow_missing=True, default_value=-7.5),
        "b": FS([1, 1], "string", allow_missing=True),
        "c": FS([], "int64", allow_missing=True, default_value=9),
        "d": FS([], "string", allow_missing=True, default_value="pad")})
    ex("fixed_len_sequence_x16", "parse_example", fls_recs * 16, {
        "a": FS([2], "float32", allow_missing=True), "c": FS([], "int64", allow_missing=True)})
    ex("fixed_len_sequence_single", "parse_single_example", fls_recs[1:2], {
        "a": FS([2, 1], "float32", allow_missing=True), "c": FS([], "int64", allow_missing=True)})
    ex("fixed_len_sequence_stride", "parse_example", fls_recs, {"c": FS([2], "int64", allow_missing=True)})
    ex("fixed_len_sequence_not_allow_missing", "parse_example", fls_recs, {"c": FS([], "int64")})
    ex("fixed_len_sequence_kind_mismatch", "parse_example", fls_recs, {"c": FS([], "float32", allow_missing=True)})
    ex("keys_intersect", "parse_example", fls_recs,
       {"c": FS([], "int64", allow_missing=True), "c2": R("int64", value_key="c")})

    # SequenceExample ------------------------------------------------------------------------------------------
    ctx = {"c": ["f", [3, 4]], "st_a": ["f", [3.0, 4.0]]}
    ctx_specs = {"st_a": V("float32"), "a": F([1, 3], "int64", default_value=[[1, 2, 3]]),
                 "b": F([2, 2], "string", default_value=[["x", "y"], ["z", "w"]]), "c": F([2], "float32")}
    for call in ("parse_single_sequence_example", "parse_sequence_example"):
        short = "single" if "single" in call else "batch"
        seq(f"seq_context_{short}", call, [{"context": ctx}], context=ctx_specs, names=["in1"])
        seq(f"seq_multiple_sizes_{short}", call, [{"lists": {
            "a": [["i", [-1, 0, 1]], ["i", [2, 3, 4]], ["i", [5, 6, 7]], ["i", [8, 9, 10]]],
            "b": [["b", ["r00", "r01", "r10", "r11"]]],
            "c": [["f", [3, 4]], ["f", [-1, 2]]]}}],
            sequence={"a": FS([1, 3], "int64"), "b": FS([2, 2], "string"), "c": FS([2], "float32"),
                      "d": FS([5], "float32", allow_missing=True)}, names=["in1"])
        varlen_lists = {"a": [["i", [3, 4]], ["i", [1, 0]]],
                        "st_a": [["f", [3.0, 4.0]], ["f", [5.0]], ["f", []]],
                        "st_b": [["b", ["a"]], ["b", []], ["b", []], ["b", ["b", "c"]]]}
        varlen_specs = {"st_a": V("float32"), "st_b": V("string"), "st_c": V("int64"), "a": FS([2], "int64")}
        seq(f"seq_varlen_{short}", call, [{"lists": varlen_lists}], sequence=varlen_specs, names=["in1"])
        seq(f"seq_varlen_no_name_{short}", call, [{"lists": varlen_lists}], sequence=varlen_specs)
        seq(f"seq_empty_step_{short}", call, [{"lists": {"st_a": [["f", [3.0, 4.0]], ["none"], ["f", [5.0]]]}}],
            sequence={"st_a": V("float32")}, names=["in1"])
        seq(f"seq_inconsistent_types_{short}", call, [{"lists": {"a": [["i", [-1, 0]], ["f", [2, 3]]]}}],
            sequence={"a": FS([2], "int64")}, names=["in1"])
        seq(f"seq_wrong_type_{short}", call, [{"lists": {"a": [["f", [2, 3]]]}}],
            sequence={"a": FS([2], "int64")}, names=["in1"])
        seq(f"seq_wrong_sparse_type_{short}", call, [{"lists": {"a": [["i", [3, 4]], ["i", [1, 2]],
                                                                          ["f", [2.0, 3.0]]]}}],
            sequence={"a": FS([2], "int64")}, names=["in1"])
        seq(f"seq_wrong_shape_{short}", call, [{"lists": {"a": [["i", [2, 3]], ["i", [2, 3, 4]]]}}],
            sequence={"a": FS([2], "int64")}, names=["in1"])
        seq(f"seq_wrong_shape2_{short}", call, [{"lists": {"a": [["i", [2]], ["i", [2, 3, 4]]]}}],
            sequence={"a": FS([2], "int64")}, names=["in1"])
        seq(f"seq_empty_step_fixed_{short}", call, [{"lists": {"a": [["i", [2, 3]], ["none"]]}}],
            sequence={"a": FS([2], "int64")}, names=["in1"])
        seq(f"seq_missing_list_{short}", call, [{"lists": {}}], sequence={"a": FS([2], "int64")}, names=["in1"])
        seq(f"seq_default_value_{short}", call, [{"lists": {}}],
            sequence={"a": FS([2], "int64", allow_missing=True, default_value=3)})
        seq(f"seq_sparse_feature_{short}", call, [{"lists": {}}],
            sequence={"a": SP("i", "v", "int64", 3)})
        seq(f"seq_no_features_{short}", call, [{"lists": {}}])
        seq(f"seq_fixed_len_sequence_in_context_{short}", call, [{"lists": {}}],
            context={"a": FS([2], "int64", allow_missing=True)})
    seq("seq_batch", "parse_sequence_example", [
        {"lists": {"a": [["i", [-1, 0, 1]], ["i", [2, 3, 4]], ["i", [5, 6, 7]], ["i", [8, 9, 10]]]}},
        {"context": {"c": ["f", [7]]}, "lists": {"a": [["i", [21, 2, 11]]], "b": [["i", [5]]]}}],
        context={"c": F([], "float32", default_value=-1)},
        sequence={"a": FS([1, 3], "int64"), "b": FS([], "int64", allow_missing=True),
                  "d": FS([5], "float32", allow_missing=True)}, names=["in1", "in2"])
    seq("seq_batch_varlen", "parse_sequence_example", [
        {"lists": {"s": [["b", ["x"]], ["b", []], ["b", ["y", "z"]]]}},
        {"context": {"c": ["i", [1, 2, 3]]}, "lists": {"s": [["b", ["w"]]]}},
        {"lists": {}}],
        context={"c": V("int64")}, sequence={"s": V("string")})
    ragged_seq = [
        {"context": {"a": ["f", [3, 4]]}, "lists": {"b": [["f", [5]], ["f", [3]]], "c": [["i", [6, 7, 8, 9]]]}},
        {"context": {"a": ["f", [9]]}, "lists": {"b": [], "c": [["i", []], ["i", [1, 2, 3]]]}},
        {"lists": {"b": [["f", [1]], ["f", [1, 2]], ["f", [1, 2, 3]]]}},
        {"context": {"a": ["none"]}, "lists": {"b": [["none"]], "c": [["i", [3, 3, 3]]]}}]
    ragged_ctx = {"a": R("float32")}
    ragged_lists = {"b": R("float32"), "c": R("int64", row_splits_dtype="int64")}
    seq("seq_ragged_batch", "parse_sequence_example", ragged_seq, context=ragged_ctx, sequence=ragged_lists)
    seq("seq_ragged_batch_x16", "parse_sequence_example", ragged_seq * 16, context=ragged_ctx,
        sequence=ragged_lists)
    seq("seq_ragged_single", "parse_single_sequence_example", ragged_seq, context=ragged_ctx, sequence=ragged_lists)
    nested_seq = [
        {"context": {"a_values": ["f", [1, 2, 3, 4, 5, 6, 7]], "a_lengths_axis2": ["i", [1, 2, 0, 1]],
                     "a_splits_axis3": ["i", [0, 1, 3, 4, 7]]},
         "lists": {"b_values": [["f", [1, 2, 3, 4]], ["f", [2, 4, 6]]],
                   "b_splits": [["i", [0, 1, 4]], ["i", [0, 2, 3]]]}},
        {},
        {"context": {"a_values": ["f", [1, 2, 3, 4, 5, 6, 7, 8]], "a_lengths_axis2": ["i", [2, 3]],
                     "a_splits_axis3": ["i", [0, 3, 4, 5, 6, 8]]},
         "lists": {"b_values": [["f", [9, 8, 7, 6, 5]], ["f", [4, 3, 2, 1]], ["f", [0]]],
                   "b_splits": [["i", [0, 1, 4, 5]], ["i", [0, 4]], ["i", [0, 1]]]}}]
    nested_ctx = {"a": R("float32", value_key="a_values", row_splits_dtype="int64", partitions=[
        ["UniformRowLength", 2], ["RowLengths", "a_lengths_axis2"], ["RowSplits", "a_splits_axis3"]])}
    nested_lists = {"b": R("float32", value_key="b_values", partitions=[["RowSplits", "b_splits"]]),
                    "c": R("float32", value_key="b_values", partitions=[["UniformRowLength", 1]])}
    seq("seq_ragged_nested_batch", "parse_sequence_example", nested_seq, context=nested_ctx, sequence=nested_lists)
    seq("seq_ragged_nested_single", "parse_single_sequence_example", nested_seq, context=nested_ctx,
        sequence=nested_lists)
    for call in ("parse_single_sequence_example", "parse_sequence_example"):
        seq(f"seq_ragged_misaligned_{call}", call, [{"lists": {
            "b_values": [["f", [1, 2, 3, 4]], ["f", [2, 4, 6]]], "b_splits": [["i", [0, 1, 4]]]}}],
            sequence={"b": R("float32", value_key="b_values", partitions=[["RowSplits", "b_splits"]],
                             validate=True)})
    return out


def main() -> int:
    records = {}
    for name, case in cases().items():
        out = run(case)
        case = dict(case)
        case["records"] = [base64.b64encode(r).decode() for r in case["records"]]
        records[name] = {**case, "tf": out}
    OUT.write_text(json.dumps({"tensorflow": tf.__version__, "cases": records}, indent=1, sort_keys=True) + "\n")
    errors = sum("error" in c["tf"] for c in records.values())
    print(f"wrote {OUT} ({len(records)} cases, {errors} errors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
