"""The tf.data side of ``data_vs_tfdata.py``: a subprocess run by TensorFlow's Python.

Reads one JSON command per line on stdin, ``{"case": NAME, "n": N, "dir": DIR}``,
builds that case's ``tf.data`` pipeline, iterates it to the end and
answers (counting inside tf.data with ``reduce``) one JSON line ``{"elements": count, "seconds": s}``; ``{"case": "quit"}``
ends it. It stays alive between rounds, so the two sides run interleaved
round by round. It imports only TensorFlow and NumPy (never tpustrategy).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

D = tf.data.Dataset
FEATURES = {"x": tf.io.FixedLenFeature([64], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}


def build(case: str, n: int, data_dir: str) -> tf.data.Dataset:
    if case == "window":
        return D.range(n).window(8, shift=1, drop_remainder=True).flat_map(lambda w: w.batch(8))
    if case == "group_by_window":
        return D.range(n).group_by_window(key_func=lambda x: x % 8, reduce_func=lambda k, d: d.batch(16),
                                          window_size=16)
    if case == "bucket_by_sequence_length":
        seqs = D.range(n).map(lambda x: tf.fill([x % 20 + 1], x))
        return seqs.bucket_by_sequence_length(lambda s: tf.shape(s)[0], bucket_boundaries=[5, 10, 15],
                                              bucket_batch_sizes=[32, 32, 32, 32])
    if case == "sample_from_datasets":
        return D.sample_from_datasets([D.range(n).repeat(), D.range(n).repeat(), D.range(n).repeat()],
                                      weights=[0.5, 0.3, 0.2], seed=1).take(n)
    if case == "scan":
        return D.range(n).scan(np.int64(0), lambda s, x: (s + x, s))
    if case == "unique":
        return D.range(n).map(lambda x: x % 1000).unique()
    if case == "interleave_many_files":
        files = sorted(glob.glob(os.path.join(data_dir, "many", "*.tfrecord")))
        return D.from_tensor_slices(files).interleave(tf.data.TFRecordDataset, cycle_length=16, block_length=1)
    if case == "read_batch_parse_example":
        files = sorted(glob.glob(os.path.join(data_dir, "examples", "*.tfrecord")))
        return tf.data.TFRecordDataset(files).batch(1024).map(lambda s: tf.io.parse_example(s, FEATURES))
    if case in ("images_per_example", "images_batched", "numeric_per_example", "numeric_batched"):
        return record_case(case, data_dir)
    raise ValueError(f"unknown case {case!r}")


IMAGE_FEATURES = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}
NUMERIC_FEATURES = {"x": tf.io.FixedLenFeature([240], tf.float32), "label": tf.io.FixedLenFeature([], tf.int64)}


def record_case(case: str, data_dir: str) -> tf.data.Dataset:
    """The cases of ``data_cores_vs_tfdata.py`` (3 KB image and 1 KB numeric Examples)."""
    kind, style = case.split("_", 1)
    files = sorted(glob.glob(os.path.join(data_dir, kind, "*.tfrecord")))
    auto = tf.data.AUTOTUNE
    if kind == "images":
        def one(r):
            ex = tf.io.parse_single_example(r, IMAGE_FEATURES)
            return tf.reshape(tf.io.decode_raw(ex["image"], tf.uint8), [32, 32, 3]), ex["label"]

        def many(r):
            ex = tf.io.parse_example(r, IMAGE_FEATURES)
            return tf.reshape(tf.io.decode_raw(ex["image"], tf.uint8), [-1, 32, 32, 3]), ex["label"]
    else:
        def one(r):
            ex = tf.io.parse_single_example(r, NUMERIC_FEATURES)
            return ex["x"], ex["label"]

        def many(r):
            ex = tf.io.parse_example(r, NUMERIC_FEATURES)
            return ex["x"], ex["label"]
    if style == "per_example":
        ds = D.from_tensor_slices(files).interleave(tf.data.TFRecordDataset, num_parallel_calls=auto)
        return ds.map(one, num_parallel_calls=auto).batch(256).prefetch(auto)
    return tf.data.TFRecordDataset(files).batch(256).map(many, num_parallel_calls=auto)


def count(ds: tf.data.Dataset, case: str) -> int:
    """Counts inside tf.data (``reduce`` runs in C++): no Python step per element on this side."""
    per_batch = case in ("group_by_window", "bucket_by_sequence_length", "read_batch_parse_example",
                         "images_per_example", "images_batched", "numeric_per_example", "numeric_batched")

    def add(acc, x):
        if not per_batch:
            return acc + 1
        first = x["label"] if isinstance(x, dict) else x[-1] if isinstance(x, tuple) else x
        return acc + tf.cast(tf.shape(first)[0], tf.int64)

    return ds.reduce(np.int64(0), add)


_COMPILED: dict[tuple[str, int, str], object] = {}


def compiled(case: str, n: int, data_dir: str):
    """One ``tf.function`` per case, traced on the warm-up call: later rounds time the pipeline only."""
    key = (case, n, data_dir)
    if key not in _COMPILED:
        _COMPILED[key] = tf.function(lambda: count(build(case, n, data_dir), case))
    return _COMPILED[key]


def main() -> None:
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["case"] == "quit":
            return
        fn = compiled(cmd["case"], int(cmd["n"]), cmd["dir"])
        t0 = time.perf_counter()
        n = int(fn())
        dt = time.perf_counter() - t0
        sys.stdout.write(json.dumps({"elements": n, "seconds": dt}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
