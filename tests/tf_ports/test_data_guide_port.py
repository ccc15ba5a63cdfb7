"""tensorflow/docs ``site/en/guide/data.ipynb``, its pipeline cells ported by renaming.

``tf.data`` -> ``tpsd``; the functions given to ``map`` / ``filter`` / ``reduce`` use NumPy
where the guide uses ``tf.*`` ops (elements here are NumPy arrays and ``bytes``). The
guide's downloads (Iliad texts, Titanic CSV, credit-card CSV, FSNS TFRecord) are replaced
by small files whose text is in ``tests/data/fixtures/guide_references.json``, together
with what TensorFlow 2.21 gives for each pipeline (``tools/make_guide_references.py``).
Each pipeline is also checked to resume in the middle (``get_state`` / ``set_state``)
with exactly the rest of an uninterrupted run. Random pipelines (``shuffle``,
``sample_from_datasets``, ``rejection_resample``) are checked by their properties: README
"Where we differ" (random sources use NumPy's generator, not TensorFlow's Philox).
Cells that need images, Keras ``model.fit`` or pandas are out of scope here.
"""

from __future__ import annotations

import collections
import json
import os
from typing import Any

import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

_FIXTURE = os.path.join(os.path.dirname(__file__), "..", "data", "fixtures", "guide_references.json")
REFS = json.load(open(_FIXTURE))
INPUTS = REFS["inputs"]
REF = REFS["data"]


