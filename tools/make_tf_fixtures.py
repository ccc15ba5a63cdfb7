"""Writes TensorFlow-made interop fixtures to tests/data/fixtures/ (needs TensorFlow).

Run with a Python that has TensorFlow installed (not the project venv):

    python3 -m venv /tmp/tfvenv && /tmp/tfvenv/bin/pip install tensorflow-cpu
    /tmp/tfvenv/bin/python tools/make_tf_fixtures.py

Every file is written by TensorFlow itself (tf.io.TFRecordWriter, tf.train.Example,
tf.data readers, tf.io.parse_example); manifest.json records the inputs and what
TensorFlow produced, so tests/data/test_interop_fixtures.py can check tpustrategy
against TensorFlow without TensorFlow installed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "fixtures")


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def write_records(
    path: str, records: list[bytes], compression: str, flush_at: int | None = None
) -> None:
    with tf.io.TFRecordWriter(path, tf.io.TFRecordOptions(compression_type=compression)) as w:
        for i, r in enumerate(records):
            if i == flush_at:
                w.flush()
            w.write(r)


def python_zlib_matches(path: str, uncompressed_path: str, compression: str) -> bool:
    """Whether Python's zlib with TF's settings turns TF's uncompressed file into TF's bytes."""
    data = open(uncompressed_path, "rb").read()
    comp = zlib.compressobj(-1, zlib.DEFLATED, 31 if compression == "GZIP" else 15, 9)
    return comp.compress(data) + comp.flush() == open(path, "rb").read()


def make_records() -> list[bytes]:
    rng = np.random.default_rng(20240601)
    records = [
        b"",
        b"a",
        b"\x00",
        b"trailing zeros\x00\x00\x00",
        "unicode ✓ bytes".encode(),
        bytes(range(256)),
        rng.bytes(100_000),
    ]
    records += [rng.bytes(int(n)) for n in rng.integers(0, 300, size=40)]
    return records


def example_cases() -> list[dict]:
    """Feature dicts: name -> (kind, values). Floats are float32-exact."""
    return [
        {
            "floats": ("float", [1.5, -2.25, 3.0e10]),
            "ints": ("int64", [1, -2, 2**40, -(2**63)]),
            "strs": ("bytes", [b"abc", "héllo".encode(), b"\x00tail\x00"]),
        },
        {"empty_f": ("float", []), "empty_i": ("int64", []), "empty_b": ("bytes", [])},
        {"ключ": ("bytes", ["значение".encode()]), "label": ("int64", [7])},
        {"x": ("float", [float(np.float32(i / 3)) for i in range(64)]), "label": ("int64", [3])},
    ]


def to_tf_example(case: dict) -> tf.train.Example:
    feats = {}
    for key, (kind, values) in case.items():
        if kind == "float":
            feats[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
        elif kind == "int64":
            feats[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        else:
            feats[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feats))


def jsonable(case: dict) -> dict:
    return {
        k: {"kind": kind, "values": [b64(v) for v in vals] if kind == "bytes" else vals}
        for k, (kind, vals) in case.items()
    }


TF_DTYPE = {"float": tf.float32, "int64": tf.int64, "bytes": tf.string}


def tf_parse(serialized: bytes, case: dict) -> dict:
    spec = {k: tf.io.VarLenFeature(TF_DTYPE[kind]) for k, (kind, _) in case.items()}
    parsed = tf.io.parse_single_example(serialized, spec)
    out = {}
    for k, (kind, _) in case.items():
        vals = parsed[k].values.numpy().tolist()
        out[k] = [b64(v) for v in vals] if kind == "bytes" else vals
    return out


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    manifest: dict = {
        "tensorflow_version": tf.__version__,
        "python_zlib": zlib.ZLIB_RUNTIME_VERSION,
    }

    records = make_records()
    manifest["records"] = [b64(r) for r in records]
    files = {}
    for name, comp in (
        ("records.tfrecord", ""),
        ("records.tfrecord.gz", "GZIP"),
        ("records.tfrecord.zlib", "ZLIB"),
    ):
        path = os.path.join(OUT, name)
        write_records(path, records, comp)
        read_back = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=comp)]
        assert read_back == records, name
        files[name] = {
            "compression_type": comp,
            "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
            "python_zlib_gives_same_bytes": python_zlib_matches(
                path, os.path.join(OUT, "records.tfrecord"), comp
            )
            if comp
            else None,
        }
    for comp, ext in (("GZIP", "gz"), ("ZLIB", "zlib")):
        name = f"records_flushed.tfrecord.{ext}"
        write_records(os.path.join(OUT, name), records, comp, flush_at=20)
        files[name] = {"compression_type": comp, "flush_before_record": 20}
    manifest["tfrecord_files"] = files

    # Text lines: TF TextLineDataset on edge cases.
    text = b"first\nsecond\r\n\nthird\r\r\n\xff\xfe raw\nno newline at end\r"
    for name, comp in (("lines.txt", ""), ("lines.txt.gz", "GZIP")):
        path = os.path.join(OUT, name)
        if comp:
            c = zlib.compressobj(-1, zlib.DEFLATED, 31)
            open(path, "wb").write(c.compress(text) + c.flush())
        else:
            open(path, "wb").write(text)
    lines = [x.numpy() for x in tf.data.TextLineDataset(os.path.join(OUT, "lines.txt"))]
    gz_lines = [
        x.numpy() for x in tf.data.TextLineDataset(os.path.join(OUT, "lines.txt.gz"), "GZIP")
    ]
    assert lines == gz_lines
    manifest["text_lines"] = {
        "file": "lines.txt",
        "gz_file": "lines.txt.gz",
        "lines": [b64(x) for x in lines],
    }

    # Fixed-length records with header and footer.
    body = bytes(range(40))
    open(os.path.join(OUT, "fixed.bin"), "wb").write(b"HDR" + body + b"FT")
    fixed = [
        x.numpy()
        for x in tf.data.FixedLengthRecordDataset(
            os.path.join(OUT, "fixed.bin"), 8, header_bytes=3, footer_bytes=2
        )
    ]
    manifest["fixed_length"] = {
        "file": "fixed.bin",
        "record_bytes": 8,
        "header_bytes": 3,
        "footer_bytes": 2,
        "records": [b64(x) for x in fixed],
    }

    # Examples.
    cases = example_cases()
    exs = []
    for case in cases:
        ex = to_tf_example(case)
        default = ex.SerializeToString()
        det = ex.SerializeToString(deterministic=True)
        exs.append(
            {
                "features": jsonable(case),
                "tf_serialized": b64(default),
                "tf_serialized_deterministic": b64(det),
                "tf_parsed_varlen": tf_parse(default, case),
            }
        )
    manifest["examples"] = exs
    ex_path = os.path.join(OUT, "examples.tfrecord")
    write_records(ex_path, [base64.b64decode(e["tf_serialized"]) for e in exs], "")

    # A batch parsed with parse_example: fixed-size floats + label, with a default.
    rng = np.random.default_rng(7)
    batch = []
    for i in range(8):
        feats = {
            "x": tf.train.Feature(
                float_list=tf.train.FloatList(value=rng.random(4).astype(np.float32))
            )
        }
        if i % 3:
            feats["label"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[i * 100]))
        batch.append(
            tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString()
        )
    parsed = tf.io.parse_example(
        batch,
        {
            "x": tf.io.FixedLenFeature([2, 2], tf.float32),
            "label": tf.io.FixedLenFeature([], tf.int64, default_value=-1),
        },
    )
    manifest["parse_example_batch"] = {
        "serialized": [b64(b) for b in batch],
        "x": parsed["x"].numpy().tolist(),
        "label": parsed["label"].numpy().tolist(),
    }

    with open(os.path.join(OUT, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print(
        f"wrote {len(os.listdir(OUT))} files ({total} bytes) to {os.path.normpath(OUT)}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
