"""Checks against files and values made by TensorFlow 2.21 (tools/make_tf_fixtures.py).

TensorFlow is not needed to run these tests; the fixtures were written by it.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import zlib

import numpy as np
import pytest

from tpustrategy._src.data.parsing.example import (
    FixedLenFeature,
    VarLenFeature,
    parse_example,
    parse_single_example,
)
from tpustrategy._src.data.parsing.example_proto import (
    BytesList,
    Example,
    Feature,
    Features,
    FloatList,
    Int64List,
)
from tpustrategy._src.data.sources.record_io import (
    read_fixed_length_chunks,
    read_text_line_chunks,
    read_tfrecord_chunks,
)
from tpustrategy._src.data.sources.writer import TFRecordWriter

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
with open(os.path.join(FIXTURES, "manifest.json")) as _f:
    MANIFEST = json.load(_f)
RECORDS = [base64.b64decode(r) for r in MANIFEST["records"]]


def _fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def _read_all(path, **kw):
    return [r for _, c in read_tfrecord_chunks(path, **kw) for r in c]


def _write_ours(path, compression_type, flush_before=None):
    with TFRecordWriter(path, compression_type) as w:
        for i, r in enumerate(RECORDS):
            if i == flush_before:
                w.flush()
            w.write(r)
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("name", sorted(MANIFEST["tfrecord_files"]))
def test_tensorflows_tfrecord_files_read_back_to_the_manifest_records(name):
    ctype = MANIFEST["tfrecord_files"][name]["compression_type"]
    assert _read_all(_fixture(name), compression_type=ctype) == RECORDS


def test_our_uncompressed_tfrecord_bytes_equal_tensorflows(tmp_path):
    ours = _write_ours(os.path.join(tmp_path, "ours"), None)
    with open(_fixture("records.tfrecord"), "rb") as f:
        assert ours == f.read()


@pytest.mark.parametrize(
    "name",
    [
        "records.tfrecord.gz",
        "records.tfrecord.zlib",
        "records_flushed.tfrecord.gz",
        "records_flushed.tfrecord.zlib",
    ],
)
def test_our_compressed_files_hold_tensorflows_stream_and_match_its_bytes_with_the_same_zlib(
    tmp_path, name
):
    info = MANIFEST["tfrecord_files"][name]
    ctype = info["compression_type"]
    ours = _write_ours(os.path.join(tmp_path, "ours"), ctype, info.get("flush_before_record"))
    with open(_fixture(name), "rb") as f:
        theirs = f.read()
    decompress = gzip.decompress if ctype == "GZIP" else zlib.decompress
    assert decompress(ours) == decompress(theirs)
    # Compressed bytes depend on the zlib build; TF's output matched Python's zlib
    # (version in the manifest) byte for byte when the fixtures were made.
    if zlib.ZLIB_RUNTIME_VERSION == MANIFEST["python_zlib"]:
        assert ours == theirs


def test_tensorflows_text_lines_are_ours():
    info = MANIFEST["text_lines"]
    expected = [base64.b64decode(x) for x in info["lines"]]
    for name, ctype in ((info["file"], None), (info["gz_file"], "GZIP")):
        got = [
            x for _, c in read_text_line_chunks(_fixture(name), compression_type=ctype) for x in c
        ]
        assert got == expected


def test_tensorflows_fixed_length_records_are_ours():
    info = MANIFEST["fixed_length"]
    got = [
        x
        for _, c in read_fixed_length_chunks(
            _fixture(info["file"]),
            info["record_bytes"],
            header_bytes=info["header_bytes"],
            footer_bytes=info["footer_bytes"],
        )
        for x in c
    ]
    assert got == [base64.b64decode(x) for x in info["records"]]


def _our_example(features: dict):
    feats = {}
    for key, spec in features.items():
        if spec["kind"] == "float":
            feats[key] = Feature(float_list=FloatList(value=spec["values"]))
        elif spec["kind"] == "int64":
            feats[key] = Feature(int64_list=Int64List(value=spec["values"]))
        else:
            feats[key] = Feature(
                bytes_list=BytesList(value=[base64.b64decode(v) for v in spec["values"]])
            )
    return Example(features=Features(feature=feats))


@pytest.mark.parametrize("index", range(len(MANIFEST["examples"])))
def test_our_example_serialization_equals_tensorflows(index):
    case = MANIFEST["examples"][index]
    ours = _our_example(case["features"])
    # Map fields serialize in an unspecified order; with deterministic=True both
    # libraries sort the keys, so the bytes are equal.
    assert ours.SerializeToString(deterministic=True) == base64.b64decode(
        case["tf_serialized_deterministic"]
    )
    # TF's default (non-deterministic) bytes parse to the same message.
    assert Example.FromString(base64.b64decode(case["tf_serialized"])) == ours


@pytest.mark.parametrize("index", range(len(MANIFEST["examples"])))
def test_parsing_tensorflows_examples_gives_tensorflows_values(index):
    case = MANIFEST["examples"][index]
    dtype = {"float": "float32", "int64": "int64", "bytes": "string"}
    specs = {k: VarLenFeature(dtype[v["kind"]]) for k, v in case["features"].items()}
    parsed = parse_single_example(base64.b64decode(case["tf_serialized"]), specs)
    for key, values in case["tf_parsed_varlen"].items():
        if case["features"][key]["kind"] == "bytes":
            assert parsed[key].tolist() == [base64.b64decode(v) for v in values]
        else:
            np.testing.assert_array_equal(parsed[key], np.asarray(values, dtype=specs[key].dtype))


def test_parse_example_on_tensorflows_batch_gives_tensorflows_dense_values():
    info = MANIFEST["parse_example_batch"]
    batch = [base64.b64decode(b) for b in info["serialized"]]
    out = parse_example(
        batch,
        {
            "x": FixedLenFeature([2, 2], "float32"),
            "label": FixedLenFeature([], "int64", default_value=-1),
        },
    )
    np.testing.assert_array_equal(out["x"], np.asarray(info["x"], dtype=np.float32))
    np.testing.assert_array_equal(out["label"], info["label"])


def test_the_examples_file_reads_as_tensorflows_serialized_examples():
    got = _read_all(_fixture("examples.tfrecord"))
    assert got == [base64.b64decode(e["tf_serialized"]) for e in MANIFEST["examples"]]
