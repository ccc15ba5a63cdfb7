"""The windowing, stateful, grouping and error-handling methods of `Dataset`.

`Dataset` inherits these from `MoreTransformations`; each method is thin and
builds a node from the module of its transformation (one module per
transformation), as the methods in ``dataset.py`` do. The imports are lazy
because every one of those modules imports ``dataset.py`` (the one known circle).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tpustrategy._src.data.core.binding import bound_now

if TYPE_CHECKING:
    from tpustrategy._src.data.core.dataset import Dataset


def renamed_arg(api: str, name: str, value: Any, old_name: str, old_value: Any) -> Any:
    """The value of an argument that also has an older keyword (``map_func`` / ``fn``)."""
    if value is not None and old_value is not None:
        raise TypeError(
            f"{api}: received both {name}= and {old_name}= (the older name of the same argument).\n"
            f"Fix: pass only {name}=."
        )
    if value is None and old_value is None:
        raise TypeError(f"{api}: missing the required argument {name!r}.\nFix: e.g. {api.split('.')[-1]}({name}=lambda x: x).")
    return value if value is not None else old_value


class MoreTransformations:
    """Methods of `Dataset`: ``window``, ``scan``, ``group_by_window``, ``ragged_batch``, ..."""

    def window(
        self: Dataset,
        size: int,
        shift: int | None = None,
        stride: int = 1,
        drop_remainder: bool = False,
        name: str | None = None,
    ) -> Dataset:
        """A dataset of windows; each window is a nest (like the elements) of datasets.

        Window ``k`` holds input elements ``k*shift + j*stride`` for ``j < size``
        (``shift`` defaults to ``size``). The last windows may be short unless
        ``drop_remainder``.

        Example:
          >>> ds = Dataset.range(7).window(3, shift=2, drop_remainder=True)
          >>> [list(w) for w in ds]  # [[0, 1, 2], [2, 3, 4], [4, 5, 6]]
        """
        from tpustrategy._src.data.transformations.window import WindowDataset

        return WindowDataset(self, size, shift, stride, drop_remainder)

    def scan(self: Dataset, initial_state: Any, scan_func: Callable[[Any, Any], tuple[Any, Any]], name: str | None = None) -> Dataset:
        """``scan_func(state, element) -> (new_state, output)`` carried over the elements."""
        from tpustrategy._src.data.transformations.scan import ScanDataset

        return ScanDataset(self, initial_state, bound_now(scan_func))

    def take_while(self: Dataset, predicate: Callable[..., Any], name: str | None = None) -> Dataset:
        """The elements up to (not including) the first for which ``predicate`` is false."""
        from tpustrategy._src.data.transformations.take_while import TakeWhileDataset

        return TakeWhileDataset(self, bound_now(predicate))

    def unique(self: Dataset, name: str | None = None) -> Dataset:
        """The first occurrence of every element (int32 / int64 / string elements)."""
        from tpustrategy._src.data.transformations.unique import UniqueDataset

        return UniqueDataset(self)

    def reduce(self: Dataset, initial_state: Any, reduce_func: Callable[[Any, Any], Any], name: str | None = None) -> Any:
        """``reduce_func(state, element)`` folded over the whole dataset; returns the final state."""
        from tpustrategy._src.data.transformations.scan import reduce_dataset

        return reduce_dataset(self, initial_state, reduce_func)

    def get_single_element(self: Dataset, name: str | None = None) -> Any:
        """The only element of a dataset of exactly one element."""
        from tpustrategy._src.data.transformations.scan import get_single_element

        return get_single_element(self)

    def group_by_window(
        self: Dataset,
        key_func: Callable[..., Any],
        reduce_func: Callable[[Any, Dataset], Dataset],
        window_size: int | None = None,
        window_size_func: Callable[[Any], Any] | None = None,
        name: str | None = None,
    ) -> Dataset:
        """Groups elements by ``key_func`` into windows of ``window_size``, each reduced by ``reduce_func(key, window)``."""
        from tpustrategy._src.data.transformations.group_by_window import GroupByWindowDataset

        return GroupByWindowDataset(self, bound_now(key_func), bound_now(reduce_func), window_size,
                                    bound_now(window_size_func))

    def bucket_by_sequence_length(
        self: Dataset,
        element_length_func: Callable[..., Any],
        bucket_boundaries: Sequence[int],
        bucket_batch_sizes: Sequence[int],
        padded_shapes: Any = None,
        padding_values: Any = None,
        pad_to_bucket_boundary: bool = False,
        no_padding: bool = False,
        drop_remainder: bool = False,
        name: str | None = None,
    ) -> Dataset:
        """Batches elements of similar length together (buckets by ``element_length_func``)."""
        from tpustrategy._src.data.transformations.bucket import bucket_by_sequence_length

        return bucket_by_sequence_length(
            self,
            element_length_func,
            bucket_boundaries,
            bucket_batch_sizes,
            padded_shapes,
            padding_values,
            pad_to_bucket_boundary,
            no_padding,
            drop_remainder,
        )

    def ignore_errors(self: Dataset, log_warning: bool = False, name: str | None = None) -> Dataset:
        """Drops the elements whose production raises an error (optionally warning once per error)."""
        from tpustrategy._src.data.transformations.ignore_errors import IgnoreErrorsDataset

        return IgnoreErrorsDataset(self, log_warning)

    def ragged_batch(
        self: Dataset,
        batch_size: int,
        drop_remainder: bool = False,
        row_splits_dtype: Any = np.int64,
        name: str | None = None,
    ) -> Dataset:
        """Batches elements of different shapes into `RaggedBatch` values (padded values + row lengths)."""
        from tpustrategy._src.data.transformations.ragged_batch import RaggedBatchDataset

        return RaggedBatchDataset(self, batch_size, drop_remainder, row_splits_dtype)

    def sparse_batch(self: Dataset, batch_size: int, row_shape: Any, name: str | None = None) -> Dataset:
        """Batches elements of different shapes into `SparseBatch` values (COO indices, values, dense_shape)."""
        from tpustrategy._src.data.transformations.sparse_batch import SparseBatchDataset

        return SparseBatchDataset(self, batch_size, row_shape)

    def assert_cardinality(self: Dataset, expected_cardinality: int) -> Dataset:
        """This dataset, checked while iterating to have exactly ``expected_cardinality`` elements."""
        from tpustrategy._src.data.transformations.cardinality import AssertCardinalityDataset

        return AssertCardinalityDataset(self, expected_cardinality)
