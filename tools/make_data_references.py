"""Reference values computed by TensorFlow 2.21 for the tf.data transformation tests.

Run with TensorFlow's interpreter (the library and the tests never import TensorFlow):

    /work/tfvenv/bin/python tools/make_data_references.py

Writes ``tests/data/fixtures/data_transformation_references.json``: for each
named case the elements TensorFlow produces (nested lists; ragged batches as
their rows, sparse batches as ``indices`` / ``values`` / ``dense_shape``), the
cardinality it reports and its element shapes (``None`` for unknown
dimensions). ``tests/data/test_tf_references.py`` builds the same pipelines
with ``tpustrategy.data`` and compares.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "fixtures", "data_transformation_references.json")


def _py(x):
    if isinstance(x, tf.RaggedTensor):
        return {"ragged": _py(x.to_list()), "row_lengths": x.row_lengths().numpy().tolist()}
    if isinstance(x, tf.SparseTensor):
        return {"indices": x.indices.numpy().tolist(), "values": _py(x.values), "dense_shape": x.dense_shape.numpy().tolist()}
    if isinstance(x, dict):
        return {k: _py(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return [_py(v) for v in x]
    a = np.asarray(x)
    if a.dtype == object or a.dtype.kind == "S":
        if a.ndim == 0:
            return a.item().decode("latin-1")
        return [_py(v) for v in a]
    return a.tolist()


def _shapes(ds):
    def one(s):
        if isinstance(s, tf.TensorSpec):
            return None if s.shape.rank is None else s.shape.as_list()
        return type(s).__name__

    return tf.nest.map_structure(one, ds.element_spec)


def _case(ds, limit=None):
    card = int(ds.cardinality())
    if limit is not None:
        ds = ds.take(limit)
    return {"values": [_py(e) for e in ds], "cardinality": card, "shapes": _shapes(ds) if limit is None else None}


def _check_numerics(x):
    return tf.debugging.check_numerics(x, "message")


def cases():
    out = {}
    for size, shift, stride, drop in [(3, 2, 1, False), (3, 2, 1, True), (4, 1, 2, False), (2, 5, 3, False), (5, 3, 2, True), (3, None, 1, False)]:
        name = f"window_{size}_{shift}_{stride}_{drop}"
        w = tf.data.Dataset.range(20).window(size, shift, stride, drop)
        case = _case(w.flat_map(lambda x, size=size: x.batch(size)))
        case["window_cardinality"] = int(w.cardinality())
        out[name] = case
    zipped = tf.data.Dataset.zip((tf.data.Dataset.range(7), tf.data.Dataset.range(7).map(lambda x: x * 10))).window(3, 2)
    out["window_zip"] = _case(zipped.flat_map(lambda a, b: tf.data.Dataset.zip((a.batch(3), b.batch(3)))))

    small = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0], np.int64)
    out["group_by_window_small_groups"] = _case(
        tf.data.Dataset.from_tensor_slices(small).group_by_window(lambda x: x % 2, lambda _, xs: xs.batch(4), window_size=4)
    )
    out["group_by_window_size_func"] = _case(
        tf.data.Dataset.range(30).group_by_window(lambda x: x % 3, lambda _, xs: xs.batch(10), window_size_func=lambda k: k + 2)
    )
    imm = np.array([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 0, 2, 2, 0, 0], np.int64)
    out["group_by_window_infinite"] = _case(
        tf.data.Dataset.from_tensor_slices(imm).repeat().group_by_window(lambda x: x % 3, lambda _, xs: xs.batch(4), window_size=4),
        limit=12,
    )
    out["group_by_window_infinite"]["cardinality"] = int(
        tf.data.Dataset.from_tensor_slices(imm).repeat().group_by_window(lambda x: x % 3, lambda _, xs: xs.batch(4), window_size=4).cardinality()
    )

    def lengths(n):
        return tf.range(n % 9 + 1)

    out["bucket_mixed"] = _case(
        tf.data.Dataset.range(1, 25).map(lengths).bucket_by_sequence_length(lambda x: tf.shape(x)[0], [3, 6], [3, 2, 2])
    )
    out["bucket_pad_to_boundary"] = _case(
        tf.data.Dataset.range(1, 11).map(lambda n: tf.ones([n], tf.int64)).bucket_by_sequence_length(
            lambda x: tf.shape(x)[0], [3, 7, 11], [2, 2, 2, 2], pad_to_bucket_boundary=True
        )
    )
    out["bucket_drop_remainder"] = _case(
        tf.data.Dataset.range(1, 25).map(lengths).bucket_by_sequence_length(
            lambda x: tf.shape(x)[0], [3, 6], [3, 2, 2], drop_remainder=True
        )
    )

    out["scan_fibonacci"] = _case(
        tf.data.Dataset.from_tensors(1).repeat(10).scan([0, 1], lambda a, _: ([a[1], a[0] + a[1]], a[1]))
    )
    out["scan_running_sum_and_count"] = _case(
        tf.data.Dataset.range(8).scan((tf.constant(0, tf.int64), tf.constant(0, tf.int64)), lambda s, x: ((s[0] + x, s[1] + 1), (s[0], s[1])))
    )
    out["scan_growing_state"] = _case(
        tf.data.Dataset.from_tensors(0).repeat(4).scan(tf.constant([0]), lambda s, x: (tf.concat([s, s], 0), (s, x)))
    )
    out["unique_ints"] = _case(tf.data.Dataset.from_tensor_slices(np.array([1, 2, 4, 3, 2, 1, 2, 3, 4], np.int64)).unique())
    out["unique_strings"] = _case(tf.data.Dataset.from_tensor_slices(["foo", "bar", "baz", "baz", "bar", "foo"]).unique())
    out["take_while_range"] = _case(tf.data.Dataset.range(16).take_while(lambda x: x < 7))
    out["ragged_batch_vectors"] = _case(tf.data.Dataset.range(7).map(lambda x: tf.fill([x], x)).ragged_batch(3))
    out["ragged_batch_2_by_x"] = _case(tf.data.Dataset.range(5).map(lambda x: tf.fill([2, x], x)).ragged_batch(2, drop_remainder=True))
    out["ragged_batch_scalars"] = _case(tf.data.Dataset.range(5).ragged_batch(2))
    comps = np.array([3, 0, 5, 1, 2, 4, 4], np.int32)
    out["sparse_batch"] = _case(tf.data.Dataset.from_tensor_slices(comps).map(lambda x: tf.fill([x], x)).sparse_batch(3, [5]))
    out["sparse_batch_unknown_dim"] = _case(
        tf.data.Dataset.from_tensor_slices(np.array([2, 1, 3], np.int32)).map(lambda x: tf.fill([x, x], x)).sparse_batch(2, [3, None])
    )
    out["ignore_errors"] = _case(
        tf.data.Dataset.from_tensor_slices(np.array([1.0, np.nan, 2.0, np.nan, np.nan, 3.0], np.float32)).map(_check_numerics).ignore_errors()
    )
    reducer = tf.data.experimental.Reducer(lambda _: np.int64(0), lambda s, x: s + x, lambda s: s)
    out["group_by_reducer_sum"] = _case(
        tf.data.Dataset.range(20).apply(tf.data.experimental.group_by_reducer(lambda x: (x * 7) % 3, reducer))
    )
    out["pad_to_cardinality"] = _case(
        tf.data.Dataset.from_tensor_slices({"a": [1, 2, 3]}).apply(tf.data.experimental.pad_to_cardinality(5))
    )
    out["assert_cardinality"] = _case(tf.data.Dataset.range(6).filter(lambda x: True).apply(tf.data.experimental.assert_cardinality(6)))
    return out


def main() -> None:
    refs = {"_about": f"Computed by TensorFlow {tf.__version__} with tools/make_data_references.py.", "cases": cases()}
    with open(OUT, "w") as f:
        json.dump(refs, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"wrote {len(refs['cases'])} cases to {os.path.normpath(OUT)}")


if __name__ == "__main__":
    main()
