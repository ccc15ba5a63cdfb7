"""The new sources under experimental_distribute_dataset / distribute_datasets_from_function (auto-shard rules)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

D = tpsd.Dataset
pytestmark = pytest.mark.devices(4)  # strategies over up to /cpu:3
X = tpsd.experimental


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def _flat(strategy, dist):
    return [x for step in dist for part in strategy.experimental_local_results(step)
            for x in np.asarray(part).reshape(-1).tolist()]


def _csv_files(tmp_path, n=4, rows=3):
    names = []
    for f in range(n):
        p = tmp_path / f"p{f}.csv"
        p.write_text("v\n" + "\n".join(str(f * 100 + i) for i in range(rows)) + "\n")
        names.append(str(p))
    return names


def test_csv_files_are_file_sharded_over_two_pipelines(tmp_path):
    s = _strategy(4)
    ds = X.CsvDataset(_csv_files(tmp_path), record_defaults=[[0]], header=True).map(lambda v: v).batch(4)
    dists = [s.experimental_distribute_dataset(ds, input_pipeline=(i, 2)) for i in range(2)]
    assert all(d.auto_shard_decision.applied == "FILE" for d in dists)
    seen = [_flat(s, d) for d in dists]
    assert sorted(seen[0]) == [0, 1, 2, 200, 201, 202] and sorted(seen[1]) == [100, 101, 102, 300, 301, 302]


def test_make_csv_dataset_and_load_are_file_sharded(tmp_path):
    s = _strategy(2)
    ds = X.make_csv_dataset(_csv_files(tmp_path), batch_size=2, shuffle=False, num_epochs=1,
                            column_defaults=[0]).map(lambda d: d["v"])
    dists = [s.experimental_distribute_dataset(ds, input_pipeline=(i, 2)) for i in range(2)]
    assert [d.auto_shard_decision.applied for d in dists] == ["FILE", "FILE"]
    assert sorted(_flat(s, dists[0]) + _flat(s, dists[1])) == sorted(f * 100 + i for f in range(4) for i in range(3))
    D.range(16).save(str(tmp_path / "saved"))
    loaded = D.load(str(tmp_path / "saved")).batch(4)
    dists = [s.experimental_distribute_dataset(loaded, input_pipeline=(i, 2)) for i in range(2)]
    assert [d.auto_shard_decision.applied for d in dists] == ["FILE", "FILE"]
    assert sorted(_flat(s, dists[0]) + _flat(s, dists[1])) == list(range(16))


def test_sample_from_datasets_falls_back_to_data_sharding_like_tensorflow():
    s = _strategy(2)
    ds = D.sample_from_datasets([D.range(0, 20), D.range(100, 120)], seed=1).batch(4)
    with pytest.warns(UserWarning, match="DirectedInterleaveDataset"):
        dists = [s.experimental_distribute_dataset(ds, input_pipeline=(i, 2)) for i in range(2)]
    assert sorted(_flat(s, dists[0]) + _flat(s, dists[1])) == list(range(20)) + list(range(100, 120))


def test_a_distributed_sampling_iterator_resumes_exactly():
    s = _strategy(2)
    ds = D.sample_from_datasets([D.range(0, 30), D.random(seed=4).map(lambda x: x % 7).take(30)], seed=2).batch(4)
    dist = s.experimental_distribute_dataset(ds)
    it = iter(dist)
    states, steps = [], []
    while True:
        states.append(it.get_state())
        try:
            step = next(it)
        except StopIteration:
            break
        steps.append([np.asarray(v).tolist() for v in s.experimental_local_results(step)])
    for k in (0, 4, len(steps) - 1):
        fresh = iter(dist)
        fresh.set_state(states[k])
        assert [[np.asarray(v).tolist() for v in s.experimental_local_results(st)] for st in fresh] == steps[k:]


def test_distribute_datasets_from_function_over_counter_random_and_snapshot(tmp_path):
    s = _strategy(2)

    def dataset_fn(ctx):
        base = D.counter().take(12).snapshot(str(tmp_path / "snap"))
        return base.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).batch(ctx.get_per_replica_batch_size(4))

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dist = s.distribute_datasets_from_function(dataset_fn)
        first = sorted(_flat(s, dist))
        second = sorted(_flat(s, dist))
    assert first == second == list(range(12))
