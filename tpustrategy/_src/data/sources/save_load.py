"""`Dataset.save` / `Dataset.load`: a dataset written to a directory and read back.

Our own format (TensorFlow's is its snapshot protobufs; neither reads the
other's): under ``path``,

- ``shard_00000.tfrecord`` ... : TFRecord files (checksummed, optionally GZIP
  or ZLIB), one record per element, encoded by `_element_codec` (no pickle);
- ``dataset_spec.json``, written last: ``{"format": "tpsd-save-1",
  "element_spec": ..., "compression": ..., "shards": [...], "num_elements": n}``.

``shard_func(element)`` picks an element's shard (an int); by default
element ``i`` goes to shard ``i % num_shards`` (``num_shards`` = 4), so the
default ``load`` (interleaving the shards one element at a time, in order)
gives back the saved order exactly. ``reader_func(datasets)`` receives a
dataset whose elements are the shards' datasets, as in TensorFlow.

The shards are reader nodes: a loaded dataset checkpoints by file offsets
(cost independent of position) and FILE auto-sharding splits the shards
across input pipelines. ``checkpoint_args`` (TensorFlow's resumable save) is
accepted; a save here always writes the whole dataset.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY
from tpustrategy._src.data.core.specs import DatasetSpec
from tpustrategy._src.data.core.structure import OBJECT, TensorSpec, map_structure
from tpustrategy._src.data.sources import _compression, record_io
from tpustrategy._src.data.sources._element_codec import (
    decode,
    encode,
    spec_from_json,
    spec_to_json,
)
from tpustrategy._src.data.sources.from_tensors import TensorSliceDataset
from tpustrategy._src.data.sources.readers import _ReaderDataset

FORMAT = "tpsd-save-1"
SPEC_FILE = "dataset_spec.json"
DEFAULT_SHARDS = 4


def _compression_of(compression: str | None, api: str) -> str:
    return _compression.validate_compression_type(compression or None, api=api)


class ShardWriter:
    """Streams elements into shard files under ``path``; `finish` writes the metadata file."""

    def __init__(self, path: str, compression: str | None, shard_func: Callable[..., Any] | None, api: str):
        self._path, self._ctype = path, _compression_of(compression, api)
        self._shard_func, self._api = shard_func, api
        os.makedirs(path, exist_ok=True)
        spec_path = os.path.join(path, SPEC_FILE)
        if os.path.exists(spec_path):
            os.remove(spec_path)
        self._writers: dict[int, Any] = {}
        self.count = 0

    def add(self, element: Any) -> None:
        from tpustrategy._src.data.sources.writer import TFRecordWriter

        if self._shard_func is None:
            shard = self.count % DEFAULT_SHARDS
        else:
            tup = isinstance(element, tuple) and not hasattr(element, "_fields")
            shard = int(np.asarray(self._shard_func(*element) if tup else self._shard_func(element)))
            if shard < 0:
                raise ValueError(f"{self._api}: shard_func returned {shard}; shard indices must be >= 0.")
        w = self._writers.get(shard)
        if w is None:
            name = os.path.join(self._path, f"shard_{shard:05d}.tfrecord")
            w = self._writers[shard] = TFRecordWriter(name, self._ctype)
        w.write(encode(element))
        self.count += 1

    def _close(self) -> None:
        for w in self._writers.values():
            w.close()

    def finish(self, element_spec: Any) -> dict[str, Any]:
        self._close()
        shards = [f"shard_{s:05d}.tfrecord" for s in sorted(self._writers)]
        meta = {"format": FORMAT, "element_spec": spec_to_json(element_spec), "compression": self._ctype,
                "shards": shards, "num_elements": self.count}
        spec_path = os.path.join(self._path, SPEC_FILE)
        with open(spec_path + ".tmp", "w") as f:
            json.dump(meta, f)
        os.replace(spec_path + ".tmp", spec_path)
        return meta

    def abandon(self) -> None:
        self._close()


def save(dataset: Dataset, path: Any, compression: str | None = None, shard_func: Callable[..., Any] | None = None,
         checkpoint_args: Any = None) -> None:
    """See `Dataset.save`."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"Dataset.save: path must be a str or os.PathLike; received {type(path).__name__}.")
    api = "Dataset.save"
    if dataset.cardinality() == INFINITE_CARDINALITY:
        raise ValueError(f"{api}: the dataset is infinite, so it cannot be written.\nFix: take(n) first.")
    writer = ShardWriter(os.fspath(path), compression, shard_func, api)
    try:
        for element in dataset:
            writer.add(element)
    except BaseException:
        writer.abandon()
        raise
    writer.finish(dataset.element_spec)


def read_meta(path: str, api: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(path, SPEC_FILE)) as f:
            meta = json.load(f)
    except FileNotFoundError:
        return None
    if meta.get("format") != FORMAT:
        raise ValueError(f"{api}: {path} holds format {meta.get('format')!r}; this version reads {FORMAT!r}.")
    return meta


