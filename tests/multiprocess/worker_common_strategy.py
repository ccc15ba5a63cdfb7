"""Worker of test_common_strategy.py: TensorFlow's common strategy tests on a multi-worker job.

TensorFlow's ``strategy_common_test.py`` (the cases its ``multi_worker_mirrored_*``
combinations run), ported by renaming: ``tf.distribute`` -> ``tps``, ``tf.data`` ->
``tpsd``, ``tf.function`` -> ``tps.function``. TensorFlow runs them on 2 workers x 1
device; this worker runs on any ``W x L`` job (the launcher's ``--devices-per-process``),
so the expected values are written for ``R = W * L`` replicas and ``L`` local ones; with
``L == 1`` they are TensorFlow's literal numbers (sums 10 / 35, data [8, 9, 10] / [11, 12, 13]).

Run under ``python -m tpustrategy.launch -n 2 --devices-per-process L``; prints one
line ``RESULT <json>``: ``{case: "ok" | "<Error>: <message>"}``.
"""

from __future__ import annotations

import tpustrategy as tps
from tests.multiprocess.case_runner import run_and_report

tps.initialize(initialization_timeout=30, heartbeat_timeout=10, shutdown_timeout=10, collective_timeout=30)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import tpustrategy.data as tpsd  # noqa: E402

strategy = tps.MultiWorkerMirroredStrategy()
PID = jax.process_index()
W = jax.process_count()
L = len(jax.local_devices())
R = strategy.num_replicas_in_sync
TASK = "chief" if PID == 0 else "worker"
CASES: dict = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def assert_all_equal(expected, got):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def local(value):
    return [np.asarray(v) for v in strategy.experimental_local_results(value)]


# StrategyTest -----------------------------------------------------------------------------------
@case
def test_capture_replica_id():
    m = {}

    @tps.function
    def f():
        return tps.get_replica_context().replica_id_in_sync_group

    @tps.function
    def g():
        # Make g() a stateful function so it's traced twice.
        if m.get("v", None) is None:
            m["v"] = tps.Variable(0.0)
        return strategy.run(f)

    assert_all_equal([PID * L + i for i in range(L)], local(g()))


@case
def test_merge_call_init_scope():
    with strategy.scope():

        @tps.function
        def fn():
            def merge_fn(unused_strat):
                return jnp.asarray(11)

            def replica_fn():
                y = tps.get_replica_context().merge_call(merge_fn)
                return y + 1

            return strategy.run(replica_fn)

        result = strategy.experimental_local_results(fn())
        assert_all_equal([12] * L, result)


# StrategyLocalResultTest ------------------------------------------------------------------------
def _local_result_of(model_fn):
    with strategy.scope():
        result = strategy.run(tps.function(model_fn))
        return strategy.experimental_local_results(result)


def _numpy(tree):
    return jax.tree_util.tree_map(lambda x: np.asarray(x).tolist(), tree)


@case
def test_local_result_for_dictionary():
    got = _local_result_of(lambda: {"a": jnp.float32(1.0), "b": jnp.float32(2.0)})
    assert _numpy(got) == ({"a": 1.0, "b": 2.0},) * L


@case
def test_local_result_for_list():
    got = _local_result_of(lambda: [jnp.float32(1.0), jnp.float32(2.0)])
    assert _numpy(got) == ([1.0, 2.0],) * L


@case
def test_local_result_for_tuple():
    got = _local_result_of(lambda: (jnp.float32(1.0), jnp.float32(2.0), jnp.float32(3.0)))
    assert _numpy(got) == ((1.0, 2.0, 3.0),) * L


@case
def test_local_result_for_nested_struct():
    got = _local_result_of(lambda: ({"a": jnp.float32(1.0), "b": jnp.float32(2.0)},
                                    {"a": jnp.float32(4.0), "b": jnp.float32(6.0)}))
    assert _numpy(got) == (({"a": 1.0, "b": 2.0}, {"a": 4.0, "b": 6.0}),) * L


