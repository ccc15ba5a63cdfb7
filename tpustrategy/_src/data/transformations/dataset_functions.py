"""Function forms of ``tf.data.experimental``: ``cardinality``, ``at``, ``get_structure``, ``from_list``, ...

Each is a thin function over the `Dataset` API, kept so that TensorFlow
programs written against the experimental names run renamed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset

_DEBUG_MODE = [False]


def _check_dataset(dataset: Any, api: str) -> Dataset:
    if not isinstance(dataset, Dataset):
        raise TypeError(f"{api}: `dataset` must be a Dataset; received {type(dataset).__name__}: {dataset!r}.")
    return dataset


def cardinality(dataset: Dataset) -> np.int64:
    """The number of elements, ``INFINITE_CARDINALITY`` or ``UNKNOWN_CARDINALITY`` (an int64)."""
    return np.int64(_check_dataset(dataset, "cardinality").cardinality())


def at(dataset: Dataset, index: int) -> Any:
    """Element ``index`` of ``dataset`` (``tf.data.experimental.at``).

    Raises:
      OutOfRangeError: ``index`` is past the end.
      ValueError: ``index`` is negative.
    """
    _check_dataset(dataset, "at")
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or index < 0:
        raise ValueError(f"at: index must be a non-negative int; received {index!r}.")
    n = dataset.cardinality()
    if n >= 0 and index >= n:
        from tpustrategy._src.errors import OutOfRangeError

        raise OutOfRangeError(f"at: index {index} is out of range for a dataset of {n} elements.")
    it = iter(dataset.skip(int(index)))
    try:
        return next(it)
    except StopIteration:
        from tpustrategy._src.errors import OutOfRangeError

        raise OutOfRangeError(f"at: index {index} is out of range (the dataset has fewer elements).") from None
    finally:
        it.close()


def get_structure(dataset_or_iterator: Any) -> Any:
    """The element spec of a dataset or iterator."""
    spec = getattr(dataset_or_iterator, "element_spec", None)
    if spec is None:
        raise TypeError(
            "get_structure: expected a Dataset or an iterator of one; received "
            f"{type(dataset_or_iterator).__name__}."
        )
    return spec


def from_list(elements: list[Any], name: str | None = None) -> Dataset:
    """One element per item of ``elements`` (``tf.data.experimental.from_list``).

    Items must share one structure; unlike ``from_tensor_slices`` their
    components may differ in shape (ragged lists). Checkpoints as a ``range``.
    """
    from tpustrategy._src.data.core.structure import element_to_numpy, same_structure

    if not isinstance(elements, (list, tuple)) or not elements:
        raise ValueError(
            "from_list: `elements` must be a non-empty list; received "
            f"{type(elements).__name__}: {elements!r}.\nFix: e.g. from_list([(1, 'a'), (2, 'b')])."
        )
    items = [element_to_numpy(e) for e in elements]
    for i, item in enumerate(items[1:], 1):
        if not same_structure(items[0], item):
            raise ValueError(
                f"from_list: every element must have the structure of element 0; element {i} differs: "
                f"{elements[0]!r} vs {elements[i]!r}."
            )
    return Dataset.range(len(items)).map(lambda i: items[int(i)])


def enable_debug_mode() -> None:
    """Accepted: pipelines here always run in Python, element by element in order when debugging.

    TensorFlow's debug mode makes ``map`` functions run eagerly and in order;
    ours already run as Python code, so this only records that it was called.
    """
    _DEBUG_MODE[0] = True


def shuffle_and_repeat(buffer_size: int, count: int | None = None, seed: int | None = None) -> Any:
    """``shuffle(buffer_size, seed).repeat(count)`` as a transformation for `Dataset.apply`."""

    def apply(dataset: Dataset) -> Dataset:
        return dataset.shuffle(buffer_size, seed=seed).repeat(count)

    return apply


def unbatch() -> Any:
    """``Dataset.unbatch`` as a transformation for `Dataset.apply`."""
    return lambda dataset: dataset.unbatch()


def rejection_resample(class_func: Any, target_dist: Any, initial_dist: Any = None, seed: int | None = None) -> Any:
    """`Dataset.rejection_resample` as a transformation for `Dataset.apply`."""
    return lambda dataset: dataset.rejection_resample(class_func, target_dist, initial_dist, seed)


def save(dataset: Dataset, path: Any, compression: str | None = None, shard_func: Any = None,
         checkpoint_args: Any = None) -> None:
    """``dataset.save(path, ...)``."""
    _check_dataset(dataset, "save").save(path, compression, shard_func, checkpoint_args)


def load(path: Any, element_spec: Any = None, compression: str | None = None, reader_func: Any = None) -> Dataset:
    """``Dataset.load(path, ...)``."""
    return Dataset.load(path, element_spec, compression, reader_func)


def snapshot(path: Any, compression: str | None = "AUTO", reader_func: Any = None, shard_func: Any = None) -> Any:
    """`Dataset.snapshot` as a transformation for `Dataset.apply`."""
    return lambda dataset: dataset.snapshot(path, compression, reader_func, shard_func)


def choose_from_datasets(datasets: Any, choice_dataset: Any, stop_on_empty_dataset: bool = False) -> Dataset:
    """``tf.data.experimental.choose_from_datasets``: as the method, but ``stop_on_empty_dataset`` defaults to False."""
    from tpustrategy._src.data.transformations.directed_interleave import (
        choose_from_datasets as choose,
    )

    return choose(datasets, choice_dataset, stop_on_empty_dataset)


def sample_from_datasets(datasets: Any, weights: Any = None, seed: int | None = None,
                         stop_on_empty_dataset: bool = False) -> Dataset:
    """``tf.data.experimental.sample_from_datasets`` (TensorFlow's signature of the function form)."""
    from tpustrategy._src.data.transformations.directed_interleave import (
        sample_from_datasets as sample,
    )

    return sample(datasets, weights, seed, stop_on_empty_dataset)
