"""experimental_distribute_dataset: the split algorithm (DESIGN §4) and TF's golden cases."""

from __future__ import annotations

import collections

import jax
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tests.golden.cases import case, ids


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def _up_to(n: int) -> tps.Strategy:
    """n replicas, or one per device when the run has fewer (a single replica on --devices 1)."""
    return tps.MirroredStrategy(jax.devices()[:n])


def _steps(strategy, dist):
    return [[np.asarray(v).tolist() for v in strategy.experimental_local_results(step)] for step in dist]


def _design_split(elements, g, r, drop, repeat):
    """DESIGN §4 computed independently: contiguous, ceil for the first b mod R replicas."""
    out = []
    for _ in range(repeat):
        batches = [elements[i:i + g] for i in range(0, len(elements), g)]
        if drop:
            batches = [b for b in batches if len(b) == g]
        for b in batches:
            base, extra = divmod(len(b), r)
            pieces, start = [], 0
            for k in range(r):
                size = base + (1 if k < extra else 0)
                pieces.append(b[start:start + size])
                start += size
            out.append(pieces)
    return out


_SPLIT_CASES = [i for i in ids("experimental_distribute_dataset")
                if "global_batch_size" in case(i)["input"] and "elements" in case(i)["input"]
                and "map" not in case(i)["input"]]


def _policy(name):
    return {"OFF": tpsd.AutoShardPolicy.OFF, "DATA": tpsd.AutoShardPolicy.DATA,
            "FILE": tpsd.AutoShardPolicy.FILE}.get(name, tpsd.AutoShardPolicy.AUTO)


@pytest.mark.parametrize("case_id", [
    pytest.param(i, marks=pytest.mark.devices(case(i)["input"]["num_replicas"])) for i in _SPLIT_CASES])
def test_split_follows_design_and_equals_tensorflow_when_batches_divide(case_id):
    inp = case(case_id)["input"]
    golden = case(case_id)["output"]
    elements, g, r = inp["elements"], inp["global_batch_size"], inp["num_replicas"]
    drop, repeat = inp.get("drop_remainder", False), inp.get("repeat", 1)
    options = tpsd.Options()
    options.experimental_distribute.auto_shard_policy = _policy(inp.get("auto_shard_policy", "AUTO"))
    ds = tpsd.Dataset.range(len(elements)).batch(g, drop_remainder=drop).repeat(repeat).with_options(options)
    s = _strategy(r)
    ours = _steps(s, s.experimental_distribute_dataset(ds))
    assert ours == _design_split(elements, g, r, drop, repeat)
    if all(len(b) % r == 0 for step in golden["steps"] for b in [sum(step["per_replica"], [])]) and \
            all(len({len(p) for p in step["per_replica"]}) == 1 for step in golden["steps"]):
        assert ours == [step["per_replica"] for step in golden["steps"]]


@pytest.mark.devices(4)
def test_uneven_split_example_from_the_design():
    s = _strategy(4)
    ours = _steps(s, s.experimental_distribute_dataset(tpsd.Dataset.range(14).batch(6)))
    assert ours == [[[0, 1], [2, 3], [4], [5]], [[6, 7], [8, 9], [10], [11]], [[12], [13], [], []]]


@pytest.mark.devices(2)
def test_batch_then_map_is_split_like_tensorflow():
    golden = case("dd_batch_then_map_R2")["output"]["steps"]
    s = _strategy(2)
    ours = _steps(s, s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4).map(lambda x: x * 2)))
    assert ours == [st["per_replica"] for st in golden]


@pytest.mark.devices(2)
def test_pre_batched_generator_uses_each_elements_own_batch_size():
    s = _strategy(2)
    rows = [[0, 1, 2], [3, 4, 5, 6, 7], [8]]
    ds = tpsd.Dataset.from_generator(lambda: iter(np.array(r, np.int64) for r in rows),
                                     output_signature=tpsd.TensorSpec((None,), np.int64))
    assert _steps(s, s.experimental_distribute_dataset(ds)) == [[[0, 1], [2]], [[3, 4, 5], [6, 7]], [[8], []]]
    assert case("dd_unknown_batch_size_generator_R2")["output"]["steps"][0]["per_replica"] == [[0, 1], [2]]


