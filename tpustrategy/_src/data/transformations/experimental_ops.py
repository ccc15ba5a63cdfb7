"""``tf.data.experimental``'s function forms of the transformations (``ds.apply(f(...))``).

Old TPU programs write ``dataset.apply(tf.data.experimental.scan(...))``;
each name here returns the ``Dataset -> Dataset`` function that calls the
method of the same transformation (or, for ``map_and_batch`` and
``parallel_interleave``, the methods TensorFlow fused or replaced them with).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset

Transformation = Callable[[Dataset], Dataset]


def scan(initial_state: Any, scan_func: Callable[[Any, Any], Any]) -> Transformation:
    """``tf.data.experimental.scan``: ``Dataset.scan`` as an ``apply`` function."""
    return lambda ds: ds.scan(initial_state, scan_func)


def unique() -> Transformation:
    """``tf.data.experimental.unique``: ``Dataset.unique`` as an ``apply`` function."""
    return lambda ds: ds.unique()


def take_while(predicate: Callable[..., Any]) -> Transformation:
    """``tf.data.experimental.take_while``: ``Dataset.take_while`` as an ``apply`` function."""
    return lambda ds: ds.take_while(predicate)


def ignore_errors(log_warning: bool = False) -> Transformation:
    """``tf.data.experimental.ignore_errors``: ``Dataset.ignore_errors`` as an ``apply`` function."""
    return lambda ds: ds.ignore_errors(log_warning)


def get_single_element(dataset: Dataset) -> Any:
    """``tf.data.experimental.get_single_element(dataset)``: the only element of ``dataset``."""
    if not isinstance(dataset, Dataset):
        raise TypeError(
            f"get_single_element: dataset must be a Dataset; received {type(dataset).__name__}.\n"
            "Fix: pass the dataset itself, e.g. get_single_element(ds.take(1))."
        )
    return dataset.get_single_element()


def group_by_window(
    key_func: Callable[..., Any],
    reduce_func: Callable[[Any, Dataset], Dataset],
    window_size: int | None = None,
    window_size_func: Callable[[Any], Any] | None = None,
) -> Transformation:
    """``tf.data.experimental.group_by_window``: ``Dataset.group_by_window`` as an ``apply`` function."""
    return lambda ds: ds.group_by_window(key_func, reduce_func, window_size, window_size_func)


def bucket_by_sequence_length(
    element_length_func: Callable[..., Any],
    bucket_boundaries: Sequence[int],
    bucket_batch_sizes: Sequence[int],
    padded_shapes: Any = None,
    padding_values: Any = None,
    pad_to_bucket_boundary: bool = False,
    no_padding: bool = False,
    drop_remainder: bool = False,
) -> Transformation:
    """``tf.data.experimental.bucket_by_sequence_length`` as an ``apply`` function."""
    return lambda ds: ds.bucket_by_sequence_length(
        element_length_func,
        bucket_boundaries,
        bucket_batch_sizes,
        padded_shapes,
        padding_values,
        pad_to_bucket_boundary,
        no_padding,
        drop_remainder,
    )


def group_by_reducer(key_func: Callable[..., Any], reducer: Any) -> Transformation:
    """``tf.data.experimental.group_by_reducer``: one ``reducer`` output per key (see `Reducer`)."""
    from tpustrategy._src.data.transformations.group_by_reducer import GroupByReducerDataset

    return lambda ds: GroupByReducerDataset(ds, key_func, reducer)


def map_and_batch(
    map_func: Callable[..., Any],
    batch_size: int,
    num_parallel_batches: int | None = None,
    drop_remainder: bool = False,
    num_parallel_calls: int | None = None,
) -> Transformation:
    """``tf.data.experimental.map_and_batch``: ``map(map_func)`` then ``batch(batch_size)``.

    ``num_parallel_batches`` (batches mapped in parallel) becomes
    ``num_parallel_calls = num_parallel_batches * batch_size``, TensorFlow's rule.
    """
    if num_parallel_batches is not None and num_parallel_calls is not None:
        raise ValueError(
            "map_and_batch: `num_parallel_batches` and `num_parallel_calls` are mutually exclusive.\n"
            "Fix: pass only num_parallel_calls."
        )
    calls = num_parallel_calls
    if num_parallel_batches is not None:
        calls = int(num_parallel_batches) * int(batch_size)
    return lambda ds: ds.map(map_func, num_parallel_calls=calls).batch(batch_size, drop_remainder=drop_remainder)


def parallel_interleave(
    map_func: Callable[..., Dataset],
    cycle_length: int,
    block_length: int = 1,
    sloppy: bool | None = False,
    buffer_output_elements: int | None = None,
    prefetch_input_elements: int | None = None,
) -> Transformation:
    """``tf.data.experimental.parallel_interleave``: ``interleave`` with ``cycle_length`` parallel calls.

    ``sloppy=True`` is ``deterministic=False`` (order still kept, which is a valid
    order); the buffer sizes are accepted (our interleave sizes its own buffers).
    """
    deterministic = None if sloppy is None else not sloppy
    return lambda ds: ds.interleave(
        map_func, cycle_length=cycle_length, block_length=block_length,
        num_parallel_calls=cycle_length, deterministic=deterministic,
    )


def enumerate_dataset(start: int = 0) -> Transformation:
    """``tf.data.experimental.enumerate_dataset``: ``Dataset.enumerate`` as an ``apply`` function."""
    return lambda ds: ds.enumerate(start)


def dense_to_ragged_batch(batch_size: int, drop_remainder: bool = False, row_splits_dtype: Any = np.int64) -> Transformation:
    """``tf.data.experimental.dense_to_ragged_batch``: ``Dataset.ragged_batch`` as an ``apply`` function."""
    return lambda ds: ds.ragged_batch(batch_size, drop_remainder, row_splits_dtype)


def dense_to_sparse_batch(batch_size: int, row_shape: Any) -> Transformation:
    """``tf.data.experimental.dense_to_sparse_batch``: ``Dataset.sparse_batch`` as an ``apply`` function."""
    return lambda ds: ds.sparse_batch(batch_size, row_shape)


def assert_cardinality(expected_cardinality: int) -> Transformation:
    """``tf.data.experimental.assert_cardinality``: declares and checks the number of elements."""
    return lambda ds: ds.assert_cardinality(expected_cardinality)


def pad_to_cardinality(cardinality: int, mask_key: str = "valid") -> Transformation:
    """``tf.data.experimental.pad_to_cardinality``: pads a dataset of dicts with masked zero elements."""
    from tpustrategy._src.data.transformations.cardinality import pad_to_cardinality as pad

    return lambda ds: pad(ds, cardinality, mask_key)
