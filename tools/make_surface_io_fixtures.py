"""Records TensorFlow 2.21's results of the small ``tf.io`` / ``tf.image`` ops the surface task added.

Run with TensorFlow installed (used by this script only, never by the library or its tests)::

    /work/tfvenv/bin/python tools/make_surface_io_fixtures.py

Writes ``tests/io/fixtures/surface_ops.json`` with

- ``is_jpeg``: ``[contents as latin-1 text, TF's result]``;
- ``serialize_sparse``: ``{"sparse", "serialized": [3 hex strings]}``;
- ``serialize_many_sparse``: ``{"sparse", "serialized": [[3 hex strings] per row]}``;
- ``deserialize_many_sparse``: ``{"serialized": [[3 hex]...], "dtype", "rank", "result" | "error"}``;
- ``combined_nms``: ``{"args", "kwargs", "result": [boxes, scores, classes, valid]}`` (random
  inputs without score ties, whose order TensorFlow leaves unspecified);
- ``registered_schemes``: ``tf.io.gfile.get_registered_schemes()``;
- ``match_filenames_once``: the basenames TF's eager variable holds for ``*.txt`` in a directory
  of ``b.txt, c.txt, a.txt, d.csv``.
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "io", "fixtures", "surface_ops.json")


def sparse_json(st: tf.SparseTensor) -> dict:
    values = st.values.numpy()
    if values.dtype == object:
        values = [v.decode("latin-1") for v in values]
    else:
        values = values.tolist()
    return {"indices": st.indices.numpy().tolist(), "values": values,
            "dtype": st.values.dtype.name, "dense_shape": st.dense_shape.numpy().tolist()}


def make_sparse(indices, values, shape, dtype) -> tf.SparseTensor:
    idx = np.asarray(indices, np.int64).reshape(-1, len(shape))
    return tf.sparse.SparseTensor(idx, tf.constant(values, dtype=dtype), shape)


SPARSES = [
    ([[0, 1], [2, 3]], [7, 8], [3, 4], tf.int32),
    ([[0, 0, 1], [1, 2, 0]], [1.5, -2.25], [2, 3, 2], tf.float32),
    ([[0], [4]], [b"ab", b""], [5], tf.string),
    ([], [], [2, 2], tf.int64),
    ([[1, 1]], [True], [2, 2], tf.bool),
    ([[0, 0], [1, 1]], [1.0, 2.0], [2, 2], tf.float64),
]
MANY = [
    ([[0, 0], [0, 3], [2, 1]], [1, 2, 3], [3, 4], tf.int32),
    ([[0, 1, 1], [1, 0, 0], [1, 2, 1]], [b"x", b"yy", b"z"], [2, 3, 2], tf.string),
    ([[0, 0, 0, 0], [1, 0, 1, 2]], [0.5, 1.5], [2, 1, 2, 3], tf.float32),
    ([], [], [3, 2], tf.float32),
]


def main() -> None:
    out: dict = {}
    jpegs = [b"\xff\xd8\xff\xe0\x00\x10JFIF", b"\xff\xd8\xff", b"\xff\xd8", b"", b"GIF89a",
             b"\x89PNG\r\n\x1a\n", b"\xff\xd9\xff", b"\x00\xff\xd8\xff"]
    out["is_jpeg"] = [[b.decode("latin-1"), bool(tf.io.is_jpeg(b).numpy())] for b in jpegs]

    out["serialize_sparse"] = []
    for case in SPARSES:
        st = make_sparse(*case)
        out["serialize_sparse"].append({"sparse": sparse_json(st),
                                        "serialized": [x.hex() for x in tf.io.serialize_sparse(st).numpy()]})
    out["serialize_many_sparse"] = []
    for case in MANY:
        st = make_sparse(*case)
        ser = tf.io.serialize_many_sparse(st).numpy()
        rows = [[x.hex() for x in row] for row in ser]
        back = tf.io.deserialize_many_sparse(ser, st.values.dtype)
        assert sparse_json(back) == sparse_json(st)
        out["serialize_many_sparse"].append({"sparse": sparse_json(st), "serialized": rows})

    des = []
    parts = [make_sparse([[0, 1], [1, 0]], [1, 2], [2, 3], tf.int32),
             make_sparse([[2, 4]], [3], [3, 5], tf.int32),
             make_sparse([], [], [1, 1], tf.int32)]
    stacked = tf.stack([tf.io.serialize_sparse(p) for p in parts]).numpy()
    groups = [("three shapes", stacked, tf.int32, None), ("with rank", stacked, tf.int32, 3),
              ("wrong dtype", stacked, tf.float32, None),
              ("rank mismatch", tf.stack([tf.io.serialize_sparse(parts[0]), tf.io.serialize_sparse(
                  make_sparse([[1]], [1], [4], tf.int32))]).numpy(), tf.int32, None),
              ("unsorted rows kept in order", tf.stack([tf.io.serialize_sparse(
                  tf.sparse.SparseTensor(np.array([[1, 0], [0, 2]], np.int64), tf.constant([5, 6]), [2, 3]))]).numpy(),
               tf.int32, None)]
    for name, ser, dtype, rank in groups:
        case = {"name": name, "serialized": [[x.hex() for x in row] for row in ser], "dtype": dtype.name,
                "rank": rank}
        try:
            case["result"] = sparse_json(tf.io.deserialize_many_sparse(ser, dtype, rank=rank))
        except Exception as e:  # noqa: BLE001 - recording TF's error
            case["error"] = [type(e).__name__, str(e).splitlines()[0]]
        des.append(case)
    out["deserialize_many_sparse"] = des

    rng = np.random.default_rng(7)
    nms = []
    configs = [
        dict(batch=2, boxes=12, q=1, classes=3, per_class=4, total=6, iou=0.5, score=-np.inf, pad=False, clip=True),
        dict(batch=2, boxes=10, q=3, classes=3, per_class=3, total=20, iou=0.4, score=0.3, pad=False, clip=True),
        dict(batch=1, boxes=8, q=1, classes=2, per_class=2, total=10, iou=0.5, score=0.1, pad=True, clip=True),
        dict(batch=3, boxes=9, q=2, classes=2, per_class=5, total=4, iou=0.6, score=-np.inf, pad=True, clip=False),
        dict(batch=1, boxes=6, q=1, classes=4, per_class=10, total=30, iou=0.3, score=0.5, pad=False, clip=False),
        dict(batch=1, boxes=5, q=1, classes=1, per_class=2, total=3, iou=1.0, score=0.99, pad=False, clip=True),
    ]
    for c in configs:
        corner = rng.uniform(-0.2, 1.0, (c["batch"], c["boxes"], c["q"], 2)).astype(np.float32)
        size = rng.uniform(0.05, 0.6, (c["batch"], c["boxes"], c["q"], 2)).astype(np.float32)
        boxes = np.concatenate([corner, corner + size], -1)
        scores = rng.permutation(c["batch"] * c["boxes"] * c["classes"]).reshape(
            c["batch"], c["boxes"], c["classes"]).astype(np.float32) / (c["batch"] * c["boxes"] * c["classes"])
        res = tf.image.combined_non_max_suppression(
            boxes, scores, c["per_class"], c["total"], iou_threshold=c["iou"], score_threshold=c["score"],
            pad_per_class=c["pad"], clip_boxes=c["clip"])
        nms.append({"boxes": boxes.tolist(), "scores": scores.tolist(),
                    "kwargs": {"max_output_size_per_class": c["per_class"], "max_total_size": c["total"],
                               "iou_threshold": c["iou"], "score_threshold": float(c["score"]),
                               "pad_per_class": c["pad"], "clip_boxes": c["clip"]},
                    "result": [r.numpy().tolist() for r in res]})
    out["combined_nms"] = nms
    errs = []
    b = np.zeros((1, 2, 1, 4), np.float32)
    s = np.zeros((1, 2, 2), np.float32)
    for name, args in [("per_class 0", (b, s, 0, 3)), ("total 0", (b, s, 2, 0)),
                       ("q mismatch", (np.zeros((1, 2, 3, 4), np.float32), s, 2, 3)),
                       ("boxes rank", (np.zeros((2, 1, 4), np.float32), s, 2, 3)),
                       ("iou", (b, s, 2, 3, 1.5))]:
        try:
            tf.image.combined_non_max_suppression(*args)
            errs.append([name, None])
        except Exception as e:  # noqa: BLE001
            errs.append([name, [type(e).__name__, str(e).splitlines()[0]]])
    out["combined_nms_errors"] = errs

    out["registered_schemes"] = tf.io.gfile.get_registered_schemes()
    with tempfile.TemporaryDirectory() as d:
        for n in ("b.txt", "c.txt", "a.txt", "d.csv"):
            open(os.path.join(d, n), "w").close()
        v = tf.io.match_filenames_once(os.path.join(d, "*.txt"))
        out["match_filenames_once"] = {"type": type(v).__name__, "dtype": v.dtype.name,
                                       "basenames": [os.path.basename(x.decode()) for x in v.numpy()]}
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
