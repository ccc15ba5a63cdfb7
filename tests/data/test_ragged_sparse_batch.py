"""`ragged_batch` / `sparse_batch` (`RaggedBatch`, `SparseBatch`): TensorFlow's ragged/sparse batch tests."""

from __future__ import annotations

import numpy as np
import pytest

import tpustrategy.data as tpsd
from tpustrategy.testing import assert_iterator_checkpointing

Dataset = tpsd.Dataset


def scalar_ds(n):
    return Dataset.from_tensor_slices(np.arange(n))


MAKERS = {
    "scalar": scalar_ds,
    "vector": lambda n: scalar_ds(n).map(lambda x: np.full([int(x)], x)),
    "matrix_x_2": lambda n: scalar_ds(n).map(lambda x: np.full([int(x), 2], x)),
    "matrix_2_x": lambda n: scalar_ds(n).map(lambda x: np.full([2, int(x)], x)),
    "5d": lambda n: scalar_ds(n).map(lambda x: np.full([2, int(x), 3, 2 * int(x), 4], x)),
    "dict": lambda n: scalar_ds(n).map(
        lambda x: {
            "shape=[]": x,
            "shape=[x]": np.arange(x),
            "shape=[x, 2]": np.full([int(x), 2], x),
            "shape=[2, x]": np.full([2, int(x)], x),
            "shape=[2, x, 3, 2x, 4]": np.full([2, int(x), 3, 2 * int(x), 4], x),
        }
    ),
    "tuple": lambda n: scalar_ds(n).map(lambda x: (x, np.arange(x), np.full([int(x), 2], x))),
    "fully_defined": lambda n: scalar_ds(n).map(lambda x: np.full([2, 3], x)),
}


def _rows_of(batch):
    """The unbatched rows of one component of a ragged_batch result, as lists."""
    if isinstance(batch, tpsd.RaggedBatch):
        return [r.tolist() for r in batch.to_list()]
    return [np.asarray(r).tolist() for r in batch]


@pytest.mark.parametrize("maker", sorted(MAKERS))
@pytest.mark.parametrize("nrows", [0, 20, 23])
@pytest.mark.parametrize("drop_remainder", [True, False])
def test_batches_hold_the_rows_of_the_input(maker, nrows, drop_remainder):
    ds = MAKERS[maker](nrows)
    rows = list(ds)
    batches = list(ds.ragged_batch(4, drop_remainder))
    expected_starts = [s for s in range(0, nrows, 4) if not (drop_remainder and s + 4 > nrows)]
    assert len(batches) == len(expected_starts)
    for start, batch in zip(expected_starts, batches):
        part = rows[start : start + 4]
        if isinstance(batch, dict):
            for k in batch:
                assert _rows_of(batch[k]) == [np.asarray(r[k]).tolist() for r in part]
        elif isinstance(batch, tuple) and not isinstance(batch, tpsd.RaggedBatch):
            for j, comp in enumerate(batch):
                assert _rows_of(comp) == [np.asarray(r[j]).tolist() for r in part]
        else:
            assert _rows_of(batch) == [np.asarray(r).tolist() for r in part]


def test_components_with_unknown_dimensions_are_ragged_and_the_rest_dense():
    ds = MAKERS["dict"](8).ragged_batch(4)
    spec = ds.element_spec
    assert isinstance(spec["shape=[x]"], tpsd.RaggedBatch)
    assert spec["shape=[]"] == tpsd.TensorSpec((None,), np.int64)
    b = next(iter(ds))
    assert isinstance(b["shape=[]"], np.ndarray) and b["shape=[]"].tolist() == [0, 1, 2, 3]
    assert isinstance(b["shape=[x, 2]"], tpsd.RaggedBatch)
    fixed = next(iter(MAKERS["fully_defined"](4).ragged_batch(4)))
    assert isinstance(fixed, np.ndarray) and fixed.shape == (4, 2, 3)


def test_a_ragged_batch_is_padded_values_with_lengths_and_shapes():
    b = next(iter(MAKERS["vector"](5).ragged_batch(4)))
    assert b.values.tolist() == [[0, 0, 0], [1, 0, 0], [2, 2, 0], [3, 3, 3]]
    assert b.row_lengths.tolist() == [0, 1, 2, 3] and b.row_lengths.dtype == np.int64
    assert b.shapes.tolist() == [[0], [1], [2], [3]]
    assert b.mask().tolist() == [[False] * 3, [True, False, False], [True, True, False], [True] * 3]
    m = next(iter(MAKERS["matrix_2_x"](4).ragged_batch(4, row_splits_dtype=np.int32)))
    assert m.values.shape == (4, 2, 3) and m.shapes.tolist() == [[2, 0], [2, 1], [2, 2], [2, 3]]
    assert m.row_lengths.tolist() == [2, 2, 2, 2] and m.row_lengths.dtype == np.int32


def test_strings_are_padded_with_empty_bytes():
    ds = Dataset.from_tensor_slices(np.arange(3)).map(lambda x: np.array([b"ab"] * int(x), dtype=object))
    b = next(iter(ds.ragged_batch(3)))
    assert b.values.tolist() == [[b"", b""], [b"ab", b""], [b"ab", b"ab"]]