@pytest.mark.devices(2)
def test_padded_batch_pieces_keep_the_padded_width():
    golden = case("dd_padded_batch_R2")
    rows = golden["input"]["rows"]
    s = _strategy(2)
    ds = tpsd.Dataset.from_generator(lambda: iter(np.array(r, np.int64) for r in rows),
                                     output_signature=tpsd.TensorSpec((None,), np.int64)).padded_batch(4)
    ours = _steps(s, s.experimental_distribute_dataset(ds))
    assert ours == [st["per_replica"] for st in golden["output"]["steps"]]


def test_single_replica_passes_unbatched_scalars_through():
    golden = case("dd_unbatched_scalars_R1_ok")["output"]["steps"]
    s = _strategy(1)
    out = [np.asarray(x).tolist() for x in s.experimental_distribute_dataset(tpsd.Dataset.range(3))]
    assert out == [st["per_replica"][0] for st in golden]


@pytest.mark.devices(2)
def test_unbatched_dataset_with_several_replicas_says_to_batch_it():
    s = _strategy(2)
    with pytest.raises(ValueError, match=r"\.batch\(global_batch_size\)"):
        next(iter(s.experimental_distribute_dataset(tpsd.Dataset.range(3))))


def test_distributed_dataset_accepts_no_transformations():
    golden = case("dd_no_transformations_allowed")["error"]["message"]
    s = _up_to(2)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(4).batch(2))
    with pytest.raises(AttributeError) as info:
        dist.map(lambda x: x)
    assert str(info.value) == golden


def test_next_inside_the_replica_function_raises_tensorflows_error():
    golden = case("dd_next_inside_replica_fn_error")["error"]["message"]
    s = _up_to(2)
    it = iter(s.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(4)))
    with pytest.raises(ValueError) as info:
        s.run(lambda: next(it))
    assert str(info.value) == golden


def test_cardinality_mirrors_the_source():
    golden = case("dd_cardinality_property")["output"]
    s = _up_to(2)
    assert s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4)).cardinality() == golden["finite"]
    assert s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4).repeat()).cardinality() == golden["infinite"]


@pytest.mark.devices(2)
def test_element_spec_is_static_only_for_even_splits_with_drop_remainder():
    s = _strategy(2)
    even = s.experimental_distribute_dataset(tpsd.Dataset.range(9).batch(4, drop_remainder=True)).element_spec
    assert [sp.shape for sp in even.values] == [tuple(d["shape"]) for d in case("dd_range9_b4_drop_R2")["output"]["element_spec"]["PerReplicaSpec"]]
    ragged = s.experimental_distribute_dataset(tpsd.Dataset.range(9).batch(4)).element_spec
    assert [sp.shape for sp in ragged.values] == [(None,), (None,)]


@pytest.mark.devices(3)
def test_tuples_dicts_and_namedtuples_are_split_leaf_by_leaf_with_empty_pieces():
    Pair = collections.namedtuple("Pair", "x y")
    s = _strategy(3)
    features = np.arange(8.0).reshape(4, 2)
    labels = np.arange(4)
    ds = tpsd.Dataset.from_tensor_slices(({"f": features}, Pair(labels, labels * 10))).batch(4)
    steps = list(s.experimental_distribute_dataset(ds))
    assert len(steps) == 1
    feats, pair = steps[0]
    shapes = [np.shape(v) for v in feats["f"].values]
    assert shapes == [(2, 2), (1, 2), (1, 2)]
    assert isinstance(pair, Pair)
    two = s.experimental_distribute_dataset(tpsd.Dataset.from_tensor_slices(features).batch(2))
    first = next(iter(two))
    assert [np.shape(v) for v in first.values] == [(1, 2), (1, 2), (0, 2)]


def test_every_example_is_seen_exactly_once_with_a_partial_last_batch():
    s = _up_to(4)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4))
    seen = [int(x) for batch in dist for part in s.experimental_local_results(batch) for x in np.asarray(part)]
    assert sorted(seen) == list(range(10))


@pytest.mark.devices(4)
def test_fetch_to_device_gives_jax_arrays_on_each_replicas_device():
    s = _strategy(4)
    step = next(iter(s.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(8))))
    assert all(isinstance(v, jax.Array) for v in step.values)
    assert [next(iter(v.devices())) for v in step.values] == list(jax.devices()[:4])
    host = next(iter(s.experimental_distribute_dataset(
        tpsd.Dataset.range(8).batch(8), tps.InputOptions(experimental_fetch_to_device=False))))
    assert all(isinstance(v, np.ndarray) for v in host.values)


