"""Reader datasets: `TFRecordDataset`, `TextLineDataset`, `FixedLengthRecordDataset`.

A reader node reads the files named by its ``filenames`` input, a dataset of
``bytes`` file names built with `from_tensor_slices` as in TensorFlow, so the
auto-shard pass can put a ``shard`` on it. Records are Python ``bytes``.

Files are opened only while iterating. Records come from the chunked,
checksummed readers in `record_io`; the iterator hands out slices of a chunk
through the bulk path, so ``TFRecordDataset(files).batch(1024)`` costs a few
list operations per batch on top of decoding. With ``num_parallel_reads`` > 1
files are interleaved like TensorFlow (cycle over that many files, one record
from each in turn), each open file read ahead by a worker thread.

A checkpoint is the file-name iterator's state, the current file, the start
offset of the current chunk in the uncompressed stream and the number of
records consumed from it; restoring reopens the file at that offset.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import AUTOTUNE
from tpustrategy._src.data.core.structure import OBJECT, TensorSpec
from tpustrategy._src.data.sources import _compression, record_feeds, record_io, record_spans
from tpustrategy._src.data.sources.from_tensors import TensorSliceDataset
from tpustrategy._src.data.transformations.interleave import (
    InterleaveIterator,
    default_cycle_length,
)

ChunkOpener = Callable[[str, int], Iterator[tuple[int, list[bytes]]]]


def filenames_dataset(filenames: Any, api: str) -> Dataset:
    """``filenames`` as a Dataset of ``bytes`` names (a Dataset passes through)."""
    if isinstance(filenames, Dataset):
        spec = filenames._static_spec()
        if spec is not None and not (isinstance(spec, TensorSpec) and spec.dtype == OBJECT and spec.shape == ()):
            raise TypeError(
                f"{api}: `filenames` must be a Dataset of scalar strings; received a Dataset "
                f"with element_spec {spec}.\nFix: e.g. Dataset.list_files('/data/*.tfrecord')."
            )
        return filenames
    if isinstance(filenames, (str, bytes, os.PathLike)):
        items = [filenames]
    elif isinstance(filenames, (list, tuple)) or (isinstance(filenames, np.ndarray) and filenames.ndim <= 1):
        items = list(np.asarray(filenames, dtype=object).reshape(-1))
    else:
        raise TypeError(
            f"{api}: `filenames` must be a string, a list of strings or a Dataset of strings; "
            f"received {type(filenames).__name__}: {filenames!r}.\n"
            "Fix: e.g. TFRecordDataset(['a.tfrecord', 'b.tfrecord'])."
        )
    names = np.empty(len(items), dtype=OBJECT)
    for i, name in enumerate(items):
        if not isinstance(name, (str, bytes, os.PathLike)):
            raise TypeError(
                f"{api}: every file name must be a str, bytes or os.PathLike; item {i} is "
                f"{type(name).__name__}: {name!r}."
            )
        names[i] = os.fsencode(name)
    return TensorSliceDataset(names)


def _check_optional_int(value: Any, api: str, arg: str, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{api}: {arg} must be an int or None; received {type(value).__name__}: {value!r}.")
    if value < minimum and not (arg == "num_parallel_reads" and value == AUTOTUNE):
        raise ValueError(
            f"{api}: {arg} must be >= {minimum}"
            f"{' or AUTOTUNE' if arg == 'num_parallel_reads' else ''}; received {arg}={value}."
        )
    return int(value)


class _ReaderDataset(Dataset):
    """Base of the reader nodes: file names in, ``bytes`` records out."""

    is_reader = True
    _api = "reader"

    def __init__(self, filenames: Any, compression_type: str | None, buffer_size: int | None, num_parallel_reads: int | None):
        super().__init__((filenames_dataset(filenames, self._api),))
        self.compression_type = _compression.validate_compression_type(compression_type, api=self._api)
        self.buffer_size = _check_optional_int(buffer_size, self._api, "buffer_size", 0)
        self.num_parallel_reads = _check_optional_int(num_parallel_reads, self._api, "num_parallel_reads", 1)

    @property
    def filenames(self) -> Dataset:
        """The dataset of file names this reader reads (``inputs[0]``)."""
        return self.inputs[0]

    @abc.abstractmethod
    def _open_chunks(self, path: str, start_offset: int) -> Iterator[tuple[int, list[bytes]]]:
        """Chunks of records of one file from ``start_offset`` (each reader implements it)."""

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return TensorSpec((), OBJECT)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        files = self.filenames
        npr = self.num_parallel_reads
        if npr is None or npr == 1:
            return ReaderIterator(files._make_iterator(ctx), self._open_chunks, self._api)
        # TensorFlow 2.21 (readers._create_dataset_reader): AUTOTUNE reads through
        # interleave(num_parallel_calls=AUTOTUNE), whose cycle is interleave's own AUTOTUNE rule
        # (one file at a time on hosts of up to 17 cores); n reads n files, a record each in turn.
        cycle = default_cycle_length(AUTOTUNE) if npr == AUTOTUNE else npr
        opener, api = self._open_chunks, self._api

        def open_file(name: Any) -> NodeIterator:
            one = TensorSliceDataset(np.array([name], dtype=OBJECT))
            return ReaderIterator(one._make_iterator(ctx), opener, api)

        return InterleaveIterator(
            files._make_iterator(ctx), lambda: files._make_iterator(ctx), open_file, cycle, 1, parallel=True
        )


class ReaderIterator(NodeIterator):
    """Reads the files named by ``files`` one after another, a chunk at a time."""

    def __init__(self, files: NodeIterator, open_chunks: ChunkOpener, api: str):
        self._files, self._open_chunks, self._api = files, open_chunks, api
        self._gen: Iterator[tuple[int, list[bytes]]] | None = None
        self._path: str | None = None
        self._file_index = -1
        self._chunk: list[bytes] = []
        self._pos = 0
        self._offset = 0

    def _next_file(self) -> bool:
        try:
            name = self._files.__next__()
        except StopIteration:
            return False
        if not isinstance(name, (bytes, str)):
            raise TypeError(
                f"{self._api}: file names must be scalar strings; received "
                f"{type(name).__name__}: {name!r}."
            )
        self._path = os.fsdecode(name)
        self._file_index += 1
        self._gen = self._open_chunks(self._path, 0)
        self._offset = 0
        return True

    def _refill(self) -> bool:
        """Loads the next non-empty chunk; False at the end of the last file."""
        while True:
            if self._gen is None and not self._next_file():
                self._chunk, self._pos = [], 0
                return False
            try:
                offset, records = next(self._gen)  # type: ignore[arg-type]
            except StopIteration:
                self._close_file()
                continue
            if records:
                self._offset, self._chunk, self._pos = offset, records, 0
                return True

    def __next__(self) -> bytes:
        pos = self._pos
        if pos >= len(self._chunk):
            if not self._refill():
                raise StopIteration
            pos = 0
        self._pos = pos + 1
        return self._chunk[pos]

    def _next_many(self, n: int) -> list[bytes]:
        if self._pos >= len(self._chunk) and not self._refill():
            return []
        i = self._pos
        if i == 0 and n >= len(self._chunk):
            out = self._chunk
        else:
            out = self._chunk[i : i + n]
        self._pos = i + len(out)
        return out

    def _skip(self, n: int) -> int:
        done = 0
        while done < n:
            if self._pos >= len(self._chunk) and not self._refill():
                break
            k = min(n - done, len(self._chunk) - self._pos)
            self._pos += k
            done += k
        return done

    def get_state(self) -> dict[str, Any]:
        return {
            "files": self._files.get_state(),
            "file_index": self._file_index,
            "path": self._path if self._gen is not None else None,
            "offset": self._offset,
            "skip": self._pos,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("files", "file_index", "path", "offset", "skip"), self._api)
        self._close_file()
        self._chunk, self._pos = [], 0
        self._files.set_state(state["files"])
        self._file_index = int(state["file_index"])
        path = state["path"]
        if path is None:
            return
        self._path = path
        self._gen = self._open_chunks(path, int(state["offset"]))
        self._offset = int(state["offset"])
        skip = int(state["skip"])
        while skip > 0:
            if not self._refill_same_file():
                break
            k = min(skip, len(self._chunk))
            self._pos = k
            skip -= k

    def _refill_same_file(self) -> bool:
        try:
            offset, records = next(self._gen)  # type: ignore[arg-type]
        except StopIteration:
            self._close_file()
            return False
        self._offset, self._chunk, self._pos = offset, records, 0
        return True

    def _close_file(self) -> None:
        gen, self._gen = self._gen, None
        if gen is not None and hasattr(gen, "close"):
            gen.close()

    def close(self) -> None:
        self._close_file()
        self._files.close()


class TFRecordDataset(_ReaderDataset):
    """Records of TFRecord files (``tf.data.TFRecordDataset``).

    Args:
      filenames: a file name, a list of them, or a Dataset of ``bytes`` names.
      compression_type: None or "" (none), "GZIP" or "ZLIB".
      buffer_size: read block size in bytes (None: 512 KiB).
      num_parallel_reads: None (files in sequence) or how many files to interleave.

    Example:
      >>> ds = TFRecordDataset(["a.tfrecord", "b.tfrecord"]).batch(1024)
    """

    _api = "TFRecordDataset"
    _params = ("compression_type", "buffer_size", "num_parallel_reads")

    def __init__(self, filenames: Any, compression_type: str | None = None, buffer_size: int | None = None, num_parallel_reads: int | None = None):
        super().__init__(filenames, compression_type, buffer_size, num_parallel_reads)

    def _open_chunks(self, path: str, start_offset: int) -> Iterator[tuple[int, list[bytes]]]:
        return record_io.read_tfrecord_chunks(
            path, compression_type=self.compression_type, start_offset=start_offset, buffer_size=self.buffer_size
        )

    def _batch_span_map_iterator(self, ctx: IterContext, batch_size: int, drop_remainder: bool, map_node: Any,
                                 workers: int, mode: str, unfused: Callable[[], NodeIterator]) -> NodeIterator | None:
        """``batch(batch_size).map(...)`` over this reader with the reading in worker processes
        (`record_spans.SpanMapIterator`); None for compressed files or parallel reads."""
        if not self._plain():
            return None
        block = self.buffer_size or record_io.DEFAULT_BUFFER_SIZE
        files = self.filenames

        def source() -> record_spans.SpanSource:
            return record_spans.SpanSource(files._make_iterator(ctx), batch_size, drop_remainder, block)

        return record_spans.SpanMapIterator(source, unfused, map_node, workers, mode,
                                            ctx.options.threading.max_intra_op_parallelism)

    def _plain(self) -> bool:
        """Whether worker processes can read this reader's records by byte ranges (uncompressed, one
        file at a time)."""
        return not self.compression_type and self.num_parallel_reads in (None, 1)

    def _record_feed(self, ctx: IterContext, batch_size: int) -> Callable[[Any], NodeIterator | None] | None:
        """For a fused ``map(fn).batch(batch_size)`` over this reader: makes, at a reader state, the
        feed that hands the workers byte ranges of ``batch_size`` records to read themselves -- a
        `record_feeds.ReaderFeed`, or with ``num_parallel_reads`` an `record_feeds.InterleaveFeed` over
        one-file readers in this reader's order and state layout; None for compressed files."""
        if self.compression_type:
            return None
        block = self.buffer_size or record_io.DEFAULT_BUFFER_SIZE
        files, npr = self.filenames, self.num_parallel_reads
        if npr is None or npr == 1:
            return lambda state: record_feeds.placed(
                record_feeds.ReaderFeed(files._make_iterator(ctx), batch_size, block), state)
        cycle = default_cycle_length(AUTOTUNE) if npr == AUTOTUNE else npr

        def cursor_of(name: Any) -> record_spans.Cursor:  # the one-file reader `_make_iterator` opens
            return record_spans.Cursor(TensorSliceDataset(np.array([name], dtype=OBJECT))._make_iterator(ctx), block)

        def make(state: Any) -> NodeIterator:
            feed = record_feeds.InterleaveFeed(lambda: files._make_iterator(ctx), lambda name: name, cursor_of,
                                               cycle, 1, batch_size, parallel=True)
            return record_feeds.placed(feed, state)

        return make

    def _interleave_record_feed(self, ctx: IterContext, new_input: Callable[[], NodeIterator],
                                open_inner: Callable[[Any], Any], cycle_length: int, block_length: int,
                                batch_size: int, parallel: bool, state: Any) -> NodeIterator | None:
        """For a fused ``map(fn).batch(batch_size)`` over an ``interleave`` whose inner datasets are
        readers like this one (an inner dataset that is not raises `SpanFallback` when it comes): the
        `record_feeds.InterleaveFeed` at the interleave state ``state``."""

        def cursor_of(ds: Any) -> record_spans.Cursor:
            if type(ds) is not TFRecordDataset or not ds._plain():
                raise record_spans.SpanFallback("an inner dataset that is not an uncompressed TFRecordDataset")
            return record_spans.Cursor(ds.filenames._make_iterator(ctx.fresh()),
                                       ds.buffer_size or record_io.DEFAULT_BUFFER_SIZE)

        feed = record_feeds.InterleaveFeed(new_input, open_inner, cursor_of, cycle_length, block_length,
                                           batch_size, parallel)
        return record_feeds.placed(feed, state)