def test_ragged_batch_cardinality_and_spec_follow_batch():
    ds = MAKERS["vector"](10)
    assert ds.ragged_batch(4).cardinality() == 3 and ds.ragged_batch(4, drop_remainder=True).cardinality() == 2
    spec = ds.ragged_batch(4, drop_remainder=True).element_spec
    assert spec == tpsd.RaggedBatch(
        tpsd.TensorSpec((4, None), np.int64), tpsd.TensorSpec((4,), np.int64), tpsd.TensorSpec((4, 1), np.int64)
    )


def test_ragged_batch_arguments_are_checked():
    with pytest.raises(ValueError, match="Dataset.ragged_batch: batch_size must be greater than zero"):
        scalar_ds(3).ragged_batch(0)
    with pytest.raises(ValueError, match="row_splits_dtype must be int32 or int64; received float32"):
        scalar_ds(3).ragged_batch(2, row_splits_dtype=np.float32)
    assert len(list(scalar_ds(5).ragged_batch(np.int64(2)))) == 3


@pytest.mark.devices(2)
def test_ragged_batches_split_across_replicas_row_by_row():
    import tpustrategy as tps

    strategy = tps.MirroredStrategy([f"/cpu:{i}" for i in range(2)])
    ds = MAKERS["vector"](8).ragged_batch(4, drop_remainder=True)
    for step, start in zip(strategy.experimental_distribute_dataset(ds), (0, 4)):
        parts = strategy.experimental_local_results(step)
        lengths = [np.asarray(p.row_lengths).tolist() for p in parts]
        assert lengths == [[start, start + 1], [start + 2, start + 3]]


def test_ragged_batch_checkpoint_at_every_position():
    ds = MAKERS["tuple"](23).ragged_batch(4)
    assert len(assert_iterator_checkpointing(ds, num_checkpoints=None)) == 6


def test_dense_to_ragged_batch_is_the_experimental_form():
    b = next(iter(MAKERS["vector"](4).apply(tpsd.experimental.dense_to_ragged_batch(4))))
    assert b.row_lengths.tolist() == [0, 1, 2, 3]


COMPONENTS = np.random.default_rng(7).integers(12, size=100).astype(np.int32)


def test_sparse_batch_lists_every_position_of_every_element():
    ds = Dataset.from_tensor_slices(COMPONENTS).map(lambda x: np.full([int(x)], x)).sparse_batch(4, [12])
    batches = list(ds)
    assert len(batches) == 25
    for start, b in zip(range(0, 100, 4), batches):
        part = COMPONENTS[start : start + 4]
        assert b.indices.tolist() == [[i, j] for i, c in enumerate(part) for j in range(c)]
        assert b.values.tolist() == [c for c in part for _ in range(c)]
        assert b.dense_shape.tolist() == [min(4, 100 - start), 12]


def test_sparse_batch_with_an_unknown_dimension_takes_the_batch_max():
    comps = np.random.default_rng(8).integers(5, size=40).astype(np.int32)
    ds = Dataset.from_tensor_slices(comps).map(lambda x: np.full([int(x), int(x)], x)).sparse_batch(4, [5, None])
    for start, b in zip(range(0, 40, 4), ds):
        part = comps[start : start + 4]
        assert b.indices.tolist() == [[i, j, z] for i, c in enumerate(part) for j in range(c) for z in range(c)]
        assert b.values.tolist() == [c for c in part for _ in range(c) for _ in range(c)]
        assert b.dense_shape.tolist() == [min(4, 40 - start), 5, int(part.max())]


def test_sparse_batch_to_dense_and_bcoo_layout():
    b = next(iter(Dataset.from_tensor_slices(np.array([2, 0, 1])).map(lambda x: np.full([int(x)], x)).sparse_batch(3, [3])))
    assert b.to_dense().tolist() == [[2, 2, 0], [0, 0, 0], [1, 0, 0]]
    assert b.indices.dtype == np.int64 and b.dense_shape.dtype == np.int64


def test_sparse_batch_invalid_row_shape_is_tensorflows_message():
    with pytest.raises(ValueError, match="Dimension -2 must be >= 0"):
        Dataset.from_tensors(np.array([[1]])).sparse_batch(4, [-2])


def test_sparse_batch_shape_errors_are_tensorflows_messages():
    from tpustrategy.errors import DataLossError, InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="incompatible with the row shape"):
        list(Dataset.from_tensors(np.array([[1]], np.int32)).sparse_batch(4, [12]))
    with pytest.raises(DataLossError, match="larger than the row shape"):
        list(Dataset.from_tensors(np.int32(range(13))).sparse_batch(4, [12]))


def test_sparse_batch_cardinality_and_spec():
    ds = Dataset.range(10).map(lambda x: np.full([int(x)], x)).sparse_batch(4, [12])
    assert ds.cardinality() == 3
    assert ds.element_spec == tpsd.SparseBatch(
        tpsd.TensorSpec((None, 2), np.int64), tpsd.TensorSpec((None,), np.int64), tpsd.TensorSpec((2,), np.int64)
    )


def test_sparse_batch_checkpoint_at_every_position():
    comps = np.random.default_rng(9).integers(5, size=40).astype(np.int32)
    ds = Dataset.from_tensor_slices(comps).map(lambda x: np.full([int(x)], x)).sparse_batch(4, [12])
    assert len(assert_iterator_checkpointing(ds, num_checkpoints=None)) == 10


def test_dense_to_sparse_batch_is_the_experimental_form():
    b = next(iter(Dataset.from_tensor_slices(np.array([1, 2])).map(lambda x: np.full([int(x)], x)).apply(
        tpsd.experimental.dense_to_sparse_batch(2, [2]))))
    assert b.values.tolist() == [1, 2, 2]