@case
def test_local_result_for_nested_struct_without_tensor():
    v = _local_result_of(lambda: {"a": 1.0, "b": 2.0})
    assert isinstance(v, tuple), type(v)
    assert _numpy(v) == ({"a": 1.0, "b": 2.0},) * L


@case
def test_local_result_for_scalar_value():
    def model_fn():
        return strategy.extended._get_local_replica_id(tps.get_replica_context().replica_id_in_sync_group)

    v = _local_result_of(model_fn)
    assert isinstance(v, tuple), type(v)
    assert _numpy(v) == tuple(range(L))


@case
def test_local_result_for_dictionary_different_replicas():
    def model_fn():
        replica_id = strategy.extended._get_local_replica_id(tps.get_replica_context().replica_id_in_sync_group)
        return {"a": jnp.asarray(replica_id + 1, jnp.float32), "b": jnp.asarray(replica_id + 2, jnp.float32)}

    got = _local_result_of(model_fn)
    assert _numpy(got) == tuple({"a": i + 1.0, "b": i + 2.0} for i in range(L))


@case
def test_local_result_for_tensor():
    v = _local_result_of(lambda: jnp.asarray([2.0, 3.0]))
    assert _numpy(v) == ([2.0, 3.0],) * L


# ReduceTest -------------------------------------------------------------------------------------
@case
def test_reduce_basic():
    per_replica_value = strategy.experimental_distribute_values_from_function(lambda _: jnp.ones((), jnp.float32))

    def fn_eager():
        return strategy.reduce(tps.ReduceOp.SUM, value=per_replica_value, axis=None)

    fn_graph = tps.function(fn_eager)
    with strategy.scope():
        assert float(np.asarray(fn_eager())) == 1.0 * R
        assert float(np.asarray(fn_graph())) == 1.0 * R
    assert float(np.asarray(fn_eager())) == 1.0 * R
    assert float(np.asarray(fn_graph())) == 1.0 * R


@case
def test_reduce_axis():
    @tps.function
    def fn():
        return jnp.asarray([1.0, 2.0])

    x = strategy.run(fn)
    assert float(strategy.reduce(tps.ReduceOp.MEAN, x, axis=0)) == 1.5
    assert float(strategy.reduce(tps.ReduceOp.SUM, x, axis=0)) == 3 * R


# ReplicaCtxUpdateTest ---------------------------------------------------------------------------
def _dense_update(update_fn, tf_function):
    with strategy.scope():
        distributed_variable1 = tps.Variable(5.0)

    def replica_fn():
        value = jnp.asarray(2.0)
        python_literal = 1.0
        replica_context = tps.get_replica_context()
        fn_sets = {
            "assign": lambda var, value: var.assign(value),
            "assign_add": lambda var, value: var.assign_add(value),
            "assign_sub": lambda var, value: var.assign_sub(value),
        }
        replica_context._update(distributed_variable1, fn_sets[update_fn], args=(value,))
        replica_context._update(distributed_variable1, fn_sets[update_fn], args=(python_literal,))

    if tf_function:
        replica_fn = tps.function(replica_fn)
    strategy.run(replica_fn)
    expected_result = {"assign": 1.0, "assign_add": 8.0, "assign_sub": 2.0}
    assert_all_equal([expected_result[update_fn]] * L, local(distributed_variable1))


for _fn in ("assign", "assign_add", "assign_sub"):
    for _tf in (True, False):
        CASES[f"test_dense_update_{_fn}_{'tf_function' if _tf else 'eager'}"] = (
            lambda f=_fn, t=_tf: _dense_update(f, t))


# ReplicaCtxAllReduceTest / AllReduceTest -------------------------------------------------------
def _maybe_function(fn, tf_function):
    return tps.function(fn) if tf_function else fn