@pytest.mark.devices(2)
def test_string_leaves_stay_on_the_host():
    s = _strategy(2)
    ds = tpsd.Dataset.from_tensor_slices(np.array([b"a", b"b\x00", b"c", b"d"], dtype=object)).batch(4)
    step = next(iter(s.experimental_distribute_dataset(ds)))
    assert [list(v) for v in step.values] == [[b"a", b"b\x00"], [b"c", b"d"]]


def test_distributed_batches_feed_a_compiled_run_and_ragged_ones_the_eager_path():
    s = _up_to(4)
    totals = []
    for step in s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4)):
        out = s.run(lambda x: tps.get_replica_context().all_reduce("SUM", x.sum()), (step,))
        totals.append(int(s.experimental_local_results(out)[0]))
    assert totals == [6, 22, 17]


@pytest.mark.devices(4)
def test_pad_policy_pads_to_the_static_size_and_masks():
    s = _strategy(4)
    opts = tps.InputOptions(partial_batch="pad")
    steps = list(s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4), opts))
    assert len(steps) == 3
    batch, mask = steps[-1]
    assert [np.asarray(v).tolist() for v in batch.values] == [[8], [9], [0], [0]]
    assert [np.asarray(v).tolist() for v in mask.values] == [[True], [True], [False], [False]]
    traces = []

    def fn(x, m):
        traces.append(1)
        return tps.get_replica_context().all_reduce("SUM", (x * m).sum())

    totals = [int(s.experimental_local_results(s.run(fn, step))[0]) for step in steps]
    assert totals == [6, 22, 17] and len(traces) == 1


@pytest.mark.devices(2)
def test_drop_policy_skips_the_partial_global_batch():
    s = _strategy(2)
    steps = _steps(s, s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4),
                                                        tps.InputOptions(partial_batch="drop")))
    assert steps == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]


def test_iterator_state_resumes_exactly_with_prefetching():
    s = _up_to(2)
    ds = tpsd.Dataset.range(40).shuffle(10, seed=3).batch(4)
    dist = s.experimental_distribute_dataset(ds)
    it = iter(dist)
    states, reference = [], []
    while True:
        states.append(it.get_state())
        try:
            step = next(it)
        except StopIteration:
            break
        reference.append([np.asarray(v).tolist() for v in s.experimental_local_results(step)])
    assert sorted(x for st in reference for p in st for x in p) == list(range(40))
    for k in (0, 3, 7, len(reference) - 1):
        fresh = iter(dist)
        fresh.set_state(states[k])
        rest = [[np.asarray(v).tolist() for v in s.experimental_local_results(st)] for st in fresh]
        assert rest == reference[k:]


def test_get_next_as_optional_reports_the_end():
    s = _up_to(2)
    it = iter(s.experimental_distribute_dataset(tpsd.Dataset.range(4).batch(4)))
    first = it.get_next_as_optional()
    pieces = {1: [[0, 1, 2, 3]], 2: [[0, 1], [2, 3]]}[s.num_replicas_in_sync]
    assert first.has_value()
    assert [np.asarray(v).tolist() for v in s.experimental_local_results(first.get_value())] == pieces
    assert not it.get_next_as_optional().has_value()
    with pytest.raises(StopIteration):
        it.get_next()


def test_per_replica_mode_is_rejected_for_distribute_dataset():
    s = _up_to(2)
    with pytest.raises(NotImplementedError, match="only supported in `distribute_datasets_from_function`"):
        s.experimental_distribute_dataset(
            tpsd.Dataset.range(4).batch(2),
            tps.InputOptions(experimental_replication_mode=tps.InputReplicationMode.PER_REPLICA,
                             experimental_fetch_to_device=False))


def test_empty_dataset_gives_no_steps():
    s = _up_to(2)
    assert _steps(s, s.experimental_distribute_dataset(tpsd.Dataset.range(0).batch(4))) == []


def test_dropping_an_iterator_stops_its_prefetch_thread():
    import gc
    import threading
    import time

    s = _up_to(2)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(1000).batch(4))
    before = threading.active_count()
    for _ in range(5):
        it = iter(dist)
        next(it)
        del it
    gc.collect()
    deadline = time.time() + 10
    while threading.active_count() > before and time.time() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before
