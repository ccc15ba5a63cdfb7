"""Reference values computed by TensorFlow 2.21 for the tensorflow/docs guide ports.

Run with TensorFlow's interpreter (never imported by the library or tests):

    /work/tfvenv/bin/python tools/make_guide_references.py

Writes ``tests/data/fixtures/guide_references.json``: the small in-memory / temp-file
inputs that stand in for the guides' downloads, and what TensorFlow gives for the
deterministic pipelines of ``guide/data.ipynb``, ``guide/data_performance.ipynb`` and
``tutorials/distribute/input.ipynb`` (2 virtual CPUs, as the tutorial sets up).
"""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
import tensorflow as tf

tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration() for _ in range(2)]
)

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "fixtures", "guide_references.json")


def _py(x):
    if isinstance(x, dict):
        return {k: _py(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return [_py(v) for v in x]
    a = np.asarray(x)
    if a.dtype == object or a.dtype.kind == "S":
        return np.vectorize(lambda b: b.decode(), otypes=[object])(a).tolist() if a.ndim else a.item().decode()
    return a.tolist()


def inputs() -> dict:
    """Stand-ins for the guides' downloads (small, deterministic)."""
    iliad = [
        "".join(f"{name} line {j}: sing, goddess, the anger of peleus' son\n" for j in range(7))
        for name in ("cowper", "derby", "butler")
    ]
    rng = np.random.default_rng(7)
    rows = ["survived,sex,age,n_siblings_spouses,parch,fare,class,deck,embark_town,alone"]
    for i in range(627):
        rows.append(
            f"{int(rng.integers(0, 2))},{['male', 'female'][i % 2]},{20 + i % 50}.0,{i % 3},{i % 2},"
            f"{7.25 + i % 13:.4f},{['First', 'Second', 'Third'][i % 3]},{'ABCDE'[i % 5]},"
            f"{['Southampton', 'Cherbourg', 'Queenstown'][i % 3]},{'ny'[i % 2]}"
        )
    cc = ["V1,V2,Amount,Class"]
    for i in range(200):
        cc.append(f"{i * 0.5:.1f},{-i * 0.25:.2f},{i % 17}.5,{1 if i % 9 == 0 else 0}")
    return {
        "iliad": iliad,
        "titanic": "\n".join(rows) + "\n",
        "missing": "1,2,3,4\n,2,3,4\n1,,3,4\n1,2,,4\n1,2,3,\n,,,\n",
        "creditcard": "\n".join(cc) + "\n",
    }


def data_guide(ins: dict, tmp: str) -> dict:
    out: dict = {}
    paths = []
    for name, text in zip(("cowper", "derby", "butler"), ins["iliad"]):
        p = os.path.join(tmp, f"{name}.txt")
        open(p, "w").write(text)
        paths.append(p)
    titanic = os.path.join(tmp, "train.csv")
    open(titanic, "w").write(ins["titanic"])
    missing = os.path.join(tmp, "missing.csv")
    open(missing, "w").write(ins["missing"])
    cc = os.path.join(tmp, "creditcard.csv")
    open(cc, "w").write(ins["creditcard"])

    ds = tf.data.Dataset.from_tensor_slices([8, 3, 0, 8, 2, 1])
    out["basic"] = [_py(e) for e in ds]
    out["reduce_sum"] = _py(ds.reduce(0, lambda state, value: state + value))

    def count(stop):
        i = 0
        while i < stop:
            yield i
            i += 1

    ds_counter = tf.data.Dataset.from_generator(count, args=[25], output_types=tf.int32, output_shapes=())
    out["gen_count"] = [_py(b) for b in ds_counter.repeat().batch(10).take(10)]
    out["textline"] = [_py(x) for x in tf.data.TextLineDataset(paths).take(5)]
    files_ds = tf.data.Dataset.from_tensor_slices(paths)
    out["interleave_textline"] = [_py(x) for x in files_ds.interleave(tf.data.TextLineDataset, cycle_length=3).take(9)]
    lines = tf.data.TextLineDataset(titanic)
    out["survivors"] = [
        _py(x) for x in lines.skip(1).filter(lambda line: tf.not_equal(tf.strings.substr(line, 0, 1), "0")).take(10)
    ]
    b = tf.data.experimental.make_csv_dataset(titanic, batch_size=4, label_name="survived", shuffle=False)
    f, lbl = next(iter(b))
    out["make_csv"] = [_py(dict(f)), _py(lbl), list(f.keys())]
    b = tf.data.experimental.make_csv_dataset(
        titanic, batch_size=4, label_name="survived", select_columns=["class", "fare", "survived"], shuffle=False
    )
    f, lbl = next(iter(b))
    out["make_csv_select"] = [_py(dict(f)), _py(lbl), list(f.keys())]
    types = [tf.int32, tf.string, tf.float32, tf.int32, tf.int32, tf.float32, tf.string, tf.string, tf.string, tf.string]
    out["csv_dataset"] = [_py(list(x)) for x in tf.data.experimental.CsvDataset(titanic, types, header=True).take(10)]
    d = tf.data.experimental.CsvDataset(missing, [999, 999, 999, 999]).map(lambda *items: tf.stack(items))
    out["missing"] = [_py(x) for x in d]
    d = tf.data.experimental.CsvDataset(missing, [999, 999], select_cols=[1, 3]).map(lambda *items: tf.stack(items))
    out["missing_select"] = [_py(x) for x in d]

    dataset = tf.data.Dataset.zip((tf.data.Dataset.range(100), tf.data.Dataset.range(0, -100, -1)))
    out["zip_batch"] = [_py(b) for b in dataset.batch(4).take(4)]
    out["zip_batch_shapes"] = [[s.shape.as_list() for s in dataset.batch(k, drop_remainder=r).element_spec]
                               for k, r in ((4, False), (7, True))]
    d = tf.data.Dataset.range(100).map(lambda x: tf.fill([tf.cast(x, tf.int32)], x)).padded_batch(4, padded_shapes=(None,))
    out["padded_batch"] = [_py(b) for b in d.take(2)]
    out["repeat_then_batch"] = [int(b.shape[0]) for b in lines.repeat(3).batch(128)]
    out["batch_then_repeat"] = [int(b.shape[0]) for b in lines.batch(128).repeat(3)]

    range_ds = tf.data.Dataset.range(100000)
    batches = range_ds.batch(10, drop_remainder=True)
    out["batches"] = [_py(b) for b in batches.take(5)]

    def dense_1_step(batch):
        return batch[:-1], batch[1:]

    out["dense_1_step"] = [_py(x) for x in batches.map(dense_1_step).take(3)]
    out["label_next_5"] = [
        _py(x) for x in range_ds.batch(15, drop_remainder=True).map(lambda b: (b[:-5], b[-5:])).take(3)
    ]
    features = range_ds.batch(10, drop_remainder=True)
    labels = range_ds.batch(10).skip(1).map(lambda labels: labels[:3])
    out["predicted_steps"] = [_py(x) for x in tf.data.Dataset.zip((features, labels)).take(5)]
    windows = range_ds.window(5, shift=1)
    out["window_flat"] = [_py(x) for x in windows.flat_map(lambda x: x).take(30)]
    out["window_batch"] = [_py(x) for x in windows.flat_map(lambda s: s.batch(5, drop_remainder=True)).take(5)]
    ds = range_ds.window(10, shift=5, stride=3).flat_map(lambda s: s.batch(10, drop_remainder=True))
    out["make_window_dataset"] = [_py(x) for x in ds.take(10)]
    out["dense_labels_ds"] = [_py(x) for x in ds.map(dense_1_step).take(3)]

    creditcard_ds = tf.data.experimental.make_csv_dataset(
        cc, batch_size=16, label_name="Class", shuffle=False, num_epochs=1,
        column_defaults=[float()] * 3 + [int()],  # noqa: UP018 (the guide's spelling)
    )

    def count_classes(counts, batch):
        features, labels = batch
        counts["class_0"] += tf.reduce_sum(tf.cast(labels == 0, tf.int32))
        counts["class_1"] += tf.reduce_sum(tf.cast(labels == 1, tf.int32))
        return counts

    counts = creditcard_ds.take(10).reduce(initial_state={"class_0": 0, "class_1": 0}, reduce_func=count_classes)
    out["class_counts"] = _py(counts)
    out["positive_labels"] = _py(
        next(iter(creditcard_ds.unbatch().filter(lambda f, label: label == 1).repeat().batch(10)))[1]
    )

    # TFRecord of Examples (the fsns file's two features) and the guide's tf_parse.
    rec = os.path.join(tmp, "fsns.tfrec")
    with tf.io.TFRecordWriter(rec) as w:
        for i in range(12):
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes([137, 80, i]) * 3])),
                "image/text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[f"text {i}".encode()])),
            }))
            w.write(ex.SerializeToString())

    def tf_parse(eg):
        example = tf.io.parse_example(eg[tf.newaxis], {
            "image/encoded": tf.io.FixedLenFeature(shape=(), dtype=tf.string),
            "image/text": tf.io.FixedLenFeature(shape=(), dtype=tf.string),
        })
        return example["image/encoded"][0], example["image/text"][0]

    img, txt = next(iter(tf.data.TFRecordDataset(filenames=[rec]).map(tf_parse).batch(10)))
    out["tf_parse_batch"] = [[v.hex() for v in img.numpy().tolist()], _py(txt)]
    return out