def _replica_ctx_all_reduce_dense(tf_function):
    def fn():
        def replica_fn():
            value = jnp.asarray(1.0)
            return strategy.extended._replica_ctx_all_reduce(tps.ReduceOp.SUM, value)

        return strategy.experimental_local_results(strategy.run(replica_fn))

    got = _maybe_function(fn, tf_function)()[0]
    assert float(got) == 1.0 * R


def _all_reduce_dense(tf_function):
    def fn():
        def replica_fn():
            value = jnp.asarray(1.0)
            return tps.get_replica_context().all_reduce(tps.ReduceOp.SUM, value)

        return strategy.experimental_local_results(strategy.run(replica_fn))

    got = _maybe_function(fn, tf_function)()[0]
    assert float(got) == 1.0 * R


def _all_reduce_nested_dense(tf_function):
    # TensorFlow's testNestedInput with dense values in place of IndexedSlices.
    def fn():
        def replica_fn():
            value = (jnp.asarray(1.0), jnp.asarray([[1.0]]), jnp.asarray(2.0), jnp.asarray([[2.0]]))
            return tps.get_replica_context().all_reduce(tps.ReduceOp.SUM, value)

        return strategy.experimental_local_results(strategy.run(replica_fn))

    got = _maybe_function(fn, tf_function)()[0]
    expect = (1.0 * R, [[1.0 * R]], 2.0 * R, [[2.0 * R]])
    for g, e in zip(got, expect):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e))


def _sync_on_read_variable_input(tf_function):
    with strategy.scope():
        var = tps.Variable(0.0, synchronization=tps.VariableSynchronization.ON_READ,
                           aggregation=tps.VariableAggregation.ONLY_FIRST_REPLICA)

    def replica_fn():
        replica_context = tps.get_replica_context()
        replica_id = replica_context.replica_id_in_sync_group
        var.assign(jnp.asarray(replica_id, jnp.float32) * 3.0)
        return replica_context.all_reduce(tps.ReduceOp.SUM, var)

    client_local_replica_num = strategy.extended._num_devices_per_worker
    expected_sum = sum(range(R)) * 3.0
    result = strategy.run(_maybe_function(replica_fn, tf_function))
    if hasattr(result, "values"):
        result = result.values
    result = jax.tree_util.tree_leaves(result)
    assert client_local_replica_num == L, client_local_replica_num
    for i in range(client_local_replica_num):
        assert float(np.asarray(result[i])) == expected_sum


for _tf in (True, False):
    _suffix = "tf_function" if _tf else "eager"
    CASES[f"test_replica_ctx_all_reduce_dense_{_suffix}"] = lambda t=_tf: _replica_ctx_all_reduce_dense(t)
    CASES[f"test_sync_on_read_variable_input_{_suffix}"] = lambda t=_tf: _sync_on_read_variable_input(t)
    CASES[f"test_all_reduce_dense_{_suffix}"] = lambda t=_tf: _all_reduce_dense(t)
    CASES[f"test_all_reduce_nested_dense_{_suffix}"] = lambda t=_tf: _all_reduce_nested_dense(t)


# DistributedCollectiveAllReduceStrategyTest -----------------------------------------------------
def _first_batches_sum(pid, per_replica):
    """range(100).repeat().batch(per_replica).shard(W, pid): this worker's first L batches."""
    batches = [np.arange(k * per_replica, (k + 1) * per_replica) for k in range(pid, 100, W)][:L]
    return int(sum(b.sum() for b in batches))


@case
def test_dataset_from_function():
    def dataset_fn(input_context):
        global_batch_size = 5 * R  # TensorFlow's 10 on its 2 replicas
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        d = tpsd.Dataset.range(100).repeat().batch(batch_size)
        return d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)

    # TensorFlow (L = 1): {'chief': 10, 'worker': 35}. Hand-computed for L = 4: batches
    # 0, 2, 4, 6 (chief) and 1, 3, 5, 7 (worker) of five: 25 * 12 + 40 and 25 * 16 + 40.
    expected_sum_on_workers = {1: {"chief": 10, "worker": 35}, 4: {"chief": 340, "worker": 440}}
    input_iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tps.function
    def run(iterator):
        return strategy.experimental_local_results(iterator.get_next())

    result = run(input_iterator)
    sum_value = int(np.sum([np.asarray(r) for r in result]))
    assert sum_value == expected_sum_on_workers[L][TASK], sum_value
    assert sum_value == _first_batches_sum(PID, 5)


