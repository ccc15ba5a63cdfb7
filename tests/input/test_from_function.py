"""distribute_datasets_from_function, InputContext, make_numpy_dataset, iterators in tps.function."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tests.golden.cases import case


def _strategy(n: int) -> tps.Strategy:
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(n)])


def _up_to(n: int) -> tps.Strategy:
    """n replicas, or one per device when the run has fewer (a single replica on --devices 1)."""
    return tps.MirroredStrategy(jax.devices()[:n])


def _steps(strategy, dist):
    return [[np.asarray(v).tolist() for v in strategy.experimental_local_results(step)] for step in dist]


@pytest.mark.devices(2)
def test_dataset_fn_gets_an_input_context_and_replicas_take_consecutive_elements():
    golden = case("dff_range10_R2_gbs8")["output"]
    s = _strategy(2)
    contexts = []

    def dataset_fn(ctx):
        contexts.append(ctx)
        return tpsd.Dataset.range(10).batch(ctx.get_per_replica_batch_size(8))

    dist = s.distribute_datasets_from_function(dataset_fn)
    assert [(c.num_input_pipelines, c.input_pipeline_id, c.num_replicas_in_sync, str(c)) for c in contexts] == [
        (g["num_input_pipelines"], g["input_pipeline_id"], g["num_replicas_in_sync"], g["str"])
        for g in golden["input_contexts"]]
    assert _steps(s, dist) == [st["per_replica"] for st in golden["steps"]]
    assert [sp.shape for sp in dist.element_spec.values] == [tuple(d["shape"]) for d in golden["element_spec"]["PerReplicaSpec"]]


@pytest.mark.devices(2)
def test_experimental_alias_behaves_the_same():
    golden = case("dff_experimental_alias")["output"]["steps"]
    s = _strategy(2)
    dist = s.experimental_distribute_datasets_from_function(lambda ctx: tpsd.Dataset.range(4).batch(1))
    assert _steps(s, dist) == [st["per_replica"] for st in golden]


@pytest.mark.devices(2)
def test_unbatched_scalars_end_at_the_last_complete_step():
    s = _strategy(2)
    dist = s.distribute_datasets_from_function(lambda ctx: tpsd.Dataset.range(5))
    assert _steps(s, dist) == [[0, 1], [2, 3]]


def test_input_context_defaults_and_arithmetic():
    golden = case("dff_input_context_defaults")["output"]
    ctx = tps.InputContext()
    assert (ctx.num_input_pipelines, ctx.input_pipeline_id, ctx.num_replicas_in_sync) == (1, 0, 1)
    assert str(ctx) == golden["default"]["str"]
    assert ctx.get_per_replica_batch_size(5) == golden["default"]["get_per_replica_batch_size(5)"]
    custom = tps.InputContext(4, 3, 8)
    assert str(custom) == golden["custom"]["str"]
    assert custom.get_per_replica_batch_size(64) == 8 and custom.get_per_replica_batch_size(0) == 0


def test_per_replica_batch_size_must_divide():
    golden = case("dff_get_per_replica_batch_size_not_divisible")["error"]["message"]
    with pytest.raises(ValueError) as info:
        tps.InputContext(1, 0, 2).get_per_replica_batch_size(7)
    assert str(info.value) == golden


@pytest.mark.devices(2)
def test_per_replica_mode_calls_dataset_fn_once_per_replica_and_is_not_sticky():
    golden = case("dff_quirk_per_replica_mode_is_sticky")["output"]
    s = _strategy(2)
    seen = []

    def fn(ctx):
        seen.append((ctx.num_input_pipelines, ctx.input_pipeline_id))
        return tpsd.Dataset.range(4).batch(1)

    opts = tps.InputOptions(experimental_replication_mode=tps.InputReplicationMode.PER_REPLICA,
                            experimental_fetch_to_device=False)
    assert _steps(s, s.distribute_datasets_from_function(fn, opts)) == [[[0], [0]], [[1], [1]], [[2], [2]], [[3], [3]]]
    assert seen == [tuple(c) for c in golden["after_per_replica_use"]["contexts"]]
    seen.clear()
    # DESIGN §5: no hidden state, a later plain call builds one pipeline again.
    assert _steps(s, s.distribute_datasets_from_function(fn)) == [st["per_replica"] for st in golden["fresh_strategy"]["steps"]]
    assert seen == [tuple(c) for c in golden["fresh_strategy"]["contexts"]]


def test_per_replica_mode_is_not_implemented_on_tpu_strategy():
    s = tps.TPUStrategy()
    opts = tps.InputOptions(experimental_replication_mode=tps.InputReplicationMode.PER_REPLICA,
                            experimental_fetch_to_device=False)
    with pytest.raises(NotImplementedError, match="PER_REPLICA"):
        s.distribute_datasets_from_function(lambda ctx: tpsd.Dataset.range(4).batch(1), opts)


def test_input_options_are_validated():
    with pytest.raises(ValueError, match="partial_batch"):
        tps.InputOptions(partial_batch="truncate")


# TensorFlow's InputOptions is a namedtuple that accepts every combination; input_util checks the
# dataset placement against the replication mode when a dataset is distributed.
PLACED_PER_WORKER = dict(experimental_place_dataset_on_device=True, experimental_fetch_to_device=False)
PLACED_AND_FETCHED = dict(experimental_place_dataset_on_device=True,
                          experimental_replication_mode=tps.InputReplicationMode.PER_REPLICA)


@pytest.mark.parametrize("kwargs", [PLACED_PER_WORKER, PLACED_AND_FETCHED, dict(experimental_place_dataset_on_device=True)])
def test_input_options_accept_every_combination_as_tensorflow_does(kwargs):
    options = tps.InputOptions(**kwargs)
    assert options.experimental_place_dataset_on_device is True


def test_dataset_placement_without_per_replica_is_refused_when_distributing():
    s = _up_to(2)
    ds = tpsd.Dataset.range(8).batch(2)
    message = ("When `experimental_place_dataset_on_device` is set for dataset placement, you must "
               "also specify `PER_REPLICA` for the replication mode")
    with pytest.raises(ValueError) as info:
        s.distribute_datasets_from_function(lambda ctx: ds, tps.InputOptions(**PLACED_PER_WORKER))
    assert str(info.value).split("\n")[0] == message
    assert "PER_REPLICA" in str(info.value).split("\n", 1)[1]


def test_experimental_distribute_dataset_ignores_dataset_placement_as_tensorflow_does():
    # TensorFlow 2.21: MirroredStrategy.experimental_distribute_dataset(ds, InputOptions(
    # experimental_place_dataset_on_device=True, experimental_fetch_to_device=False)) is accepted.
    s = _up_to(2)
    dist = s.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(2),
                                             tps.InputOptions(**PLACED_PER_WORKER))
    values = [int(v) for x in dist for c in s.experimental_local_results(x) for v in np.asarray(c).ravel()]
    assert values == list(range(8))


def test_dataset_placement_with_fetch_to_device_is_refused_when_distributing():
    s = tps.MirroredStrategy()
    message = ("`experimental_place_dataset_on_device` can not be set to True when "
               "experimental_fetch_to_device is True and replication mode is set to `PER_REPLICA`")
    with pytest.raises(ValueError) as info:
        s.distribute_datasets_from_function(lambda ctx: tpsd.Dataset.range(8).batch(1),
                                            tps.InputOptions(**PLACED_AND_FETCHED))
    assert str(info.value).split("\n")[0] == message


def test_per_replica_is_refused_before_the_placement_check_in_distribute_dataset():
    # TensorFlow's strategy raises NotImplementedError before input_util looks at the placement.
    s = _up_to(2)
    with pytest.raises(NotImplementedError, match="distribute_datasets_from_function"):
        s.experimental_distribute_dataset(tpsd.Dataset.range(8).batch(2),
                                          tps.InputOptions(**PLACED_AND_FETCHED))


@pytest.mark.parametrize("case_id", ["numpy_ds_array", "numpy_ds_list_stacked"])
def test_make_numpy_dataset_yields_rows(case_id):
    golden = case(case_id)
    s = _up_to(2)
    if "array" in golden["input"]:
        arr = np.asarray(golden["input"]["array"], dtype=golden["input"]["dtype"])
    else:
        arr = [np.asarray(x) for x in golden["input"]["list_of_arrays"]]
    ds = s.experimental_make_numpy_dataset(arr)
    assert [np.asarray(x).tolist() for x in ds] == golden["output"]["elements"]
    assert ds.element_spec.shape == tuple(golden["output"]["element_spec"]["shape"])


def test_make_numpy_dataset_slices_without_copying_and_distributes():
    s = _up_to(2)
    x = np.arange(12.0).reshape(6, 2)
    rows = list(s.experimental_make_numpy_dataset(x))
    assert all(np.shares_memory(r, x) for r in rows)
    dist = s.experimental_distribute_dataset(s.experimental_make_numpy_dataset((x, np.arange(6))).batch(4))
    firsts = [np.asarray(v).tolist() for v in s.experimental_local_results(next(iter(dist))[1])]
    assert firsts == {1: [[0, 1, 2, 3]], 2: [[0, 1], [2, 3]]}[s.num_replicas_in_sync]


def test_next_of_a_distributed_iterator_inside_tps_function_continues_across_calls():
    golden = case("loop_steps_in_tf_function")["output"]
    s = _up_to(2)
    with s.scope():
        v = tps.Variable(0, aggregation="SUM")
    it = iter(s.experimental_distribute_dataset(tpsd.Dataset.range(16).batch(4)))

    def step(x):
        v.assign_add(jnp.sum(x).astype(jnp.int32))
        return jnp.sum(x)

    @tps.function
    def train(it):
        for _ in range(2):
            last = s.run(step, (next(it),))
        return s.reduce("SUM", last, axis=None)

    # TensorFlow's golden run had 2 replicas: every replica of the mirrored variable holds the sum.
    r = s.num_replicas_in_sync
    assert int(train(it)) == golden["call1_last_step_sum"]
    assert [int(c) for c in s.experimental_local_results(v)] == golden["var_after_call1"][:1] * r
    assert int(train(it)) == golden["call2_last_step_sum"]
    assert [int(c) for c in s.experimental_local_results(v)] == golden["var_after_call2"][:1] * r
    with pytest.raises(StopIteration):
        train(it)


def test_a_changed_batch_shape_retraces_the_function():
    s = _up_to(2)
    traces = []
    it = iter(s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4, drop_remainder=False),
                                                tps.InputOptions(partial_batch="ragged")))

    @tps.function
    def total(it):
        traces.append(1)
        return s.reduce("SUM", s.run(jnp.sum, (next(it),)), axis=None)

    assert int(total(it)) == 6
    first = len(traces)  # the first trace meets the pull, the second has it as an input
    assert int(total(it)) == 22
    assert len(traces) == first
    assert int(total(it)) == 17  # [8], [9]: a new shape retraces
    assert len(traces) > first


def test_for_loop_over_a_distributed_dataset_with_reduce():
    golden = case("loop_for_over_dist_dataset_in_tf_function")["output"]
    s = _up_to(2)
    total, count = 0, 0
    for x in s.experimental_distribute_dataset(tpsd.Dataset.range(10).batch(4)):
        total += int(s.reduce("SUM", s.run(jnp.sum, (x,)), axis=None))
        count += int(s.reduce("SUM", s.run(lambda x: x.shape[0] * jnp.ones((), jnp.int32), (x,)), axis=None))
    assert [total, count] == golden
    assert jax.devices()
