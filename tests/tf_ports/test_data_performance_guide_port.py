"""tensorflow/docs ``site/en/guide/data_performance.ipynb``, its pipelines ported by renaming.

``tf.data`` -> ``tpsd``. The guide times its pipelines with ``time.sleep``; a test cannot
time anything on a loaded machine, so the sleeps and ``perf_counter`` stamps are left out
(the ``times`` component gets fixed numbers) and what is checked is what each pipeline
*yields*: elements, their order, epochs, and the ``steps`` / ``values`` of the guide's
timeline pipelines (naive and optimized), against TensorFlow 2.21
(``tools/make_guide_references.py``). ``tf.py_function`` wrappers are plain Python
functions here (dataset functions already run in Python). Each pipeline also resumes in
the middle with exactly what the interrupted iterator would have given.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import defaultdict
from typing import Any

import numpy as np

import tpustrategy.data as tpsd

_FIXTURE = os.path.join(os.path.dirname(__file__), "..", "data", "fixtures", "guide_references.json")
REF = json.load(open(_FIXTURE))["performance"]


def py(x: Any) -> Any:
    if isinstance(x, (tuple, list)):
        return [py(v) for v in x]
    if isinstance(x, bytes):
        return x.decode()
    a = np.asarray(x)
    if a.dtype == object:
        return np.vectorize(lambda b: b.decode() if isinstance(b, bytes) else b, otypes=[object])(a).tolist()
    return a.tolist()


def assert_resumes(ds: tpsd.Dataset, k: int) -> None:
    """An iterator saved after ``k`` elements resumes with what the same iterator gives next."""
    it = iter(ds)
    for _ in range(k):
        next(it)
    state = it.get_state()
    rest = [py(e) for e in it]
    assert rest
    resumed = iter(ds)
    resumed.set_state(state)
    assert [py(e) for e in resumed] == rest


class ArtificialDataset(tpsd.Dataset):
    def _generator(num_samples):
        # Opening the file (time.sleep(0.03) in the guide)
        for sample_idx in range(num_samples):
            # Reading data (line, record) from the file (time.sleep(0.015))
            yield (sample_idx,)

    def __new__(cls, num_samples=3):
        return tpsd.Dataset.from_generator(
            cls._generator,
            output_signature=tpsd.TensorSpec(shape=(1,), dtype=np.int64),
            args=(num_samples,),
        )


def benchmark(dataset, num_epochs=2):
    """The guide's loop, returning what each epoch yielded instead of a time."""
    return [[py(sample) for sample in dataset] for _ in range(num_epochs)]


def test_naive_and_prefetch():
    assert isinstance(ArtificialDataset(), tpsd.Dataset)
    assert ArtificialDataset().element_spec == tpsd.TensorSpec((1,), np.int64)
    assert benchmark(ArtificialDataset()) == REF["artificial"]
    assert benchmark(ArtificialDataset().prefetch(tpsd.AUTOTUNE)) == REF["artificial"]
    assert_resumes(ArtificialDataset(5).prefetch(tpsd.AUTOTUNE), 2)


def test_interleave_sequential_and_parallel():
    ds = tpsd.Dataset.range(2).interleave(lambda _: ArtificialDataset())
    assert benchmark(ds) == REF["interleave"]
    par = tpsd.Dataset.range(2).interleave(lambda _: ArtificialDataset(), num_parallel_calls=tpsd.AUTOTUNE)
    # AUTOTUNE without cycle_length: TensorFlow's cycle is ceil(CPUs / 17), 1 on small hosts.
    assert benchmark(par) == REF["interleave_parallel"]
    assert_resumes(ds, 3)
    assert_resumes(par, 3)


def test_interleave_default_cycle_length_follows_tensorflow(monkeypatch):
    from tpustrategy._src.data.transformations import interleave

    monkeypatch.setattr(interleave, "cpu_count", lambda: REF["host_cpus"])
    f = lambda i: tpsd.Dataset.from_tensor_slices([i] * 3)  # noqa: E731
    for npc, ref in REF["interleave_cycle_defaults"].items():
        npc = None if npc == "None" else int(npc)
        assert [int(x) for x in tpsd.Dataset.range(4).interleave(f, num_parallel_calls=npc)] == ref, npc
    monkeypatch.setattr(interleave, "cpu_count", lambda: 40)
    assert interleave.default_cycle_length(tpsd.AUTOTUNE) == 3
    assert interleave.default_cycle_length(8) == 8
    assert interleave.default_cycle_length(None) == 40


def mapped_function(s):
    # Do some hard pre-processing (tf.py_function(lambda: time.sleep(0.03), [], ()) in the guide)
    return s


def test_map_sequential_parallel_and_cache():
    assert benchmark(ArtificialDataset().map(mapped_function)) == REF["artificial"]
    par = ArtificialDataset().map(mapped_function, num_parallel_calls=tpsd.AUTOTUNE)
    assert benchmark(par) == REF["artificial"]
    cached = ArtificialDataset().map(mapped_function).cache()
    assert benchmark(cached, 5) == REF["cache"]
    assert_resumes(par, 1)
    assert_resumes(ArtificialDataset(6).map(mapped_function).cache().repeat(2), 8)


