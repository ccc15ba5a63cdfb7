"""Example-parsing pipelines: `parse_example_dataset` and `make_batched_features_dataset`.

``parse_example_dataset(features)`` is the transformation that maps a
dataset of batches of serialized ``tf.train.Example`` records to dicts of
parsed features (``tf.data.experimental.parse_example_dataset``); a
``VarLenFeature`` gives ``(values, row_lengths)`` as `parse_example` does
(JAX has no sparse tensor type).

``make_batched_features_dataset`` is TensorFlow's reader pipeline: the
matching files (shuffled when ``shuffle``), ``reader`` (``TFRecordDataset``
by default) over each file interleaved ``reader_num_threads`` at a time, a
shuffle buffer, ``repeat(num_epochs)``, ``batch``, the parse, the label split
and a prefetch. Every stage checkpoints; FILE auto-sharding shards the files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.options import AUTOTUNE
from tpustrategy._src.data.core.structure import OBJECT
from tpustrategy._src.data.parsing.example import _check_features, parse_example
from tpustrategy._src.data.sources.from_tensors import TensorSliceDataset
from tpustrategy._src.data.sources.make_csv_dataset import file_names


def parse_example_dataset(features: Mapping[str, Any], num_parallel_calls: int | None = 1,
                          deterministic: bool | None = None) -> Callable[[Dataset], Dataset]:
    """A transformation for `Dataset.apply`: batches of serialized Examples -> dicts of features.

    Example:
      >>> ds = TFRecordDataset(files).batch(128).apply(parse_example_dataset({"x": FixedLenFeature([], np.int64)}))
    """
    specs = _check_features("parse_example_dataset", features)

    def parse(serialized: Any) -> dict[str, Any]:
        return parse_example(serialized, specs)

    def apply(dataset: Dataset) -> Dataset:
        calls = None if num_parallel_calls in (None, 1) else num_parallel_calls
        return dataset.map(parse, num_parallel_calls=calls, deterministic=deterministic)

    return apply


def make_batched_features_dataset(
    file_pattern: Any, batch_size: int, features: Mapping[str, Any], reader: Callable[..., Dataset] | None = None,
    label_key: str | None = None, reader_args: list[Any] | None = None, num_epochs: int | None = None,
    shuffle: bool = True, shuffle_buffer_size: int = 10000, shuffle_seed: int | None = None,
    prefetch_buffer_size: int | None = None, reader_num_threads: int | None = None,
    parser_num_threads: int | None = None, sloppy_ordering: bool = False, drop_final_batch: bool = False,
) -> Dataset:
    """Batches of parsed Examples from files: ``{name: batch}`` or ``(features, label)``.

    Example:
      >>> ds = make_batched_features_dataset("train-*.tfrecord", 256, {"x": FixedLenFeature([8], np.float32),
      ...                                     "y": FixedLenFeature([], np.int64)}, label_key="y", num_epochs=1)
    """
    api = "make_batched_features_dataset"
    specs = _check_features(api, features)
    if label_key is not None and label_key not in specs:
        raise ValueError(f"{api}: the `label_key` {label_key!r} provided is not one of the `features` keys "
                         f"{sorted(specs)}.\nFix: add it to features or pass label_key=None.")
    if reader is None:
        from tpustrategy._src.data.sources.readers import TFRecordDataset

        reader = TFRecordDataset
    names = file_names(file_pattern, shuffle, api)
    files: Dataset = TensorSliceDataset(np.array(names, dtype=OBJECT))
    if shuffle:
        files = files.shuffle(len(names), seed=shuffle_seed)
    args = list(reader_args or [])
    threads = 1 if reader_num_threads is None else reader_num_threads
    ds = files.interleave(lambda f: reader(f, *args), cycle_length=threads, block_length=1,
                          num_parallel_calls=None if threads == 1 else threads, deterministic=not sloppy_ordering)
    spec = ds._static_spec()
    if isinstance(spec, tuple) and len(spec) == 2:
        ds = ds.map(lambda _key, value: value)
    if shuffle:
        ds = ds.shuffle(shuffle_buffer_size, seed=shuffle_seed)
    if num_epochs != 1:
        ds = ds.repeat(num_epochs)
    ds = ds.batch(batch_size, drop_remainder=drop_final_batch)
    ds = ds.apply(parse_example_dataset(specs, num_parallel_calls=parser_num_threads))
    if label_key is not None:
        def split(parsed: dict[str, Any]) -> Any:
            out = dict(parsed)
            label = out.pop(label_key)
            return out, label

        ds = ds.map(split)
    return ds.prefetch(AUTOTUNE if prefetch_buffer_size is None else prefetch_buffer_size)