class TextLineDataset(_ReaderDataset):
    """Lines of text files, without the line ending (``tf.data.TextLineDataset``).

    Args:
      filenames, compression_type, buffer_size, num_parallel_reads: as in `TFRecordDataset`.
    """

    _api = "TextLineDataset"
    _params = ("compression_type", "buffer_size", "num_parallel_reads")

    def __init__(self, filenames: Any, compression_type: str | None = None, buffer_size: int | None = None, num_parallel_reads: int | None = None):
        super().__init__(filenames, compression_type, buffer_size, num_parallel_reads)

    def _open_chunks(self, path: str, start_offset: int) -> Iterator[tuple[int, list[bytes]]]:
        return record_io.read_text_line_chunks(
            path, compression_type=self.compression_type, start_offset=start_offset, buffer_size=self.buffer_size
        )


class FixedLengthRecordDataset(_ReaderDataset):
    """Fixed-size records between an optional header and footer (``tf.data.FixedLengthRecordDataset``).

    Args:
      filenames: as in `TFRecordDataset`.
      record_bytes: the size of every record.
      header_bytes: bytes skipped at the start of each file.
      footer_bytes: bytes skipped at the end of each file.
      buffer_size, compression_type, num_parallel_reads: as in `TFRecordDataset`.
    """

    _api = "FixedLengthRecordDataset"
    _params = ("record_bytes", "header_bytes", "footer_bytes", "compression_type", "buffer_size", "num_parallel_reads")

    def __init__(
        self,
        filenames: Any,
        record_bytes: int,
        header_bytes: int | None = None,
        footer_bytes: int | None = None,
        buffer_size: int | None = None,
        compression_type: str | None = None,
        num_parallel_reads: int | None = None,
    ):
        super().__init__(filenames, compression_type, buffer_size, num_parallel_reads)
        self.record_bytes = _check_optional_int(record_bytes, self._api, "record_bytes", 1)
        if self.record_bytes is None:
            raise TypeError(f"{self._api}: record_bytes is required; received None.")
        self.header_bytes = _check_optional_int(header_bytes, self._api, "header_bytes", 0) or 0
        self.footer_bytes = _check_optional_int(footer_bytes, self._api, "footer_bytes", 0) or 0

    def _open_chunks(self, path: str, start_offset: int) -> Iterator[tuple[int, list[bytes]]]:
        return record_io.read_fixed_length_chunks(
            path,
            self.record_bytes,  # type: ignore[arg-type]
            header_bytes=self.header_bytes,
            footer_bytes=self.footer_bytes,
            compression_type=self.compression_type,
            start_offset=start_offset,
            buffer_size=self.buffer_size,
        )