class ShardReaderDataset(_ReaderDataset):
    """The elements stored in shard files (a reader: file names in, decoded elements out)."""

    _api = "Dataset.load"
    _params = ("compression_type", "buffer_size", "num_parallel_reads", "spec")

    def __init__(self, filenames: Any, compression_type: str, spec: Any):
        super().__init__(filenames, compression_type, None, None)
        self.spec = spec
        self._template = map_structure(lambda s: None, spec)

    def _compute_spec(self, input_spec: Any) -> Any:
        return self.spec

    def _open_chunks(self, path: str, start_offset: int) -> Iterator[tuple[int, list[Any]]]:
        template = self._template
        for offset, records in record_io.read_tfrecord_chunks(
            path, compression_type=self.compression_type, start_offset=start_offset
        ):
            yield offset, [decode(r, template) for r in records]


class ShardsDataset(Dataset):
    """A dataset whose elements are the shard datasets (what ``reader_func`` receives).

    A reader node too (its ``filenames`` are the shard files), so FILE
    auto-sharding gives each input pipeline a subset of the shards.
    """

    is_reader = True
    _params = ("compression_type", "spec")

    def __init__(self, filenames: Dataset, compression_type: str, spec: Any):
        super().__init__((filenames,))
        self.compression_type, self.spec = compression_type, spec

    @property
    def filenames(self) -> Dataset:
        return self.inputs[0]

    def _compute_spec(self, input_spec: Any) -> Any:
        return DatasetSpec(self.spec)

    def _compute_cardinality(self) -> int:
        return self.inputs[0].cardinality()

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _ShardsIterator(self.inputs[0]._make_iterator(ctx), self.compression_type, self.spec)


class _ShardsIterator(NodeIterator):
    def __init__(self, names: NodeIterator, ctype: str, spec: Any):
        self._names, self._ctype, self._spec = names, ctype, spec

    def __next__(self) -> Dataset:
        name = self._names.__next__()
        return ShardReaderDataset(TensorSliceDataset(np.array([name], dtype=OBJECT)), self._ctype, self._spec)

    def get_state(self) -> dict[str, Any]:
        return {"names": self._names.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self._names.set_state(check_state(state, ("names",), "load shards")["names"])

    def close(self) -> None:
        self._names.close()


class LoadDataset(Dataset):
    """The dataset read back from a `Dataset.save` directory (a pass-through over ``reader_func``'s result)."""

    autoshard_pass_through = True
    _params = ("path", "num_elements")

    def __init__(self, inner: Dataset, path: str, num_elements: int | None):
        super().__init__((inner,))
        self.path, self.num_elements = path, num_elements

    def _compute_spec(self, input_spec: Any) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        n = self.inputs[0].cardinality()
        return n if n >= 0 or self.num_elements is None else self.num_elements

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return self.inputs[0]._make_iterator(ctx)

    def with_inputs(self, *new_inputs: Dataset) -> Dataset:
        new = super().with_inputs(*new_inputs)
        new.num_elements = None  # a rewritten (e.g. sharded) reader holds another count
        return new

    @staticmethod
    def build(path: Any, element_spec: Any = None, compression: str | None = None,
              reader_func: Callable[[Dataset], Dataset] | None = None, wait: bool = False) -> Dataset:
        api = "Dataset.load"
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"{api}: path must be a str or os.PathLike; received {type(path).__name__}.")
        path = os.fspath(path)
        meta = read_meta(path, api)
        if meta is None:
            from tpustrategy._src.errors import NotFoundError

            raise NotFoundError(
                f"{api}: {path} holds no saved dataset (no {SPEC_FILE}).\n"
                "Fix: save one first with dataset.save(path), or check the path."
            )
        spec = spec_from_json(meta["element_spec"])
        if element_spec is not None and not _compatible(element_spec, spec):
            raise ValueError(f"{api}: element_spec {element_spec} does not match the saved spec {spec}.")
        ctype = meta["compression"]
        if compression is not None and _compression_of(compression, api) != ctype:
            raise ValueError(f"{api}: compression={compression!r} but the dataset was saved with {ctype!r}.")
        files = TensorSliceDataset(np.array([os.fsencode(os.path.join(path, s)) for s in meta["shards"]], dtype=OBJECT))
        shards = ShardsDataset(files, ctype, spec)
        if reader_func is None:
            n = max(1, len(meta["shards"]))
            inner = shards.interleave(lambda d: d, cycle_length=n, block_length=1)
            return LoadDataset(inner, path, int(meta["num_elements"]))
        inner = reader_func(shards)
        if not isinstance(inner, Dataset):
            raise TypeError(f"{api}: reader_func must return a Dataset; received {type(inner).__name__}.")
        return LoadDataset(inner, path, None)


def _compatible(given: Any, saved: Any) -> bool:
    from tpustrategy._src.data.core.structure import flatten, same_structure

    if not same_structure(given, saved):
        return False
    return all(isinstance(a, TensorSpec) and a.dtype == b.dtype and len(a.shape) == len(b.shape)
               for a, b in zip(flatten(given), flatten(saved)))