@case
def test_simple_input_from_dataset_last_partial_batch():
    global_batch_size = 8
    dataset = tpsd.Dataset.range(14).batch(global_batch_size, drop_remainder=False)
    input_iterator = iter(strategy.experimental_distribute_dataset(dataset))

    @tps.function
    def run(input_iterator):
        return strategy.run(lambda x: x, args=(next(input_iterator),))

    run(input_iterator)  # Let the complete batch go.
    result = run(input_iterator)  # an incomplete batch
    # 6 examples over R replicas: pieces of 3 (R = 2) or 1, 1, 1, 1, 1, 1, 0, 0 (R = 8).
    expected_data_on_workers = {1: {"chief": [8, 9, 10], "worker": [11, 12, 13]},
                                4: {"chief": [8, 9, 10, 11], "worker": [12, 13]}}
    assert_all_equal(expected_data_on_workers[L][TASK], np.concatenate(local(result)))


@case
def test_simple_input_from_fn_last_partial_batch():
    def dataset_fn(input_context):
        global_batch_size = 8
        batch_size = input_context.get_per_replica_batch_size(global_batch_size)
        dataset = tpsd.Dataset.range(14).batch(batch_size, drop_remainder=False)
        return dataset.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)

    input_iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    @tps.function
    def run(input_iterator):
        return strategy.run(lambda x: x, args=(next(input_iterator),))

    run(input_iterator)  # Let the complete batch go.
    result = run(input_iterator)  # an incomplete batch
    # L = 1: batches of 4, chief gets [0..3], [8..11], worker [4..7], [12, 13].
    # L = 4: batches of 1, chief gets the even numbers, worker the odd ones, 4 per step.
    expected_data_on_worker = {1: {"chief": [8, 9, 10, 11], "worker": [12, 13]},
                               4: {"chief": [8, 10, 12], "worker": [9, 11, 13]}}
    assert_all_equal(expected_data_on_worker[L][TASK], np.concatenate(local(result)))


@case
def test_reduce_host_tensor():
    reduced = strategy.reduce(tps.ReduceOp.SUM, jnp.asarray(1.0), axis=None)
    assert float(np.asarray(reduced)) == 1.0 * R


@case
def test_reduce_to_host_tensor():
    value = jnp.asarray(1.0)
    reduced = strategy.extended.reduce_to(tps.ReduceOp.SUM, value, value)
    assert float(np.asarray(reduced)) == 1.0 * R


@case
def test_batch_reduce_to_host_tensor():
    value = jnp.asarray(1.0)
    reduced = strategy.extended.batch_reduce_to(tps.ReduceOp.SUM, [(value, value), (value, value)])
    assert_all_equal([1.0 * R, 1.0 * R], reduced)
    assert [float(r) for r in reduced] == [1.0 * R, 1.0 * R]


@case
def test_reduce_device_tensors():
    value = strategy.run(lambda: jnp.asarray(1.0))
    reduced = strategy.reduce(tps.ReduceOp.SUM, value, axis=None)
    assert float(np.asarray(reduced)) == 1.0 * R


@case
def test_reduce_to_device_tensors():
    value = strategy.run(lambda: jnp.asarray(1.0))
    reduced = strategy.extended.reduce_to(tps.ReduceOp.SUM, value, value)
    assert float(np.asarray(reduced)) == 1.0 * R


