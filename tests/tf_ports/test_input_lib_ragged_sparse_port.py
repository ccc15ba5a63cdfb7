"""TensorFlow's ``tensorflow/python/distribute/input_lib_test.py``: ``testRaggedSparse``.

20 rows (row i holds ``i % 4`` copies of ``i``), a global batch of 8 on 2 replicas, as
padded dense and ragged values; the first step's per-replica batches, then the
sum over every step with a ``while`` loop of ``next(iterator)`` and with a ``for`` loop,
each plain and inside ``tps.function``. TensorFlow's expected sums: the ``while`` loop
gives 200 with ``drop_remainder=True`` (a step that only some replicas have data for ends
the iteration: ``get_next`` with static batch shapes) and 310 without; the ``for`` loop
gives 200 with ``drop_remainder=True`` except inside a function over
``distribute_datasets_from_function``'s batches (TensorFlow's loop in a function takes
``get_next_as_optional``, which gives the last, partial step: 310).
The sparse leaf is TensorFlow's ``ragged_tensor.to_sparse()`` rows: each element a
``tps.sparse.SparseTensor`` of dense shape ``[3]``, batched by ``Dataset.batch`` and split
across replicas into per-replica ``SparseTensor`` values (6 entries each on the first step,
equal to the dense leaf when densified), summed through ``x.values`` as TensorFlow does.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd

pytestmark = pytest.mark.devices(2)

GLOBAL_BATCH = 8
KEYS = ("dense", "ragged", "sparse")


def _to_sparse(row):
    # RaggedTensor.to_sparse() of one row of the ragged leaf: its entries, dense shape [3].
    row = np.asarray(row)
    return tps.sparse.SparseTensor(np.arange(len(row), dtype=np.int64)[:, None], row, np.array([3], np.int64))


def _dataset_fn(drop_remainder):
    def fn(ctx=None):
        ctx = ctx or tps.InputContext()
        batch_size = ctx.get_per_replica_batch_size(GLOBAL_BATCH)
        rows = tpsd.Dataset.range(20).map(lambda i: np.full([int(i) % 4], np.float32(i)))
        rows = rows.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
        dense = rows.padded_batch(batch_size, padded_shapes=[3], drop_remainder=drop_remainder)
        ragged = rows.ragged_batch(batch_size, drop_remainder=drop_remainder)
        sparse = rows.map(_to_sparse).batch(batch_size, drop_remainder=drop_remainder)
        return tpsd.Dataset.zip({"dense": dense, "ragged": ragged, "sparse": sparse})
    return fn


def _sum_batch(strategy, batch):
    def one(per_replica):
        sums = strategy.run(lambda x: jnp.sum(jnp.asarray(x) if not hasattr(x, "values") else x.values),
                            (per_replica,))
        return strategy.reduce(tps.ReduceOp.SUM, sums, axis=None)
    return {k: one(v) for k, v in batch.items()}


@pytest.mark.parametrize("defun_type", ["lambda", "tf_function"])
@pytest.mark.parametrize("drop_remainder", [False, True])
@pytest.mark.parametrize("input_type", ["dataset", "input_fn"])
def test_ragged_sparse(input_type, drop_remainder, defun_type):
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    defun = {"lambda": lambda f: f, "tf_function": tps.function}[defun_type]
    dataset_fn = _dataset_fn(drop_remainder)
    dataset = (strategy.experimental_distribute_dataset(dataset_fn()) if input_type == "dataset"
               else strategy.distribute_datasets_from_function(dataset_fn))

    first = next(iter(dataset))
    dense = [np.asarray(x) for x in strategy.experimental_local_results(first["dense"])]
    assert dense[0].tolist() == [[0, 0, 0], [1, 0, 0], [2, 2, 0], [3, 3, 3]]
    assert dense[1].tolist() == [[0, 0, 0], [5, 0, 0], [6, 6, 0], [7, 7, 7]]
    for i, r in enumerate(strategy.experimental_local_results(first["ragged"])):
        assert int(np.sum(np.asarray(r.row_lengths))) == 6
        assert np.asarray(r.values).tolist() == dense[i].tolist()
    for i, sp in enumerate(strategy.experimental_local_results(first["sparse"])):
        assert len(np.asarray(sp.indices)) == 6
        densified = tps.sparse.to_dense(tps.sparse.SparseTensor(
            np.asarray(sp.indices), np.asarray(sp.values), np.asarray(sp.dense_shape)))
        assert densified.tolist() == dense[i].tolist()

    def _reduce(state, batch):
        sums = _sum_batch(strategy, batch)
        return {name: value + sums[name] for name, value in state.items()}

    def sum_for_loop(ds):
        sums = dict.fromkeys(KEYS, 0.0)
        for batch in ds:
            sums = _reduce(sums, batch)
        return sums

    def sum_while_loop(iterator, reduce_fn):
        sums = dict.fromkeys(KEYS, 0.0)
        while True:
            try:
                sums = reduce_fn(sums, iterator)
            except (StopIteration, tps.errors.OutOfRangeError):
                return sums

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # ragged per-replica shapes: one warning about the step's path
        while_sums = sum_while_loop(iter(dataset), defun(lambda state, iterator: _reduce(state, next(iterator))))
        for_sums = defun(sum_for_loop)(dataset)
    assert [float(while_sums[k]) for k in KEYS] == [200.0 if drop_remainder else 310.0] * len(KEYS)
    expected_for = 200.0
    if not drop_remainder or (defun_type == "tf_function" and input_type == "input_fn"):
        expected_for = 310.0
    assert [float(for_sums[k]) for k in KEYS] == [expected_for] * len(KEYS)


def test_get_next_as_optional_gives_the_partial_step_with_static_batches():
    # testRaggedSparseGetNextAsOptionalInLoop's rule: get_next_as_optional keeps the last,
    # partial step of distribute_datasets_from_function's batches (310), where get_next ends.
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    dataset = strategy.distribute_datasets_from_function(
        lambda ctx: tpsd.Dataset.range(20).batch(ctx.get_per_replica_batch_size(8), drop_remainder=True))
    it = iter(dataset)
    total = 0
    while True:
        opt = it.get_next_as_optional()
        if not opt.has_value():
            break
        total += sum(int(np.sum(np.asarray(x))) for x in strategy.experimental_local_results(opt.get_value()))
    assert total == sum(range(20))
    it = iter(dataset)
    steps = []
    for batch in it:
        steps.append([np.asarray(x).tolist() for x in strategy.experimental_local_results(batch)])
    assert steps == [[[0, 1, 2, 3], [4, 5, 6, 7]], [[8, 9, 10, 11], [12, 13, 14, 15]]]
