"""`Dataset.list_files`: the file names matching glob patterns.

As in TensorFlow the patterns are matched when the dataset is built, the
matches of all patterns are sorted together, and the result is shuffled
(``shuffle=None`` means True) with a buffer as large as the list. The names
are ``bytes`` elements of a `from_tensor_slices` dataset.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.structure import OBJECT


def _patterns(file_pattern: Any) -> list[str]:
    if isinstance(file_pattern, (str, bytes, os.PathLike)):
        items = [file_pattern]
    elif isinstance(file_pattern, (list, tuple, np.ndarray)):
        items = list(np.asarray(file_pattern, dtype=object).reshape(-1))
    else:
        raise TypeError(
            "Dataset.list_files: file_pattern must be a string or a list of strings; received "
            f"{type(file_pattern).__name__}: {file_pattern!r}.\n"
            "Fix: pass a glob pattern such as '/data/train-*.tfrecord'."
        )
    out = []
    for p in items:
        if not isinstance(p, (str, bytes, os.PathLike)):
            raise TypeError(
                f"Dataset.list_files: every pattern must be a string; received "
                f"{type(p).__name__}: {p!r}."
            )
        out.append(os.fsdecode(p))
    return out


def list_files(file_pattern: Any, shuffle: bool | None = None, seed: int | None = None) -> Dataset:
    """A dataset of the file names matching ``file_pattern``.

    Args:
      file_pattern: a glob pattern or a list of them.
      shuffle: shuffle the names (default True, as in TensorFlow).
      seed: the shuffle seed.

    Returns:
      A `Dataset` of ``bytes`` file names.

    Raises:
      ValueError: when no file matches, naming the pattern(s).
    """
    patterns = _patterns(file_pattern)
    matches = sorted(m for p in patterns for m in glob.glob(p))
    if not matches:
        raise ValueError(
            f"Dataset.list_files: No files matched pattern: {', '.join(patterns)}.\n"
            "Fix: check the directory and the wildcard (the pattern is a shell glob, "
            "e.g. '/data/train-*.tfrecord')."
        )
    names = np.empty(len(matches), dtype=OBJECT)
    names[:] = [os.fsencode(m) for m in matches]
    from tpustrategy._src.data.sources.from_tensors import TensorSliceDataset

    ds: Dataset = TensorSliceDataset(names)
    if shuffle is None or shuffle:
        ds = ds.shuffle(len(matches), seed=seed)
    return ds
