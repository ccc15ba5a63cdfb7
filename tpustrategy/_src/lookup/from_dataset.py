"""Lookup tables built from the elements of a dataset (``tf.data.experimental`` table helpers).

`DatasetInitializer` reads ``(key, value)`` elements; `table_from_dataset`
and `index_table_from_dataset` build a `StaticHashTable` (no OOV buckets) or
a `StaticVocabularyTable` from one. The dataset is only iterated (any
iterable of elements works), so this module needs nothing of ``tpsd``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.lookup.initializers import KeyValueTensorInitializer
from tpustrategy._src.lookup.tables import StaticHashTable, StaticVocabularyTable


def _scalar(x: Any) -> Any:
    if isinstance(x, np.ndarray) and x.ndim == 0:
        return x.item()
    return x.item() if isinstance(x, np.generic) else x


class DatasetInitializer(KeyValueTensorInitializer):
    """Table entries from a dataset of ``(key, value)`` scalars (``tf.data.experimental.DatasetInitializer``).

    Args:
      dataset: a dataset whose elements are ``(key, value)`` pairs of scalars.
    """

    def __init__(self, dataset: Any):
        keys, values = [], []
        for i, element in enumerate(dataset):
            if not isinstance(element, tuple) or len(element) != 2:
                raise ValueError(
                    "DatasetInitializer: the dataset must produce (key, value) pairs; element "
                    f"{i} is {type(element).__name__}: {element!r}.\nFix: e.g. Dataset.zip((keys, values))."
                )
            keys.append(_scalar(element[0]))
            values.append(_scalar(element[1]))
        super().__init__(keys, values)
        self.dataset = dataset


def table_from_dataset(dataset: Any = None, num_oov_buckets: int = 0, vocab_size: int | None = None,
                       default_value: Any = None, hasher_spec: Any = None, key_dtype: Any = None,
                       name: str | None = None) -> Any:
    """A table of the dataset's ``(key, value)`` pairs (the first ``vocab_size`` of them).

    OOV keys get ``default_value`` when ``num_oov_buckets`` is 0, else a hashed bucket
    after the vocabulary (BLAKE2b, not TensorFlow's FarmHash; ``hasher_spec`` is accepted).
    """
    ds = dataset.take(vocab_size) if vocab_size is not None else dataset
    init = DatasetInitializer(ds)
    if num_oov_buckets:
        return StaticVocabularyTable(init, num_oov_buckets)
    if default_value is None:
        raise ValueError(
            "table_from_dataset: default_value is required when num_oov_buckets is 0.\n"
            "Fix: pass default_value=-1 (or num_oov_buckets >= 1)."
        )
    return StaticHashTable(init, default_value)


def index_table_from_dataset(dataset: Any = None, num_oov_buckets: int = 0, vocab_size: int | None = None,
                             default_value: int = -1, hasher_spec: Any = None, key_dtype: Any = None,
                             name: str | None = None) -> Any:
    """A table mapping each key of the dataset to its position (``0, 1, ...``)."""
    ds = dataset.take(vocab_size) if vocab_size is not None else dataset
    keys = [_scalar(k) for k in ds]
    init = KeyValueTensorInitializer(keys, np.arange(len(keys), dtype=np.int64))
    if num_oov_buckets:
        return StaticVocabularyTable(init, num_oov_buckets)
    return StaticHashTable(init, default_value)
