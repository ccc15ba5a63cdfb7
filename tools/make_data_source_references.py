"""Reference values computed by TensorFlow 2.21 for the tf.data sources tests.

Run with TensorFlow's interpreter (never imported by the library or tests):

    /work/tfvenv/bin/python tools/make_data_source_references.py

Writes ``tests/data/fixtures/data_source_references.json``: the inputs (CSV
text, Example features) and what TensorFlow's ``make_csv_dataset``,
``CsvDataset``, ``make_batched_features_dataset``, ``cardinality`` and
``Options`` give for them.
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "fixtures", "data_source_references.json")

CSV_FILES = [
    "name,age,height,label\nann,31,1.62,1\nbob,45,1.80,0\ncid,,1.75,1\n",
    'name,age,height,label\n"d,q",22,1.55,0\neve,60,1.70,1\n',
]

NA_CSV = "a,b,c\n1,?,x\n2,3.5,y\n,4.5,z\n"


def _py(x):
    if isinstance(x, dict):
        return {k: _py(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return [_py(v) for v in x]
    a = np.asarray(x)
    if a.dtype == object or a.dtype.kind == "S":
        return [v.decode() if isinstance(v, bytes) else v for v in a.reshape(-1).tolist()] if a.ndim else a.item().decode()
    return a.tolist()


def csv_refs(tmp):
    names = []
    for i, text in enumerate(CSV_FILES):
        p = os.path.join(tmp, f"f{i}.csv")
        with open(p, "w") as f:
            f.write(text)
        names.append(p)
    out = {}
    ds = tf.data.experimental.make_csv_dataset(names, batch_size=2, shuffle=False, num_epochs=1,
                                               column_defaults=["", 0, 0.0, 0])
    out["defaults_given"] = [_py(b) for b in ds]
    ds = tf.data.experimental.make_csv_dataset(names, batch_size=3, shuffle=False, num_epochs=1, label_name="label",
                                               select_columns=["name", "height", "label"])
    out["label_and_select"] = [[_py(f), _py(lbl)] for f, lbl in ds]
    out["label_and_select_dtypes"] = {k: v.dtype.name for k, v in ds.element_spec[0].items()}
    ds = tf.data.experimental.make_csv_dataset(names[1:], batch_size=2, shuffle=False, num_epochs=1,
                                               column_defaults=["", 0, 0.0, 0])
    out["inferred_dtypes"] = {
        k: v.dtype.name
        for k, v in tf.data.experimental.make_csv_dataset(names[1:], batch_size=2, shuffle=False,
                                                          num_epochs=1).element_spec.items()
    }
    out["second_file"] = [_py(b) for b in ds]
    p = os.path.join(tmp, "na.csv")
    with open(p, "w") as f:
        f.write(NA_CSV)
    ds = tf.data.experimental.make_csv_dataset(p, batch_size=5, na_value="?", num_epochs=1, shuffle=False,
                                               label_name="c")
    out["na_inferred"] = [[_py(f), _py(lbl)] for f, lbl in ds]
    return out


def example_refs(tmp):
    paths = []
    for f in range(2):
        p = os.path.join(tmp, f"e{f}.tfrecord")
        with tf.io.TFRecordWriter(p) as w:
            for i in range(5):
                v = f * 10 + i
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=[v, v + 0.5])),
                    "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[v % 3])),
                    "w": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"w%d" % v])),
                }))
                w.write(ex.SerializeToString())
        paths.append(p)
    features = {"x": tf.io.FixedLenFeature([2], tf.float32), "y": tf.io.FixedLenFeature([], tf.int64),
                "w": tf.io.FixedLenFeature([], tf.string)}
    ds = tf.data.experimental.make_batched_features_dataset(paths, 4, features, label_key="y", num_epochs=1,
                                                            shuffle=False)
    return {"batches": [[_py(f), _py(lbl)] for f, lbl in ds]}


def main():
    with tempfile.TemporaryDirectory() as tmp:
        refs = {"csv_files": CSV_FILES, "na_csv": NA_CSV, "make_csv_dataset": csv_refs(tmp), "make_batched_features": example_refs(tmp)}
    D = tf.data.Dataset
    refs["cardinality"] = {
        "sample_two_finite": int(D.sample_from_datasets([D.range(3), D.range(4)]).cardinality()),
        "sample_one_infinite": int(D.sample_from_datasets([D.range(3), D.range(4).repeat()]).cardinality()),
        "choose": int(D.choose_from_datasets([D.range(3), D.range(4)], D.range(2)).cardinality()),
        "counter": int(D.counter().cardinality()),
        "random": int(D.random().cardinality()),
        "from_list": int(tf.data.experimental.from_list([1, 2, 3]).cardinality()),
    }
    refs["from_list"] = [_py(x) for x in tf.data.experimental.from_list([(1, "a"), (2, "b")])]
    refs["at"] = int(tf.data.experimental.at(D.range(10), 3))
    o = tf.data.Options()
    refs["options_unset"] = {n: getattr(o, n) for n in ["dataset_name", "deterministic", "experimental_slack",
                                                          "experimental_symbolic_checkpoint",
                                                          "experimental_warm_start"]}
    refs["autotune_algorithms"] = {m.name: int(m.value) for m in tf.data.experimental.AutotuneAlgorithm}
    refs["external_state_policies"] = {m.name: int(m.value) for m in tf.data.experimental.ExternalStatePolicy}
    with open(OUT, "w") as f:
        json.dump(refs, f, indent=1, sort_keys=True)
    print("wrote", OUT)


if __name__ == "__main__":
    main()
