"""Auto-sharding across input pipelines (golden cases; pipelines simulated in one process)."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tpustrategy as tps
import tpustrategy.data as tpsd
from tests.golden.cases import case
from tpustrategy._src.input.autoshard import auto_shard_dataset


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def _write_files(tmp_path, files: dict[str, list[str]]) -> list[str]:
    paths = []
    for name, records in sorted(files.items()):
        path = str(tmp_path / name)
        if name.endswith(".txt"):
            with open(path, "w") as f:
                f.write("\n".join(records) + "\n")
        else:
            with tpsd.TFRecordWriter(path) as w:
                for r in records:
                    w.write(r.encode())
        paths.append(path)
    return paths


def _with_policy(ds, policy):
    options = tpsd.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return ds.with_options(options)


def _decode(x):
    if isinstance(x, bytes):
        return x.decode()
    if isinstance(x, (tuple, list)):
        return [_decode(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_decode(v) for v in x.tolist()]
    return x


def _worker_elements(ds, w):
    return [[_decode(x) for x in auto_shard_dataset(ds, w, i)] for i in range(w)]


@pytest.mark.parametrize("case_id,policy", [
    ("shard_tfrecord4_FILE_W2", tpsd.AutoShardPolicy.FILE),
    ("shard_tfrecord4_AUTO_W2", tpsd.AutoShardPolicy.AUTO),
    ("shard_tfrecord4_FILE_W3", tpsd.AutoShardPolicy.FILE),
    ("shard_tfrecord4_DATA_W3", tpsd.AutoShardPolicy.DATA),
])
def test_file_and_data_sharding_of_readers_match_tensorflow(tmp_path, case_id, policy):
    c = case(case_id)
    paths = _write_files(tmp_path, c["input"]["files"])
    ds = _with_policy(tpsd.TFRecordDataset(paths), policy)
    expected = [w["elements"] for w in c["output"]["workers"]]
    assert _worker_elements(ds, c["input"]["num_workers"]) == expected


def test_textline_files_are_sharded_by_file(tmp_path):
    c = case("shard_textline7_AUTO_W3")
    paths = _write_files(tmp_path, c["input"]["files"])
    assert _worker_elements(tpsd.TextLineDataset(paths), 3) == [w["elements"] for w in c["output"]["workers"]]


@pytest.mark.parametrize("case_id", ["shard_zip_two_readers_FILE_W2", "shard_concatenate_readers_FILE_W2"])
def test_each_input_of_zip_and_concatenate_is_sharded(tmp_path, case_id):
    c = case(case_id)
    paths = _write_files(tmp_path, c["input"]["files"])
    if "zip" in case_id:
        ds = tpsd.Dataset.zip((tpsd.TFRecordDataset(paths), tpsd.TFRecordDataset(paths[::-1])))
    else:
        ds = tpsd.TFRecordDataset(paths[:2]).concatenate(tpsd.TFRecordDataset(paths[2:]))
    ds = _with_policy(ds, tpsd.AutoShardPolicy.FILE)
    assert _worker_elements(ds, 2) == [w["elements"] for w in c["output"]["workers"]]


def test_map_filter_batch_above_readers_are_walked_over(tmp_path):
    c = case("shard_tfrecord4_map_filter_batch_FILE_W2")
    paths = _write_files(tmp_path, c["input"]["files"])
    ds = (tpsd.TFRecordDataset(paths).map(lambda x: x.upper()).filter(lambda x: not x.endswith(b"_R1"))
          .batch(2))
    ds = _with_policy(ds, tpsd.AutoShardPolicy.FILE)
    assert _worker_elements(ds, 2) == [w["elements"] for w in c["output"]["workers"]]


def test_readers_made_inside_interleave_over_list_files_are_sharded(tmp_path):
    c = case("shard_tfrecord4_FILE_W2")
    _write_files(tmp_path, c["input"]["files"])
    ds = tpsd.Dataset.list_files(str(tmp_path / "*.tfrecord"), shuffle=False).interleave(
        tpsd.TFRecordDataset, cycle_length=1)
    ds = _with_policy(ds, tpsd.AutoShardPolicy.FILE)
    assert _worker_elements(ds, 2) == [w["elements"] for w in c["output"]["workers"]]


def test_shuffled_file_list_gives_disjoint_file_sets(tmp_path):
    c = case("shard_tfrecord4_FILE_W2")
    _write_files(tmp_path, c["input"]["files"])
    ds = tpsd.Dataset.list_files(str(tmp_path / "*.tfrecord"), shuffle=True, seed=7).flat_map(tpsd.TFRecordDataset)
    ds = _with_policy(ds, tpsd.AutoShardPolicy.FILE)
    workers = _worker_elements(ds, 2)
    files = [{e.split("_")[0] for e in w} for w in workers]
    assert files[0].isdisjoint(files[1]) and files[0] | files[1] == {"a0", "a1", "a2", "a3"}


@pytest.mark.parametrize("case_id", ["shard_range10_AUTO_W2", "shard_range10_AUTO_W3", "shard_from_generator_AUTO_W2"])
def test_auto_falls_back_to_data_with_one_warning_naming_the_reason(case_id):
    c = case(case_id)
    w = c["input"]["num_workers"]
    if "generator" in case_id:
        ds = tpsd.Dataset.from_generator(lambda: iter(np.int64(i) for i in range(6)),
                                         output_signature=tpsd.TensorSpec((), np.int64))
    else:
        ds = tpsd.Dataset.range(10)
    with pytest.warns(UserWarning, match="AUTO sharding policy will apply DATA sharding policy") as record:
        out = _worker_elements(ds, w)
    assert len(record) == w  # one per worker (= per pipeline)
    assert "unshardable source" in str(record[0].message)
    assert out == [x["elements"] for x in c["output"]["workers"]]


def test_single_worker_never_warns():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [int(x) for x in auto_shard_dataset(tpsd.Dataset.range(10), 1, 0)] == list(range(10))


def test_file_policy_on_an_unshardable_source_is_an_error():
    assert "unshardable" in case("shard_range10_FILE_W2_error")["output"]["workers"][0]["error_at_creation"]["message"]
    with pytest.raises(ValueError, match="Found an unshardable source dataset: RangeDataset"):
        auto_shard_dataset(_with_policy(tpsd.Dataset.range(10), tpsd.AutoShardPolicy.FILE), 2, 0)


def test_data_policy_deals_whole_batches():
    c = case("shard_range10_batch3_DATA_W2")
    ds = _with_policy(tpsd.Dataset.range(10).batch(3), tpsd.AutoShardPolicy.DATA)
    assert _worker_elements(ds, 2) == [w["elements"] for w in c["output"]["workers"]]


def test_hint_policy_fills_shard_hints():
    c = case("shard_hint_policy_W2")
    ds = _with_policy(tpsd.Dataset.range(10).shard(tpsd.SHARD_HINT, tpsd.SHARD_HINT), tpsd.AutoShardPolicy.HINT)
    assert _worker_elements(ds, 2) == [w["elements"] for w in c["output"]["workers"]]


@pytest.mark.devices(3)
def test_fewer_files_than_workers_names_both_counts(tmp_path):
    paths = _write_files(tmp_path, case("shard_tfrecord2_AUTO_W3_fewer_files_than_workers")["input"]["files"])
    s = _strategy(3)
    ds = _with_policy(tpsd.TFRecordDataset(paths).batch(3), tpsd.AutoShardPolicy.FILE)
    with pytest.raises(ValueError, match="2 file") as info:
        s.experimental_distribute_dataset(ds, input_pipeline=(0, 3))
    assert "3 pipelines" in str(info.value) and "DATA" in str(info.value) and "Fix" in str(info.value)
    auto = tpsd.TFRecordDataset(paths).batch(3)
    with pytest.warns(UserWarning, match="2 file"):
        dist = s.experimental_distribute_dataset(auto, input_pipeline=(1, 3))
    assert dist.auto_shard_decision.applied == "DATA"


@pytest.mark.devices(4)
def test_the_decision_is_inspectable(tmp_path):
    paths = _write_files(tmp_path, case("shard_tfrecord4_FILE_W2")["input"]["files"])
    s = _strategy(4)
    dist = s.experimental_distribute_dataset(tpsd.TFRecordDataset(paths).batch(4), input_pipeline=(1, 2))
    text = dist.explain_sharding()
    assert "applied FILE" in text and "files [1, 3]" in text and "batch(4) -> batch(2)" in text


def _pipelines(strategy, ds, w, **kw):
    return [strategy.experimental_distribute_dataset(ds, input_pipeline=(i, w), **kw) for i in range(w)]


def _collect(strategy, dists):
    seen = []
    for d in dists:
        for step in d:
            for part in strategy.experimental_local_results(step):
                seen.extend(_decode(np.asarray(part)) if np.asarray(part).dtype == object else np.asarray(part).tolist())
    return seen


@pytest.mark.devices(4)
def test_file_sharded_pipelines_form_global_steps_of_g_examples(tmp_path):
    files = {f"f{k}.tfrecord": [f"{k * 10 + j}" for j in range(4)] for k in range(4)}
    paths = _write_files(tmp_path, files)
    s = _strategy(4)
    ds = tpsd.TFRecordDataset(paths).map(lambda x: np.int64(x)).batch(8)
    dists = _pipelines(s, ds, 2)
    steps = [list(d) for d in dists]
    for a, b in zip(*steps):
        sizes = [np.shape(v)[0] for v in list(a.values) + list(b.values)]
        assert sum(sizes) == 8
    assert sorted(_collect(s, dists)) == sorted(int(r) for rs in files.values() for r in rs)


@pytest.mark.devices(4)
def test_data_policy_gives_replica_r_piece_r():
    s = _strategy(4)
    ds = _with_policy(tpsd.Dataset.range(10).batch(4), tpsd.AutoShardPolicy.DATA)
    dists = _pipelines(s, ds, 2)
    w0 = [[np.asarray(v).tolist() for v in st.values] for st in dists[0]]
    w1 = [[np.asarray(v).tolist() for v in st.values] for st in dists[1]]
    # DESIGN §5: TF interleaves (w0 gets pieces 0, 2); we give replica r piece r.
    assert w0 == [[[0], [1]], [[4], [5]], [[8], [9]]]
    assert w1 == [[[2], [3]], [[6], [7]], [[], []]]


@pytest.mark.devices(2)
def test_off_policy_every_pipeline_reads_everything():
    golden = case("mw_range10_b4_W2_R1_OFF")["output"]["workers"]
    s = _strategy(2)
    ds = _with_policy(tpsd.Dataset.range(10).batch(4), tpsd.AutoShardPolicy.OFF)
    dists = _pipelines(s, ds, 2)
    for d, g in zip(dists, golden):
        assert [np.asarray(s.experimental_local_results(st)[0]).tolist() for st in d] == g["minibatch_sequence"]


@pytest.mark.parametrize("case_id", [
    pytest.param("mw_range10_b4_W2_R1_AUTO_partial", marks=pytest.mark.devices(2)),  # a replica per worker
    pytest.param("mw_range12_b6_W3_R1_AUTO", marks=pytest.mark.devices(3)),
])
def test_simulated_multi_worker_pipelines_match_tensorflow_with_one_replica_each(case_id):
    c = case(case_id)
    w = c["input"]["num_workers"]
    s = _strategy(w)
    n, g = {"mw_range10_b4_W2_R1_AUTO_partial": (10, 4), "mw_range12_b6_W3_R1_AUTO": (12, 6)}[case_id]
    assert c["input"]["dataset"] == f"Dataset.range({n}).batch({g})"
    with pytest.warns(UserWarning):
        dists = _pipelines(s, tpsd.Dataset.range(n).batch(g), w)
    for d, gw in zip(dists, c["output"]["workers"]):
        assert [np.asarray(s.experimental_local_results(st)[0]).tolist() for st in d] == gw["minibatch_sequence"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    n=st.integers(0, 40),
    g=st.integers(1, 9),
    r_log=st.integers(0, min(3, jax.device_count().bit_length() - 1)),  # 1..8 replicas, as many as the run has
    w_log=st.integers(0, 2),
    drop=st.booleans(),
    policy=st.sampled_from(["AUTO", "DATA", "FILE", "OFF"]),
)
def test_every_example_exactly_once_over_pipelines_and_policies(tmp_path_factory, n, g, r_log, w_log, drop, policy):
    r = 2 ** r_log
    w = min(2 ** w_log, r)
    s = _strategy(r)
    files = max(w, 4)
    tmp = tmp_path_factory.mktemp("pipes")
    paths = []
    for k in range(files):
        path = str(tmp / f"p{k}.tfrecord")
        with tpsd.TFRecordWriter(path) as wr:
            for j in range(k, n, files):
                wr.write(str(j).encode())
        paths.append(path)
    ds = tpsd.TFRecordDataset(paths).map(lambda x: np.int64(x)).batch(g, drop_remainder=drop)
    ds = _with_policy(ds, getattr(tpsd.AutoShardPolicy, policy))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            dists = _pipelines(s, ds, w)
        except ValueError as e:  # OFF/FILE cannot give a pipeline zero examples per step
            assert policy in ("OFF", "FILE") and "no examples" in str(e) and g < r
            return
    seen = sorted(_collect(s, dists))
    if policy == "OFF":
        if not drop:
            assert seen == sorted(list(range(n)) * w)
        return
    if drop:
        assert len(seen) == len(set(seen)) and set(seen) <= set(range(n))
    else:
        assert seen == list(range(n))