def py(x: Any) -> Any:
    """An element as plain Python (``bytes`` -> ``str``), like the reference script's."""
    if isinstance(x, dict):
        return {k: py(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return [py(v) for v in x]
    if isinstance(x, bytes):
        return x.decode("latin-1")
    a = np.asarray(x)
    if a.dtype == object:
        return np.vectorize(lambda b: b.decode("latin-1") if isinstance(b, bytes) else b, otypes=[object])(a).tolist()
    return a.tolist()


def assert_resumes(ds: tpsd.Dataset, k: int, total: int | None = None) -> None:
    """An iterator saved after ``k`` elements resumes with what the same iterator gives next."""
    src = ds if total is None else ds.take(total)
    it = iter(src)
    for _ in range(k):
        next(it)
    state = it.get_state()
    rest = [py(e) for e in it]
    assert rest, "the check needs elements after the save point"
    resumed = iter(src)
    resumed.set_state(state)
    assert [py(e) for e in resumed] == rest


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("guide")
    out: dict[str, Any] = {"iliad": []}
    for name, text in zip(("cowper", "derby", "butler"), INPUTS["iliad"]):
        p = tmp / f"{name}.txt"
        p.write_text(text)
        out["iliad"].append(str(p))
    for key, name in (("titanic", "train.csv"), ("missing", "missing.csv"), ("creditcard", "creditcard.csv")):
        (tmp / name).write_text(INPUTS[key])
        out[key] = str(tmp / name)
    rec = str(tmp / "fsns.tfrec")
    with tpsd.TFRecordWriter(rec) as w:
        for i in range(12):
            ex = tps.train.Example(features=tps.train.Features(feature={
                "image/encoded": tps.train.Feature(bytes_list=tps.train.BytesList(value=[bytes([137, 80, i]) * 3])),
                "image/text": tps.train.Feature(bytes_list=tps.train.BytesList(value=[f"text {i}".encode()])),
            }))
            w.write(ex.SerializeToString())
    out["fsns"] = rec
    return out


# ---- Basic mechanics ------------------------------------------------------------------


def test_basic_mechanics_iterate_next_reduce():
    dataset = tpsd.Dataset.from_tensor_slices([8, 3, 0, 8, 2, 1])
    assert [py(elem) for elem in dataset] == REF["basic"]
    it = iter(dataset)
    assert py(next(it)) == 8
    assert py(dataset.reduce(0, lambda state, value: state + value)) == REF["reduce_sum"] == 22
    assert_resumes(dataset, 3)


def test_dataset_structure_element_spec():
    dataset1 = tpsd.Dataset.from_tensor_slices(np.random.uniform(size=[4, 10]).astype(np.float32))
    assert dataset1.element_spec == tpsd.TensorSpec(shape=(10,), dtype=np.float32)
    dataset2 = tpsd.Dataset.from_tensor_slices(
        (np.random.uniform(size=[4]).astype(np.float32), np.random.randint(0, 100, size=[4, 100]).astype(np.int32)))
    assert dataset2.element_spec == (tpsd.TensorSpec((), np.float32), tpsd.TensorSpec((100,), np.int32))
    dataset3 = tpsd.Dataset.zip((dataset1, dataset2))
    assert dataset3.element_spec == (dataset1.element_spec, dataset2.element_spec)
    shapes = [(a.shape, b.shape, c.shape) for a, (b, c) in dataset3]
    assert shapes == [((10,), (), (100,))] * 4
    assert_resumes(dataset3, 2)


# ---- Reading input data ---------------------------------------------------------------


def count(stop):
    i = 0
    while i < stop:
        yield i
        i += 1


def test_from_generator_count_repeat_batch():
    ds_counter = tpsd.Dataset.from_generator(count, args=[25], output_types=np.int32, output_shapes=())
    got = ds_counter.repeat().batch(10).take(10)
    assert [py(b) for b in got] == REF["gen_count"]
    assert_resumes(got, 4)


def gen_series():
    i = 0
    rng = np.random.default_rng(3)
    while True:
        size = rng.integers(0, 10)
        yield i, rng.normal(size=(size,))
        i += 1


def test_from_generator_series_shuffle_padded_batch():
    ds_series = tpsd.Dataset.from_generator(
        gen_series, output_types=(np.int32, np.float32), output_shapes=((), (None,)))
    assert ds_series.element_spec == (tpsd.TensorSpec((), np.int32), tpsd.TensorSpec((None,), np.float32))
    ds_series_batch = ds_series.shuffle(20).padded_batch(10)
    ids, sequence_batch = next(iter(ds_series_batch))
    # The guide prints 10 ids drawn from the first 20 + 9 elements, padded to the longest.
    assert ids.shape == (10,) and len(set(ids.tolist())) == 10 and ids.max() < 29
    assert sequence_batch.shape[0] == 10 and sequence_batch.shape[1] <= 9
    assert_resumes(ds_series.shuffle(20, seed=5).padded_batch(10), 2, total=5)


def test_textline_and_interleave(files):
    dataset = tpsd.TextLineDataset(files["iliad"])
    assert [py(x) for x in dataset.take(5)] == REF["textline"]
    files_ds = tpsd.Dataset.from_tensor_slices(files["iliad"])
    lines_ds = files_ds.interleave(tpsd.TextLineDataset, cycle_length=3)
    assert [py(x) for x in lines_ds.take(9)] == REF["interleave_textline"]
    assert_resumes(lines_ds, 7)
    assert_resumes(dataset, 9)


def test_titanic_lines_skip_filter(files):
    titanic_lines = tpsd.TextLineDataset(files["titanic"])

    def survived(line):
        return line[0:1] != b"0"  # tf.not_equal(tf.strings.substr(line, 0, 1), "0")

    survivors = titanic_lines.skip(1).filter(survived)
    assert [py(x) for x in survivors.take(10)] == REF["survivors"]
    assert_resumes(survivors, 100)


def test_make_csv_dataset_label_and_select_columns(files):
    for key, kwargs in (("make_csv", {}), ("make_csv_select", {"select_columns": ["class", "fare", "survived"]})):
        titanic_batches = tpsd.experimental.make_csv_dataset(
            files["titanic"], batch_size=4, label_name="survived", shuffle=False, **kwargs)
        feature_batch, label_batch = next(iter(titanic_batches))
        features, labels, keys = REF[key]
        assert list(feature_batch.keys()) == keys
        assert py(label_batch) == labels
        for k, v in feature_batch.items():
            if v.dtype.kind == "f":
                np.testing.assert_allclose(v, features[k], rtol=1e-6)
            else:
                assert py(v) == features[k], k
        assert_resumes(titanic_batches, 3, total=8)


def test_make_csv_dataset_shuffled_is_a_permutation(files):
    ds = tpsd.experimental.make_csv_dataset(files["titanic"], batch_size=32, label_name="survived", num_epochs=1)
    ages = np.concatenate([f["age"] for f, _ in ds])
    np.testing.assert_array_equal(np.sort(ages), np.sort(np.array([20 + i % 50 for i in range(627)], np.float32)))


def test_csv_dataset_with_types(files):
    titanic_types = [np.int32, np.bytes_, np.float32, np.int32, np.int32, np.float32,
                     np.bytes_, np.bytes_, np.bytes_, np.bytes_]  # tf.int32, tf.string, ...
    dataset = tpsd.experimental.CsvDataset(files["titanic"], titanic_types, header=True)
    got = [py(list(line)) for line in dataset.take(10)]
    for row, ref in zip(got, REF["csv_dataset"], strict=True):
        assert row[:2] + row[3:5] + row[6:] == ref[:2] + ref[3:5] + ref[6:]
        np.testing.assert_allclose([row[2], row[5]], [ref[2], ref[5]], rtol=1e-6)
    assert_resumes(dataset, 300)


def test_csv_dataset_string_types_are_strings(files):
    for string_type in (np.bytes_, np.str_, str, bytes, "string"):
        ds = tpsd.experimental.CsvDataset(files["titanic"], [np.int32, string_type], header=True, select_cols=[0, 1])
        assert ds.element_spec[1].dtype == np.dtype(object)
        assert next(iter(ds))[1] == b"male"
        gen = tpsd.Dataset.from_generator(lambda: iter([b"a", b"b"]), output_types=string_type, output_shapes=())
        assert gen.element_spec.dtype == np.dtype(object) and list(gen) == [b"a", b"b"]


def test_csv_dataset_missing_values(files):
    dataset = tpsd.experimental.CsvDataset(files["missing"], [999, 999, 999, 999])
    dataset = dataset.map(lambda *items: np.stack(items))
    assert [py(line) for line in dataset] == REF["missing"]
    assert_resumes(dataset, 3)
    dataset = tpsd.experimental.CsvDataset(files["missing"], [999, 999], select_cols=[1, 3])
    dataset = dataset.map(lambda *items: np.stack(items))
    assert [py(line) for line in dataset] == REF["missing_select"]
    assert_resumes(dataset, 4)


def test_list_files_and_process_path(files):
    list_ds = tpsd.Dataset.list_files(os.path.join(os.path.dirname(files["titanic"]), "*.txt"))

    def process_path(file_path):
        label = file_path.split(os.sep.encode())[-2]  # tf.strings.split(file_path, os.sep)[-2]
        return open(file_path, "rb").read(), label  # tf.io.read_file

    labeled_ds = list_ds.map(process_path)
    got = {py(label): raw for raw, label in labeled_ds}
    assert list(got) == [os.path.basename(os.path.dirname(files["titanic"]))]
    assert sorted(py(f) for f in list_ds) == sorted(files["iliad"])
    assert_resumes(tpsd.Dataset.list_files(os.path.join(os.path.dirname(files["titanic"]), "*.txt"), seed=1), 1)


# ---- Batching dataset elements --------------------------------------------------------


def test_simple_batching_and_drop_remainder():
    inc_dataset = tpsd.Dataset.range(100)
    dec_dataset = tpsd.Dataset.range(0, -100, -1)
    dataset = tpsd.Dataset.zip((inc_dataset, dec_dataset))
    batched_dataset = dataset.batch(4)
    assert [py(b) for b in batched_dataset.take(4)] == REF["zip_batch"]
    shapes = [[list(s.shape) for s in d.element_spec] for d in (batched_dataset, dataset.batch(7, drop_remainder=True))]
    assert shapes == REF["zip_batch_shapes"]
    assert_resumes(batched_dataset, 11)


def test_padded_batch_fill():
    dataset = tpsd.Dataset.range(100)
    dataset = dataset.map(lambda x: np.full([int(x)], x))  # tf.fill([tf.cast(x, tf.int32)], x)
    dataset = dataset.padded_batch(4, padded_shapes=(None,))
    assert [py(b) for b in dataset.take(2)] == REF["padded_batch"]
    assert_resumes(dataset, 5)


# ---- Training workflows: epochs, shuffling --------------------------------------------


def test_repeat_and_batch_order(files):
    titanic_lines = tpsd.TextLineDataset(files["titanic"])
    assert [b.shape[0] for b in titanic_lines.repeat(3).batch(128)] == REF["repeat_then_batch"]
    assert [b.shape[0] for b in titanic_lines.batch(128).repeat(3)] == REF["batch_then_repeat"]
    epochs = [[b.shape for b in titanic_lines.batch(128)] for _ in range(3)]
    assert epochs[0] == epochs[1] == epochs[2] == [(128,)] * 4 + [(116,)]
    assert_resumes(titanic_lines.batch(128).repeat(3), 7)


def test_counter_zip_shuffle_batch(files):
    lines = tpsd.TextLineDataset(files["titanic"])
    counter = tpsd.experimental.Counter()
    dataset = tpsd.Dataset.zip((counter, lines)).shuffle(buffer_size=100).batch(20)
    n, line_batch = next(iter(dataset))
    assert n.shape == (20,) and n.max() < 120 and len(set(n.tolist())) == 20
    # shuffle().repeat(): each epoch is a whole permutation before the next starts.
    shuffled = tpsd.Dataset.zip((counter, lines)).shuffle(buffer_size=100).batch(10).repeat(2)
    ids = [n for n, _ in shuffled]
    first = np.concatenate(ids[:63])
    assert sorted(first.tolist()) == list(range(628))
    # repeat().shuffle(): the epochs mix near the boundary.
    shuffled = tpsd.Dataset.zip((counter, lines)).repeat(2).shuffle(buffer_size=100).batch(10)
    allids = np.concatenate([n for n, _ in shuffled])
    assert sorted(allids.tolist()) == sorted(list(range(628)) * 2)
    assert_resumes(tpsd.Dataset.zip((counter, lines)).shuffle(100, seed=2).batch(10).repeat(2), 70)


# ---- Time series windowing ------------------------------------------------------------


def dense_1_step(batch):
    return batch[:-1], batch[1:]


def test_time_series_batches():
    range_ds = tpsd.Dataset.range(100000)
    batches = range_ds.batch(10, drop_remainder=True)
    assert [py(b) for b in batches.take(5)] == REF["batches"]
    predict_dense_1_step = batches.map(dense_1_step)
    assert [py(x) for x in predict_dense_1_step.take(3)] == REF["dense_1_step"]
    predict_5_steps = range_ds.batch(15, drop_remainder=True).map(lambda batch: (batch[:-5], batch[-5:]))
    assert [py(x) for x in predict_5_steps.take(3)] == REF["label_next_5"]
    features = range_ds.batch(10, drop_remainder=True)
    labels = range_ds.batch(10).skip(1).map(lambda labels: labels[:3])
    predicted_steps = tpsd.Dataset.zip((features, labels))
    assert [py(x) for x in predicted_steps.take(5)] == REF["predicted_steps"]
    assert_resumes(predicted_steps, 3, total=6)
    assert_resumes(predict_dense_1_step, 2, total=5)


def test_window():
    range_ds = tpsd.Dataset.range(100000)
    windows = range_ds.window(5, shift=1)
    subs = list(windows.take(5))
    assert all(isinstance(sub, tpsd.Dataset) for sub in subs)
    flat = windows.flat_map(lambda x: x).take(30)
    assert [py(x) for x in flat] == REF["window_flat"]
    assert_resumes(flat, 12)

    def sub_to_batch(sub):
        return sub.batch(5, drop_remainder=True)

    assert [py(x) for x in windows.flat_map(sub_to_batch).take(5)] == REF["window_batch"]


def make_window_dataset(ds, window_size=5, shift=1, stride=1):
    windows = ds.window(window_size, shift=shift, stride=stride)

    def sub_to_batch(sub):
        return sub.batch(window_size, drop_remainder=True)

    return windows.flat_map(sub_to_batch)


def test_make_window_dataset_and_dense_labels():
    ds = make_window_dataset(tpsd.Dataset.range(100000), window_size=10, shift=5, stride=3)
    assert [py(x) for x in ds.take(10)] == REF["make_window_dataset"]
    dense_labels_ds = ds.map(dense_1_step)
    assert [py(x) for x in dense_labels_ds.take(3)] == REF["dense_labels_ds"]
    assert_resumes(ds, 4, total=10)


# ---- Resampling -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def creditcard_ds(files):
    return tpsd.experimental.make_csv_dataset(
        files["creditcard"], batch_size=16, label_name="Class", shuffle=False, num_epochs=1,
        column_defaults=[float()] * 3 + [int()])  # noqa: UP018 (the guide's spelling)


def count_classes(counts, batch):
    features, labels = batch
    counts["class_0"] += np.sum((labels == 0).astype(np.int32))  # tf.reduce_sum(tf.cast(..., tf.int32))
    counts["class_1"] += np.sum((labels == 1).astype(np.int32))
    return counts


def test_reduce_class_counts(creditcard_ds):
    counts = creditcard_ds.take(10).reduce(initial_state={"class_0": 0, "class_1": 0}, reduce_func=count_classes)
    assert py(counts) == REF["class_counts"]
    counts = np.array([counts["class_0"], counts["class_1"]]).astype(np.float32)
    np.testing.assert_allclose(counts / counts.sum(), [142 / 160, 18 / 160])


def test_unbatch_filter_repeat_positive(creditcard_ds):
    positive_ds = creditcard_ds.unbatch().filter(lambda features, label: label == 1).repeat()
    for _features, label in positive_ds.batch(10).take(1):
        assert py(label) == REF["positive_labels"]
    assert_resumes(positive_ds.batch(10), 2, total=5)


def test_sample_from_datasets_balances(creditcard_ds):
    negative_ds = creditcard_ds.unbatch().filter(lambda features, label: label == 0).repeat()
    positive_ds = creditcard_ds.unbatch().filter(lambda features, label: label == 1).repeat()
    # Seeded: an unseeded draw is a different sample each run (1,000 labels: the mean's spread is
    # 0.016, so an unseeded bound of 0.06 fails about once in ten thousand runs).
    balanced_ds = tpsd.Dataset.sample_from_datasets([negative_ds, positive_ds], [0.5, 0.5], seed=7).batch(10)
    labels = np.concatenate([labels for _, labels in balanced_ds.take(100)])
    assert set(labels.tolist()) == {0, 1} and abs(labels.mean() - 0.5) < 0.06
    seeded = tpsd.Dataset.sample_from_datasets([negative_ds, positive_ds], [0.5, 0.5], seed=4).batch(10)
    assert_resumes(seeded, 3, total=8)


def test_rejection_resample_balances(creditcard_ds):
    fractions = np.array([142 / 160, 18 / 160], np.float32)
    resample_ds = (
        creditcard_ds.unbatch().repeat()
        .rejection_resample(lambda features, label: label, target_dist=[0.5, 0.5], initial_dist=fractions)
        .batch(10))
    balanced_ds = resample_ds.map(lambda extra_label, features_and_label: features_and_label)
    labels = np.concatenate([labels for _, labels in balanced_ds.take(60)])
    assert set(labels.tolist()) == {0, 1} and abs(labels.mean() - 0.5) < 0.1
    seeded = (creditcard_ds.unbatch().repeat()
              .rejection_resample(lambda f, label: label, target_dist=[0.5, 0.5], initial_dist=fractions, seed=3)
              .batch(10))
    assert_resumes(seeded, 2, total=6)


# ---- Iterator checkpointing and parsing -----------------------------------------------


def test_iterator_checkpointing(tmp_path):
    range_ds = tpsd.Dataset.range(20)
    iterator = iter(range_ds)
    ckpt = tps.train.Checkpoint(step=tps.Variable(0), iterator=iterator)
    manager = tps.train.CheckpointManager(ckpt, str(tmp_path / "my_ckpt"), max_to_keep=3)
    assert [int(next(iterator)) for _ in range(5)] == [0, 1, 2, 3, 4]
    manager.save()
    assert [int(next(iterator)) for _ in range(5)] == [5, 6, 7, 8, 9]
    ckpt.restore(manager.latest_checkpoint)
    assert [int(next(iterator)) for _ in range(5)] == [5, 6, 7, 8, 9]  # what the guide prints


def test_tfrecord_parse_example_newaxis(files):
    dataset = tpsd.TFRecordDataset(filenames=[files["fsns"]])
    raw_example = next(iter(dataset))
    parsed = tps.train.Example.FromString(raw_example)
    assert parsed.features.feature["image/text"].bytes_list.value[0] == b"text 0"

    def tf_parse(eg):
        example = tpsd.parse_example(eg[np.newaxis], {
            "image/encoded": tpsd.FixedLenFeature(shape=(), dtype=np.bytes_),
            "image/text": tpsd.FixedLenFeature(shape=(), dtype=np.bytes_),
        })
        return example["image/encoded"][0], example["image/text"][0]

    decoded = dataset.map(tf_parse)
    image_batch, text_batch = next(iter(decoded.batch(10)))
    assert image_batch.shape == (10,)
    assert [[v.hex() for v in image_batch.tolist()], py(text_batch)] == REF["tf_parse_batch"]
    assert_resumes(decoded, 5)


def test_make_csv_dataset_features_are_ordered_dicts(files):
    ds = tpsd.experimental.make_csv_dataset(files["titanic"], batch_size=4, label_name="survived", shuffle=False)
    features, _ = next(iter(ds))
    assert isinstance(features, collections.OrderedDict)
