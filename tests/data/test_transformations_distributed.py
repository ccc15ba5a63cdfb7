"""The new transformations under experimental_distribute_dataset with two (simulated) input pipelines."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

Dataset = tpsd.Dataset
pytestmark = pytest.mark.devices(4)  # strategies over /cpu:0../cpu:3


@pytest.fixture
def strategy():
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(4)])


@pytest.fixture
def files(tmp_path):
    paths = []
    for k in range(4):
        path = str(tmp_path / f"f{k}.tfrecord")
        with tpsd.TFRecordWriter(path) as w:
            for j in range(8):
                w.write(str(k * 100 + j).encode())
        paths.append(path)
    return paths


def _seen(strategy, dists):
    out = []
    for d in dists:
        for step in d:
            for part in strategy.experimental_local_results(step):
                out.extend(np.asarray(part).reshape(-1).tolist())
    return out


@pytest.mark.parametrize(
    "make",
    [
        lambda ds: ds.window(2).flat_map(lambda w: w.batch(2)).unbatch(),
        lambda ds: ds.unique(),
        lambda ds: ds.scan(np.int64(0), lambda s, x: (s, x)),
        lambda ds: ds.take_while(lambda x: x >= 0),
        lambda ds: ds.ignore_errors(),
        lambda ds: ds.group_by_window(lambda x: x % 2, lambda k, w: w.batch(3), window_size=3).unbatch(),
    ],
    ids=["window", "unique", "scan", "take_while", "ignore_errors", "group_by_window"],
)
def test_file_sharding_through_each_transformation_reads_every_record_once(strategy, files, make):
    ds = make(tpsd.TFRecordDataset(files).map(lambda r: np.int64(r))).batch(4)
    dists = [strategy.experimental_distribute_dataset(ds, input_pipeline=(i, 2)) for i in range(2)]
    assert all("applied FILE" in d.explain_sharding() for d in dists)
    assert sorted(_seen(strategy, dists)) == sorted(k * 100 + j for k in range(4) for j in range(8))


def test_a_range_source_falls_back_to_data_sharding_with_a_warning(strategy):
    ds = Dataset.range(40).scan(np.int64(0), lambda s, x: (s + x, s)).batch(8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dists = [strategy.experimental_distribute_dataset(ds, input_pipeline=(i, 2)) for i in range(2)]
    assert any("AUTO sharding policy will apply DATA" in str(w.message) for w in caught)
    expected = np.cumsum(np.arange(40)) - np.arange(40)
    assert sorted(_seen(strategy, dists)) == sorted(expected.tolist())


def test_bucketed_global_batches_split_over_four_replicas(strategy):
    ds = Dataset.range(32).map(lambda n: np.full(int(n) % 3 + 1, n, np.int64)).bucket_by_sequence_length(
        lambda x: x.shape[0], [2, 3], [4, 4, 4], drop_remainder=True
    )
    rows = []
    for step in strategy.experimental_distribute_dataset(ds):
        parts = [np.asarray(p) for p in strategy.experimental_local_results(step)]
        assert [p.shape[0] for p in parts] == [1, 1, 1, 1]
        rows.extend(int(p[0, 0]) for p in parts)
    # lengths 1, 2, 3 hold 11, 11 and 10 elements: two full batches of 4 each, 24 rows in all
    assert len(rows) == len(set(rows)) == 24