def performance_guide() -> dict:
    out: dict = {}

    def art(num_samples=3):
        def gen(n):
            for sample_idx in range(n):
                yield (sample_idx,)
        return tf.data.Dataset.from_generator(
            gen, output_signature=tf.TensorSpec(shape=(1,), dtype=tf.int64), args=(num_samples,))

    def epochs(ds, n=2):
        return [[_py(s) for s in ds] for _ in range(n)]

    out["artificial"] = epochs(art())
    out["interleave"] = epochs(tf.data.Dataset.range(2).interleave(lambda _: art()))
    out["interleave_parallel"] = epochs(
        tf.data.Dataset.range(2).interleave(lambda _: art(), num_parallel_calls=tf.data.AUTOTUNE))
    f = lambda i: tf.data.Dataset.from_tensor_slices([i] * 3)  # noqa: E731
    out["interleave_cycle_defaults"] = {
        str(npc): [int(x) for x in tf.data.Dataset.range(4).interleave(f, num_parallel_calls=npc)]
        for npc in (None, 1, 2, tf.data.AUTOTUNE)
    }
    out["host_cpus"] = len(os.sched_getaffinity(0))
    out["cache"] = epochs(art().map(lambda s: s).cache(), 5)
    fast = tf.data.Dataset.range(10000)
    out["map_then_batch"] = [_py(tf.reduce_sum(b)) for b in fast.map(lambda x: x + 1).batch(256)]
    out["batch_then_map"] = [_py(tf.reduce_sum(b)) for b in fast.batch(256).map(lambda x: x + 1)]

    def tmd(instance_idx, num_samples):
        def gen(idx, n):
            for sample_idx in range(n):
                yield ([("Open",), ("Read",)], [(1.0, 2.0), (3.0, 4.0)], [(idx, 0, -1), (idx, 0, sample_idx)])
        return tf.data.Dataset.from_generator(gen, output_types=(tf.string, tf.float32, tf.int32),
                                              output_shapes=((2, 1), (2, 2), (2, 3)), args=(instance_idx, num_samples))

    def naive_map(steps, times, values):
        return (tf.concat((steps, [["Map"]]), axis=0), tf.concat((times, [[0.5, 0.25]]), axis=0),
                tf.concat((values, [values[-1]]), axis=0))

    d = tf.data.Dataset.range(2).flat_map(lambda i: tmd(i, 50)).map(naive_map).batch(50, drop_remainder=True).unbatch()
    out["naive"] = [[_py(s), _py(v)] for s, _, v in d]

    def tagged(tag):
        def fn(steps, times, values):
            return (tf.concat((steps, tf.tile([[[tag]]], [tf.shape(steps)[0], 1, 1])), axis=1),
                    tf.concat((times, tf.tile([[[0.5, 0.25]]], [tf.shape(times)[0], 1, 1])), axis=1),
                    tf.concat((values, tf.tile([[values[:][-1][0]]], [tf.shape(values)[0], 1, 1])), axis=1))
        return fn

    d = (tf.data.Dataset.range(2).interleave(lambda i: tmd(i, 50), num_parallel_calls=tf.data.AUTOTUNE)
         .batch(50, drop_remainder=True).map(tagged("1st map"), num_parallel_calls=tf.data.AUTOTUNE).cache()
         .map(tagged("2nd map"), num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE).unbatch())
    out["optimized"] = [[_py(s), _py(v)] for s, _, v in d]
    return out