@case
def test_batch_reduce_to_device_tensors():
    value = strategy.run(lambda: jnp.asarray(1.0))
    reduced = strategy.extended.batch_reduce_to(tps.ReduceOp.SUM, [(value, value), (value, value)])
    if L == 1:  # TensorFlow's case: one destination device, so plain tensors
        assert_all_equal([1.0 * R, 1.0 * R], reduced)
    else:  # the destinations are L local devices: a Mirrored over them, as in TensorFlow
        assert all(isinstance(r, tps.Mirrored) for r in reduced), [type(r) for r in reduced]
        assert_all_equal([[1.0 * R] * L] * 2, [local(r) for r in reduced])


# Beyond TensorFlow's literal cases: the multi-worker idioms -------------------------------
@case
def test_reduce_of_a_partial_last_batch_is_a_tensor():
    dataset = tpsd.Dataset.range(14).map(lambda v: np.float32(v)).batch(8)
    totals = []
    for batch in strategy.experimental_distribute_dataset(dataset):
        reduced = strategy.reduce(tps.ReduceOp.SUM, batch, axis=0)
        assert not isinstance(reduced, tps.DistributedValues), type(reduced)
        totals.append(float(reduced))
    assert totals == [float(sum(range(8))), float(sum(range(8, 14)))]


@case
def test_reduce_of_a_partial_last_batch_from_run_is_a_tensor():
    dataset = tpsd.Dataset.range(14).map(lambda v: np.float32(v)).batch(8)
    totals, means = [], []
    for batch in strategy.experimental_distribute_dataset(dataset):
        doubled = strategy.run(lambda x: 2.0 * x, args=(batch,))
        reduced = strategy.reduce(tps.ReduceOp.SUM, doubled, axis=0)
        mean = strategy.reduce(tps.ReduceOp.MEAN, doubled, axis=0)
        assert not isinstance(reduced, tps.DistributedValues), type(reduced)
        totals.append(float(reduced))
        means.append(float(mean))
    assert totals == [2.0 * sum(range(8)), 2.0 * sum(range(8, 14))]
    np.testing.assert_allclose(means, [2.0 * np.mean(range(8)), 2.0 * np.mean(range(8, 14))])


@case
def test_reduce_of_a_partial_last_batch_inside_tps_function_is_a_tensor():
    dataset = tpsd.Dataset.range(14).map(lambda v: np.float32(v)).batch(8)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))

    @tps.function
    def step(it):
        doubled = strategy.run(lambda x: 2.0 * x, args=(next(it),))
        return (strategy.reduce(tps.ReduceOp.SUM, doubled, axis=0),
                strategy.reduce(tps.ReduceOp.MEAN, doubled, axis=0))

    got = [step(iterator) for _ in range(2)]
    for total, mean in got:
        assert not isinstance(total, tps.DistributedValues), type(total)
        assert not isinstance(mean, tps.DistributedValues), type(mean)
    assert [float(t) for t, _ in got] == [2.0 * sum(range(8)), 2.0 * sum(range(8, 14))]
    np.testing.assert_allclose([float(m) for _, m in got], [7.0, 21.0])


@case
def test_reduce_of_a_partial_last_batch_from_function_is_a_tensor():
    def dataset_fn(ctx):
        return tpsd.Dataset.range(7).map(lambda v: np.float32(v)).batch(2).shard(
            ctx.num_input_pipelines, ctx.input_pipeline_id)

    totals = []
    for batch in strategy.distribute_datasets_from_function(dataset_fn):
        reduced = strategy.reduce(tps.ReduceOp.SUM, strategy.run(lambda x: x + 1.0, args=(batch,)), axis=0)
        assert not isinstance(reduced, tps.DistributedValues), type(reduced)
        totals.append(float(reduced))
    # Batches [0, 1], [2, 3], [4, 5], [6]: all in one step when L >= 2, else two steps.
    expected = {1: [1.0 + 2 + 3 + 4, 5.0 + 6 + 7], 4: [1.0 + 2 + 3 + 4 + 5 + 6 + 7]}
    assert totals == expected[L], totals


