"""The random, mixing, resampling and persistence methods of `Dataset`.

`Dataset` inherits these from `_SourceMethods`: ``counter``, ``random``,
``sample_from_datasets``, ``choose_from_datasets``, ``rejection_resample``,
``save`` / ``load``, ``snapshot`` and ``fingerprint``. Each method is thin and
builds a node from the module of its concept; the imports are lazy because
every one of those modules imports ``dataset.py`` (the one known circle).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tpustrategy._src.data.core.dataset import Dataset


class _SourceMethods:
    """Mixin of `Dataset`: sources and combinators of TensorFlow 2.21 (see the module docstring)."""

    @staticmethod
    def counter(start: int = 0, step: int = 1, dtype: Any = np.int64, name: str | None = None) -> Dataset:
        """``start, start + step, ...`` forever (infinite cardinality).

        Example:
          >>> list(Dataset.counter(3, 4).take(3))  # [3, 7, 11]
        """
        from tpustrategy._src.data.sources.counter import CounterDataset

        return CounterDataset(start, step, dtype)

    @staticmethod
    def random(seed: int | None = None, rerandomize_each_iteration: bool | None = None,
               name: str | None = None) -> Dataset:
        """Pseudo-random int64 scalars in ``[0, 2**32)``, forever.

        With a ``seed`` every iteration repeats the same sequence unless
        ``rerandomize_each_iteration`` is True. NumPy's generator, not
        TensorFlow's Philox: the values differ from TensorFlow's for the same seed.
        """
        from tpustrategy._src.data.sources.random_dataset import RandomDataset

        return RandomDataset(seed, rerandomize_each_iteration)

    @staticmethod
    def sample_from_datasets(datasets: Any, weights: Any = None, seed: int | None = None,
                             stop_on_empty_dataset: bool = False,
                             rerandomize_each_iteration: bool | None = None) -> Dataset:
        """Each element from a dataset drawn with probability ``weights`` (uniform when None).

        Args:
          datasets: a non-empty list of datasets with compatible elements.
          weights: floats, one per dataset, or a Dataset of such weight vectors.
          seed: the seed of the draws (same seed, same sequence).
          stop_on_empty_dataset: end at the first draw of an exhausted dataset;
            otherwise exhausted datasets are skipped until all are exhausted.
          rerandomize_each_iteration: with a seed, a new sequence every iteration.
        """
        from tpustrategy._src.data.transformations.directed_interleave import sample_from_datasets

        return sample_from_datasets(datasets, weights, seed, stop_on_empty_dataset, rerandomize_each_iteration)

    @staticmethod
    def choose_from_datasets(datasets: Any, choice_dataset: Dataset, stop_on_empty_dataset: bool = True) -> Dataset:
        """Element ``i`` from ``datasets[choice_dataset[i]]`` (int64 scalar choices)."""
        from tpustrategy._src.data.transformations.directed_interleave import choose_from_datasets

        return choose_from_datasets(datasets, choice_dataset, stop_on_empty_dataset)

    def rejection_resample(self: Any, class_func: Callable[..., Any], target_dist: Any, initial_dist: Any = None,
                           seed: int | None = None, name: str | None = None) -> Dataset:
        """``(class, element)`` pairs resampled towards the class distribution ``target_dist``.

        TensorFlow's algorithm: a mixture of the input itself and a
        rejection-filtered pass over it, with the class distribution given by
        ``initial_dist`` or estimated as the stream goes (batches of 32,
        counts smoothed by 10).
        """
        from tpustrategy._src.data.transformations.rejection_resample import rejection_resample

        return rejection_resample(self, class_func, target_dist, initial_dist, seed)

    def save(self: Any, path: str | os.PathLike, compression: str | None = None,
             shard_func: Callable[..., Any] | None = None, checkpoint_args: Any = None) -> None:
        """Writes every element under the directory ``path`` (read back with `Dataset.load`).

        The format is ours (see `save_load`): TFRecord-framed shard files of
        encoded elements plus a JSON ``dataset_spec.json``.
        """
        from tpustrategy._src.data.sources.save_load import save

        save(self, path, compression, shard_func, checkpoint_args)

    @staticmethod
    def load(path: str | os.PathLike, element_spec: Any = None, compression: str | None = None,
             reader_func: Callable[[Dataset], Dataset] | None = None, wait: bool = False) -> Dataset:
        """The dataset saved at ``path`` by `Dataset.save`."""
        from tpustrategy._src.data.sources.save_load import LoadDataset

        return LoadDataset.build(path, element_spec, compression, reader_func, wait)

    def snapshot(self: Any, path: str | os.PathLike, compression: str | None = "AUTO",
                 reader_func: Callable[[Dataset], Dataset] | None = None,
                 shard_func: Callable[..., Any] | None = None, name: str | None = None) -> Dataset:
        """Writes the elements under ``path`` on the first complete pass; later passes read them."""
        from tpustrategy._src.data.sources.snapshot import SnapshotDataset

        return SnapshotDataset(self, path, compression, reader_func, shard_func)

    def fingerprint(self: Any) -> np.uint64:
        """A uint64 fingerprint of the pipeline's structure (node types, parameters, functions).

        Equal pipelines built the same way get the same fingerprint, run after run.
        """
        from tpustrategy._src.data.core.fingerprint import fingerprint

        return fingerprint(self)