def distribute_guide() -> dict:
    out: dict = {}
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    ds = tf.data.Dataset.from_tensors(([1.0], [1.0])).repeat(100).batch(16)
    dist = strategy.experimental_distribute_dataset(ds)
    f, lbl = next(iter(dist))
    out["first_batch_shapes"] = [list(v.shape) for v in strategy.experimental_local_results(f)]

    @tf.function
    def train_step(inputs):
        features, labels = inputs
        return labels - 0.3 * features

    out["losses"] = [[_py(v) for v in strategy.experimental_local_results(strategy.run(train_step, args=(x,)))]
                     for x in dist]

    def dataset_fn(input_context):
        batch_size = input_context.get_per_replica_batch_size(16)
        d = tf.data.Dataset.from_tensors(([1.0], [1.0])).repeat(64).batch(16)
        d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return d.batch(batch_size).prefetch(2)

    out["from_function_shapes"] = [[list(v.shape) for v in strategy.experimental_local_results(x[0])]
                                   for x in strategy.distribute_datasets_from_function(dataset_fn)]
    it = iter(strategy.experimental_distribute_dataset(tf.data.Dataset.range(9).batch(4)))
    got = []
    while True:
        opt = it.get_next_as_optional()
        if not opt.has_value():
            break
        got.append([_py(v) for v in strategy.experimental_local_results(strategy.run(lambda x: x, args=(opt.get_value(),)))])
    out["optional"] = got
    vocab = ["a", "b", "c", "d", "f"]
    layer = tf.keras.layers.StringLookup(vocabulary=vocab)

    def kpl_fn(input_context):
        d = tf.data.Dataset.from_tensor_slices(["a", "c", "e"]).repeat()
        d = d.batch(input_context.get_per_replica_batch_size(4))
        d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return d.map(layer)

    it = iter(strategy.distribute_datasets_from_function(kpl_fn))
    out["string_lookup"] = [[_py(v) for v in strategy.experimental_local_results(next(it))] for _ in range(3)]
    dist = strategy.experimental_distribute_dataset(tf.data.Dataset.range(24).enumerate().batch(6))
    result = {}
    for index, inputs in dist:
        oi, o = strategy.run(lambda i, x: (i, 2 * x), args=(index, inputs))
        ri = [x for a in strategy.experimental_local_results(oi) for x in a.numpy().tolist()]
        ro = [x for a in strategy.experimental_local_results(o) for x in a.numpy().tolist()]
        result.update(zip(ri, ro))
    out["enumerate_predict"] = sorted(result.items())
    dv = strategy.experimental_distribute_values_from_function(lambda ctx: tf.constant(ctx.replica_id_in_sync_group))
    dist = strategy.experimental_distribute_dataset(ds)

    @tf.function(input_signature=[dist.element_spec])
    def train_step2(per_replica_inputs):
        return strategy.run(lambda inputs: 2 * inputs, args=(per_replica_inputs,))

    output = train_step2(next(iter(dist)))
    out["input_signature_output"] = [[_py(v) for v in strategy.experimental_local_results(p)] for p in output]
    out["values_from_function"] = [_py(v) for v in strategy.experimental_local_results(strategy.run(lambda x: x, args=(dv,)))]
    return out


def main() -> None:
    ins = inputs()
    with tempfile.TemporaryDirectory() as tmp:
        refs = {"tensorflow": tf.__version__, "inputs": ins, "data": data_guide(ins, tmp),
                "performance": performance_guide(), "distribute": distribute_guide()}
    with open(OUT, "w") as f:
        json.dump(refs, f, separators=(",", ":"))
    print("wrote", OUT, os.path.getsize(OUT), "bytes")


if __name__ == "__main__":
    main()