@case
def test_reduce_of_a_host_built_value_inside_tps_function():
    values = strategy.experimental_distribute_values_from_function(
        lambda ctx: np.float32(ctx.replica_id_in_sync_group))

    @tps.function
    def total(v):
        return strategy.reduce(tps.ReduceOp.SUM, v, axis=None)

    assert float(total(values)) == float(sum(range(R)))
    closed_over = tps.function(lambda: strategy.reduce(tps.ReduceOp.MEAN, values, axis=None))
    assert float(closed_over()) == float(np.mean(range(R)))


@case
def test_batch_reduce_to_a_host_device_gives_floats():
    value = strategy.run(lambda: jnp.asarray(1.0) + tps.get_replica_context().replica_id_in_sync_group)
    reduced = strategy.extended.batch_reduce_to(tps.ReduceOp.SUM, [(value, "/cpu:0"), (value, "/cpu:0")])
    assert [float(r) for r in reduced] == [float(sum(range(1, R + 1)))] * 2
    one = strategy.extended.reduce_to(tps.ReduceOp.MEAN, value, "/job:worker/cpu:0")
    assert float(one) == float(np.mean(range(1, R + 1)))


@case
def test_extended_values_on_a_multi_worker_job():
    assert strategy.extended.worker_devices == tuple(jax.local_devices())
    assert strategy.extended.parameter_devices == tuple(jax.local_devices())
    assert (strategy.extended.num_hosts, strategy.extended.num_replicas_per_host) == (W, L)
    assert strategy.extended._num_devices_per_worker == L
    tpu = tps.TPUStrategy()  # one client in TensorFlow: every replica's device
    assert tpu.extended.worker_devices == tuple(jax.devices())
    assert (tpu.extended.num_hosts, tpu.extended.num_replicas_per_host) == (W, L)


@case
def test_extended_update_of_a_sync_on_read_variable_on_every_process():
    with strategy.scope():
        v = tps.Variable(0.0, synchronization=tps.VariableSynchronization.ON_READ,
                         aggregation=tps.VariableAggregation.SUM)
    strategy.extended.update(v, lambda c, x: c.assign(x), args=(5.0,))
    assert [float(x) for x in local(v)] == [5.0] * L
    assert float(v.read_value()) == 5.0 * R
    tps.function(lambda: strategy.extended.update(v, lambda c, x: c.assign_add(x), args=(1.0,)))()
    assert [float(x) for x in local(v)] == [6.0] * L
    assert float(v.read_value()) == 6.0 * R


@case
def test_eager_collectives_combine_every_process():
    tps.config.run_functions_eagerly(True)
    try:
        def replica_fn():
            ctx = tps.get_replica_context()
            rid = jnp.asarray(ctx.replica_id_in_sync_group, jnp.float32)
            return ctx.all_reduce(tps.ReduceOp.SUM, rid), ctx.all_gather(rid[None], axis=0)

        total, gathered = strategy.run(replica_fn)
    finally:
        tps.config.run_functions_eagerly(False)
    assert [float(x) for x in local(total)] == [float(sum(range(R)))] * L
    assert [x.tolist() for x in local(gathered)] == [[float(r) for r in range(R)]] * L


# StrategyClusterResolverTest --------------------------------------------------------------------
@case
def test_cluster_resolver_property():
    resolver = strategy.cluster_resolver
    assert resolver is not None
    with strategy.scope():
        assert strategy.cluster_resolver is resolver
    for name in ("cluster_spec", "master", "num_accelerators", "task_id", "task_type"):
        assert hasattr(resolver, name), name
    assert resolver.task_type in ("chief", "worker"), resolver.task_type
    # TensorFlow's job is {chief: 1, worker: 1}, so both have task_id 0; the launcher's is 2 workers.
    assert resolver.task_id == PID, resolver.task_id


run_and_report(CASES)