def test_cache_runs_the_map_once():
    calls = []

    def counted(s):
        calls.append(int(s[0]))
        return s

    cached = ArtificialDataset().map(counted).cache()
    assert benchmark(cached, 5) == REF["cache"]
    assert calls == [0, 1, 2]


def increment(x):
    return x + 1


def test_vectorized_mapping():
    fast_dataset = tpsd.Dataset.range(10000)
    scalar = fast_dataset.map(increment).batch(256)  # apply the function one item at a time
    vector = fast_dataset.batch(256).map(increment)  # on a batch of items
    sums = [int(np.sum(b)) for b in scalar]
    assert sums == REF["map_then_batch"] == [int(np.sum(b)) for b in vector] == REF["batch_then_map"]
    for _ in tpsd.Dataset.range(2):  # fast_benchmark's epoch loop over a dataset
        assert [b.shape for b in vector][-1] == (16,)
    assert_resumes(vector, 20)
    assert_resumes(scalar, 20)


class TimeMeasuredDataset(tpsd.Dataset):
    # OUTPUT: (steps, timings, counters); the timings are fixed numbers here.
    OUTPUT_TYPES = (np.bytes_, np.float32, np.int32)  # tf.dtypes.string, float32, int32
    OUTPUT_SHAPES = ((2, 1), (2, 2), (2, 3))

    _INSTANCES_COUNTER = itertools.count()
    _EPOCHS_COUNTER = defaultdict(itertools.count)

    def _generator(instance_idx, num_samples):
        epoch_idx = next(TimeMeasuredDataset._EPOCHS_COUNTER[instance_idx])
        del epoch_idx  # the guide records it; the reference uses 0 (a fresh dataset per run)
        for sample_idx in range(num_samples):
            yield (
                [("Open",), ("Read",)],
                [(1.0, 2.0), (3.0, 4.0)],
                [(instance_idx, 0, -1), (instance_idx, 0, sample_idx)],
            )

    def __new__(cls, num_samples=3, instance_idx=0):
        return tpsd.Dataset.from_generator(
            cls._generator,
            output_types=cls.OUTPUT_TYPES,
            output_shapes=cls.OUTPUT_SHAPES,
            args=(instance_idx, num_samples),
        )


_batch_map_num_items = 50


def dataset_generator_fun(*args):
    return TimeMeasuredDataset(num_samples=_batch_map_num_items, instance_idx=int(args[0]))


def naive_map(steps, times, values):
    return (
        np.concatenate((steps, [[b"Map"]]), axis=0),
        np.concatenate((times, [[0.5, 0.25]]), axis=0).astype(np.float32),
        np.concatenate((values, [values[-1]]), axis=0),
    )


def timeline(dataset):
    return [[py(steps), py(values)] for steps, _times, values in dataset]


def test_timeline_generator_structure():
    ds = TimeMeasuredDataset()
    assert ds.element_spec == (tpsd.TensorSpec((2, 1), object), tpsd.TensorSpec((2, 2), np.float32),
                               tpsd.TensorSpec((2, 3), np.int32))
    steps, times, values = next(iter(ds))
    assert steps.dtype == object and py(steps) == [["Open"], ["Read"]]


def test_naive_timeline_pipeline():
    naive = (
        tpsd.Dataset.range(2)
        .flat_map(dataset_generator_fun)
        .map(naive_map)
        .batch(_batch_map_num_items, drop_remainder=True)
        .unbatch()
    )
    assert timeline(naive) == REF["naive"]
    assert_resumes(naive, 37)


def tagged_map(tag):
    def fn(steps, times, values):  # time_consuming_map / memory_consuming_map, without the sleeps
        n = steps.shape[0]
        return (
            np.concatenate((steps, np.tile(np.array([[[tag]]], dtype=object), [n, 1, 1])), axis=1),
            np.concatenate((times, np.tile([[[0.5, 0.25]]], [n, 1, 1]).astype(np.float32)), axis=1),
            np.concatenate((values, np.tile([[values[:][-1][0]]], [n, 1, 1])), axis=1),
        )
    return fn


def test_optimized_timeline_pipeline():
    optimized = (
        tpsd.Dataset.range(2)
        .interleave(dataset_generator_fun, num_parallel_calls=tpsd.AUTOTUNE)  # parallelize data reading
        .batch(_batch_map_num_items, drop_remainder=True)  # vectorize your mapped function
        .map(tagged_map(b"1st map"), num_parallel_calls=tpsd.AUTOTUNE)  # parallelize map transformation
        .cache()  # cache data
        .map(tagged_map(b"2nd map"), num_parallel_calls=tpsd.AUTOTUNE)  # reduce memory usage
        .prefetch(tpsd.AUTOTUNE)  # overlap producer and consumer works
        .unbatch()
    )
    assert [list(s.shape) for s in optimized.element_spec] == [[4, 1], [4, 2], [4, 3]]
    for _ in range(5):  # timelined_benchmark(..., 5): the cache replays the same elements
        assert timeline(optimized) == REF["optimized"]
    assert_resumes(optimized, 51)
