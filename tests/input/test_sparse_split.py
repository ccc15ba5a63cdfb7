"""Splitting a batched sparse value across replicas (TensorFlow's rebatching of a ``tf.SparseTensor``).

A batch of B rows goes to the replicas in TensorFlow's piece sizes; each replica's piece keeps
the entries of its rows, re-based to row 0, with dense shape ``[piece rows, *inner dims of the
batch]``. Expected values worked out by hand.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.input import split

pytestmark = pytest.mark.devices(2)


def _rows(i):
    # Rows 0..9: i % 3 entries 1, 2, ... (0, 1 or 2 of them).
    return np.arange(int(i) % 3, dtype=np.float32) + 1


def _local(strategy, value):
    return [(np.asarray(v.indices).reshape(-1, 2).tolist(), np.asarray(v.values).tolist(),
             np.asarray(v.dense_shape).tolist()) for v in strategy.experimental_local_results(value)]


def test_experimental_distribute_dataset_splits_a_sparse_batch_by_rows():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    ds = tpsd.Dataset.range(10).map(_rows).sparse_batch(4, [None])
    steps = []
    for batch in strategy.experimental_distribute_dataset(ds):
        steps.append(_local(strategy, batch))
        sums = strategy.run(lambda x: jnp.sum(x.values), (batch,))
        steps[-1].append(float(strategy.reduce(tps.ReduceOp.SUM, sums, axis=None)))
    assert steps == [
        [([[1, 0]], [1.0], [2, 2]), ([[0, 0], [0, 1]], [1.0, 2.0], [2, 2]), 4.0],
        [([[0, 0], [1, 0], [1, 1]], [1.0, 1.0, 2.0], [2, 2]), ([[1, 0]], [1.0], [2, 2]), 5.0],
        [([[0, 0], [0, 1]], [1.0, 2.0], [1, 2]), ([], [], [1, 2]), 3.0],
    ]


@pytest.mark.parametrize("wrap", [lambda f: f, tps.function])
def test_distribute_datasets_from_function_gives_per_replica_sparse_tensors(wrap):
    strategy = tps.MirroredStrategy(jax.devices()[:2])

    def dataset_fn(ctx):
        rows = tpsd.Dataset.range(10).shard(ctx.num_input_pipelines, ctx.input_pipeline_id).map(_rows)
        return rows.map(lambda r: tps.sparse.SparseTensor(
            np.arange(len(r), dtype=np.int64)[:, None], r, np.array([2], np.int64))).batch(
                ctx.get_per_replica_batch_size(4), drop_remainder=True)

    dist = strategy.distribute_datasets_from_function(dataset_fn)
    first = next(iter(dist))
    assert all(isinstance(v, tps.sparse.SparseTensor) for v in strategy.experimental_local_results(first))
    assert _local(strategy, first) == [([[1, 0]], [1.0], [2, 2]), ([[0, 0], [0, 1]], [1.0, 2.0], [2, 2])]

    @wrap
    def step(batch):
        return strategy.run(lambda x: jnp.sum(x.values), (batch,))

    total = 0.0
    for batch in dist:
        total += float(strategy.reduce(tps.ReduceOp.SUM, step(batch), axis=None))
    # One input pipeline (one host): per-replica batches of 2 rows, taken in turn by the replicas:
    # steps (rows 0-1, rows 2-3), (rows 4-5, rows 6-7); rows 8-9 alone make no full step (get_next
    # ends on static batch shapes). Row sums 0, 1, 3, 0, 1, 3, 0, 1.
    assert total == 0.0 + 1.0 + 3.0 + 0.0 + 1.0 + 3.0 + 0.0 + 1.0


def test_pad_piece_and_empty_spec_of_a_sparse_component():
    st = tps.sparse.SparseTensor(np.array([[0, 1]], np.int64), np.array([2.0], np.float32), np.array([1, 3], np.int64))
    padded, mask = split.pad_piece({"s": st}, 3)
    assert np.asarray(padded["s"].dense_shape).tolist() == [3, 3]
    assert np.asarray(padded["s"].indices).tolist() == [[0, 1]]
    assert mask.tolist() == [True, False, False]
    spec = tpsd.Dataset.range(1).map(lambda i: st).batch(1).element_spec
    empty = split.empty_like_spec(spec)
    assert np.asarray(empty.indices).shape == (0, 3) and np.asarray(empty.dense_shape).tolist() == [0, 0, 0]
    assert split.batch_size_of(split.leaves_with_paths({"s": st, "d": np.zeros((1, 5))}), "api", 2) == 1


def test_leading_of_a_sparse_piece_is_its_row_count():
    from tpustrategy._src.input.distributed import _leading

    st = tps.sparse.SparseTensor(np.array([[0, 0], [0, 1], [2, 0]], np.int64), np.ones(3, np.float32),
                                 np.array([4, 2], np.int64))
    assert _leading(st) == 4
    assert _leading({"a": st}) == 4
