"""``TFRecordDataset(files).batch(n).map(fn, num_parallel_calls)`` with the reading in worker processes.

A parallel map over batches of records otherwise reads every record in this process (pread,
framing, checksums, cutting: ~1.3 µs a 3 KB record) and, with worker processes, sends each batch
of records to a worker: reading and the records' trip stay on one core, and batched pipelines did
not scale from one core to two. Here this process only *describes* each batch -- the byte range
of its records in each file it spans (`Span`) -- and the worker reads the range itself, checks
every length and data checksum, cuts the records, batches them as ``Dataset.batch`` does and maps
the batch; only the map's result crosses back (lent, see `parallel.channel`). On 2 cores, 3 KB
image records with ``parse_example`` + ``decode_raw``: 447-471k records/s against 290-325k in one
thread (tf.data: 277-297k).

Describing a batch (`SpanSource`) costs almost nothing where a file's records all have one size,
as fixed-size features give: the first record's header gives the size ``S``, and when the rest of
the file is a whole number of ``S``-byte records the batch's range is arithmetic. That guess is
checked by the worker, which frames the range for real. Any other file is framed here, block by
block (the headers only; ~0.45 µs a 3 KB record).

The same describing (`Cursor`, `Spans`) feeds a fused ``map(fn).batch(n)`` over a reader or an
``interleave`` of readers: see `record_feeds`.

`SpanMapIterator` keeps the elements, errors and checkpoints of the unfused pipeline
(``ParallelMapIterator(BatchIterator(ReaderIterator))``), whose state layout it shares:

* It starts on that pipeline while the worker pool starts in the background and moves to the
  workers at a chunk boundary once the pool is ready (a parked pool is adopted at once).
* Whatever is not the plain case -- a damaged or truncated record, a file that cannot be opened,
  a guessed size that was wrong, a map function raising for a batch -- hands the stream, from the
  start of that chunk, back to the unfused pipeline, which reads the same records again and
  delivers exactly what it always delivers there (and the rest of the stream).
"""

from __future__ import annotations

import abc
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.iterator import NodeIterator, check_state
from tpustrategy._src.data.core.structure import stack
from tpustrategy._src.data.parallel import parking, processes
from tpustrategy._src.data.parallel.threads import FailedChunk
from tpustrategy._src.data.sources import record_io

_HEADER = record_io.HEADER

# A stream that the unfused pipeline has fed this long (mode "auto") starts a pool in the background: a
# worker's start costs ~0.5 s of CPU, more than a short stream (a test's, a small evaluation) gains. A
# parked pool (the last pass's, or the last epoch's) is adopted from the first batch.
POOL_AFTER_S = 0.05
# A segment of a batch: ``(path, offset, end, count)``: ``count`` records fill bytes [offset, end).
Segment = tuple[str, int, int, int]


SpanFallback = processes.SpanFallback


class Span(processes.RecordRange):
    """One batch's records, as segments of files (a batch may cross from one file to the next)."""

    __slots__ = ()

    def read(self) -> list[bytes]:
        return read_span(self)


# --------------------------------------------------------------------------- this process: describing batches


class _File:
    """A file being cut into batches: its size and the offsets of the records not yet handed out.

    ``stride`` > 0: the rest of the file is ``left`` records of ``stride`` bytes (the first header's
    size; the workers check it). Otherwise ``bounds`` holds the boundaries of records framed here.
    """

    def __init__(self, path: str, offset: int, block: int):
        self.path, self.block = path, block
        try:
            self.fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            raise SpanFallback(f"cannot open {path}: {e}") from None
        self.pos = offset
        self.stride = 0
        self.left = 0
        self.bounds: list[int] = [offset]
        self._cache: dict[bytes, int] = {}
        try:
            self.size = os.fstat(self.fd).st_size
            if offset > self.size:
                raise SpanFallback(f"offset {offset} is past the end of {path}")
            if offset < self.size:
                size = self._record_size(offset)
                if (self.size - offset) % size == 0:
                    self.stride, self.left = size, (self.size - offset) // size
        except BaseException:
            self.close()
            raise

    def _record_size(self, at: int) -> int:
        hdr = os.pread(self.fd, _HEADER, at)
        if len(hdr) < _HEADER:
            raise SpanFallback(f"a truncated header at {at} in {self.path}")
        size = record_io.record_size(hdr)
        if size < 0:
            raise SpanFallback(f"a length checksum mismatch at {at} in {self.path}")
        return size

    def take(self, n: int) -> Segment | None:
        """The next up to ``n`` records (None when the file has no more)."""
        if self.stride:
            c = min(n, self.left)
            if not c:
                return None
            start = self.pos
            self.pos += c * self.stride
            self.left -= c
            return self.path, start, self.pos, c
        while len(self.bounds) <= n and self._frame_more():
            pass
        c = min(n, len(self.bounds) - 1)
        if not c:
            return None
        start, end = self.bounds[0], self.bounds[c]
        del self.bounds[:c]
        self.pos = end
        return self.path, start, end, c

    def _frame_more(self) -> bool:
        """Frames the next block after the last known boundary; False at the end of the file."""
        at = self.bounds[-1]
        if at >= self.size:
            return False
        buf = os.pread(self.fd, min(self.block, self.size - at), at)
        arr = np.frombuffer(buf, dtype=np.uint8)
        pos, found = 0, []
        while True:
            count, size = record_io._frame_stride(buf, arr, pos, 1 << 30, self._cache)
            if count:
                found.extend(range(at + pos + size, at + pos + count * size + 1, size))
                pos += count * size
                continue
            starts, end, bad = record_io._frame(buf, pos, 4096, self._cache)
            if not starts:
                break
            found.extend(at + s for s in starts[1:])
            found.append(at + end)
            pos = end
        if not found:  # one record longer than a block, or damage: its own header says
            size = self._record_size(at)
            if at + size > self.size:
                raise SpanFallback(f"a truncated record at {at} in {self.path}")
            found.append(at + size)
        self.bounds.extend(found)
        return True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Cursor:
    """Hands out the records of the files a file-name iterator names, one file after another, as
    segments; its state is a TFRecord reader's (``{"files", "file_index", "path", "offset", "skip"}``)."""

    def __init__(self, files: NodeIterator, block: int):
        self._files, self._block = files, block
        self._file: _File | None = None
        self._path: str | None = None
        self._file_index = -1

    def _open_next(self) -> bool:
        try:
            name = self._files.__next__()
        except StopIteration:
            return False
        if not isinstance(name, (bytes, str)):
            raise SpanFallback("a file name that is not a string")
        self._path = os.fsdecode(name)
        self._file_index += 1
        self._file = _File(self._path, 0, self._block)
        return True

    def take(self, need: int) -> list[Segment]:
        """Segments of the next ``need`` records (fewer only at the end of the last file)."""
        segments: list[Segment] = []
        while need:
            if self._file is None and not self._open_next():
                break
            assert self._file is not None
            seg = self._file.take(need)
            if seg is None:
                self._close_file()
                continue
            segments.append(seg)
            need -= seg[3]
        return segments

    def get_state(self) -> dict[str, Any]:
        f = self._file
        return {"files": self._files.get_state(), "file_index": self._file_index,
                "path": self._path if f is not None else None, "offset": f.pos if f is not None else 0, "skip": 0}

    def set_state(self, reader: dict[str, Any]) -> None:
        check_state(reader, ("files", "file_index", "path", "offset", "skip"), "TFRecordDataset")
        self._close_file()
        self._files.set_state(reader["files"])
        self._file_index = int(reader["file_index"])
        self._path = reader["path"]
        if self._path is None:
            return
        self._file = _File(self._path, int(reader["offset"]), self._block)
        skip = int(reader["skip"])
        while skip:
            seg = self._file.take(skip)
            if seg is None:
                break
            skip -= seg[3]

    def _close_file(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            f.close()

    def close(self) -> None:
        self._close_file()
        self._files.close()


def count(segments: list[Segment]) -> int:
    """The records of ``segments``."""
    return sum(seg[3] for seg in segments)


class Spans(NodeIterator):
    """`Span`s of up to ``n`` records; a span that cannot be described raises `SpanFallback` carrying
    the state before it (after the spans described before it in the same call were returned)."""

    _broken: SpanFallback | None = None
    _ended = False  # after a fallback: the stream of spans ends here

    @abc.abstractmethod
    def _next_span(self) -> Span:
        """The next span (StopIteration at the end, `SpanFallback` where it cannot be described)."""

    def __next__(self) -> Span:
        out = self._next_many(1)
        if not out:
            raise StopIteration
        return out[0]

    def _next_many(self, n: int) -> list[Any]:
        if self._broken is not None:
            err, self._broken = self._broken, None
            self._ended = True
            raise err
        if self._ended:
            return []
        out: list[Any] = []
        for _ in range(n):
            state = self.get_state()
            try:
                out.append(self._next_span())
            except StopIteration:
                break
            except SpanFallback as e:
                e.state = state
                if out:
                    self._broken = e
                    break
                self._ended = True
                raise
        return out

    def _reset(self) -> None:
        self._broken, self._ended = None, False


class SpanSource(Spans):
    """The batches of a ``TFRecordDataset(...).batch(n, drop_remainder)`` as `Span`s.

    Its state is the batch iterator's over the reader's (``{"input": {"files", "file_index",
    "path", "offset", "skip"}, "done"}``): a checkpoint restores into either pipeline.
    """

    def __init__(self, files: NodeIterator, batch_size: int, drop_remainder: bool, block: int):
        self._cursor = Cursor(files, block)
        self._n, self._drop = batch_size, drop_remainder
        self._done = False

    def _next_span(self) -> Span:
        if self._done:
            raise StopIteration
        segments = self._cursor.take(self._n)
        if count(segments) < self._n:
            self._done = True
            if not segments or self._drop:
                raise StopIteration
        return Span(segments)

    def get_state(self) -> dict[str, Any]:
        return {"input": self._cursor.get_state(), "done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "done"), "batch")
        self._reset()
        self._done = bool(state["done"])
        self._cursor.set_state(state["input"])

    def close(self) -> None:
        self._cursor.close()


# --------------------------------------------------------------------------- the worker: reading a batch


def read_span(span: Span) -> list[bytes]:
    """The records of ``span``, every length and data checksum checked (DataLossError if they are
    not as described: damage, or a file that changed since it was framed).

    Segments that continue one another in a file (an interleave's blocks of one file, between other
    files' blocks) are read at once, then handed out in the span's order.
    """
    if len(span) == 1:
        return record_io.read_tfrecord_run(*span[0])
    runs: list[list[Any]] = []  # [path, offset, end, count]: one read each
    open_ends: dict[tuple[str, int], int] = {}  # (path, end of a run) -> the run
    of_segment = []
    for path, offset, end, count in span:
        i = open_ends.pop((path, offset), -1)
        if i < 0:
            i = len(runs)
            runs.append([path, offset, end, count])
        else:
            runs[i][2] = end
            runs[i][3] += count
        open_ends[(path, end)] = i
        of_segment.append(i)
    records = [record_io.read_tfrecord_run(*run) for run in runs]
    if len(runs) == len(span):
        return [r for part in records for r in part]
    out: list[bytes] = []
    taken = [0] * len(runs)
    for (_path, _offset, _end, count), i in zip(span, of_segment):
        out += records[i][taken[i] : taken[i] + count]
        taken[i] += count
    return out


class SpanMapTask:
    """The worker's task: reads a `Span`, batches its records as ``Dataset.batch`` does, maps the batch."""

    def __init__(self, task: Callable[[Any], Any]):
        self.task = task

    def __call__(self, span: Span) -> Any:
        return self.task(stack(span.read(), "Dataset.batch"))


# --------------------------------------------------------------------------- this process: the stream


class SpanMapIterator(parking.PoolUser, NodeIterator):
    """``TFRecordDataset(files).batch(n).map(fn, parallel)`` with reading, batching and mapping in workers.

    Args:
      source: builds a fresh `SpanSource` (over a fresh file-name iterator).
      unfused: builds the unfused pipeline's iterator (whose state layout this one shares).
      owner: the `MapDataset` (pickles the function, warns once).
      workers: worker processes.
      mode: "on" (waits for the pool before the first batch) or "auto" (the unfused pipeline
        delivers while the pool starts, after `POOL_AFTER_S` of stream).
      intra_op: threads NumPy/BLAS may use in one worker.
    """

    def __init__(self, source: Callable[[], SpanSource], unfused: Callable[[], NodeIterator], owner: Any,
                 workers: int, mode: str, intra_op: int | None = None):
        self._make_source, self._make_unfused = source, unfused
        self._owner, self._workers, self._mode, self._intra_op = owner, workers, mode, intra_op
        self._inproc: NodeIterator | None = None  # the unfused pipeline: before the pool is ready, after a hand-over
        self._source: SpanSource | None = None
        self._runner: processes.ProcessMapRunner | None = None
        self._pool: parking.PoolHandle | None = None
        self._chunk: list[Any] = []
        self._pos = 0
        self._chunk_state: Any = None
        self._pending: BaseException | None = None
        self._done = False
        self._started = False
        self._t0 = 0.0
        self._payload: bytes | None = None
        self._stay = False  # the unfused pipeline delivers the rest of the stream

    # ------------------------------------------------------------------ the stream

    def _unfused(self) -> NodeIterator:
        if self._inproc is None:
            self._inproc = self._make_unfused()
        return self._inproc

    def __next__(self) -> Any:
        while True:
            if self._pos < len(self._chunk):
                x = self._chunk[self._pos]
                self._pos += 1
                return x
            if self._pending is not None:
                err, self._pending = self._pending, None
                self._done = True
                raise err
            if self._runner is not None:
                self._fill()
                continue
            if self._done:
                raise StopIteration
            if not self._started:
                self._start()
            elif self._pool is None and not self._stay and time.perf_counter() - self._t0 >= POOL_AFTER_S:
                assert self._payload is not None
                self._pool = parking.PoolHandle.get(self, self._payload, self._workers, self._intra_op)
            if self._pool is not None and self._pool.ready():
                self._pool_ready()
            if self._runner is None:
                try:
                    return self._unfused().__next__()
                except StopIteration:
                    self._done = True
                    self._park()  # a pool still starting is parked once it has
                    raise

    def _start(self) -> None:
        """At the first element: a parked pool is adopted at once; "on" starts one and waits for it."""
        self._started = True
        self._t0 = time.perf_counter()
        self._payload = self._owner._worker_task(wrap=SpanMapTask)
        if self._payload is None:  # warned: the unfused pipeline delivers everything
            self._stay = True
            return
        on = self._mode == "on"
        self._pool = parking.PoolHandle.get(self, self._payload, self._workers, self._intra_op, start=on)
        if on:
            assert self._pool is not None
            self._pool.wait()

    def _pool_ready(self) -> None:
        """The pool started (or failed): the stream moves to it here (or stays, after one warning)."""
        pool = self._pool
        assert pool is not None
        if self._pool_failed(self._owner):
            self._stay = True
            return
        inproc, self._inproc = self._inproc, None
        state = inproc.get_state() if inproc is not None else None
        if inproc is not None:
            inproc.close()
        source = self._make_source()
        try:
            if state is not None:
                source.set_state(state["input"])
                source._skip(int(state["skip"]))
        except SpanFallback:  # the position cannot be described here: the unfused pipeline goes on
            source.close()
            self._end_processes()
            self._stay = True
            self._inproc = self._make_unfused()
            if state is not None:
                self._inproc.set_state(state)
            return
        self._source = source
        self._chunk_state = source.get_state()
        self._runner = processes.ProcessMapRunner(pool.pool, source)

    def _fill(self) -> None:
        """The next chunk of mapped batches (or the end, or the stream handed over)."""
        state, outs, err = parking.next_chunk(self)
        if type(outs) is FailedChunk:
            self._hand_over({"input": processes.restart_state(outs, state), "skip": 0})
            return
        if err is not None:
            if not outs:
                self._done = True
                self._end_processes()
                raise err
            self._pending = err
        elif not outs:  # the end: the position stays after the last element delivered
            self._done = True
            self._park()
            return
        self._chunk_state, self._chunk, self._pos = state, outs, 0

    def _hand_over(self, state: dict[str, Any]) -> None:
        """From ``state`` on, the unfused pipeline delivers the stream."""
        self._end_processes()
        if self._source is not None:
            self._source.close()
            self._source = None
        self._stay = True
        self._chunk, self._pos, self._pending, self._done = [], 0, None, False
        self._unfused().set_state(state)

    # ------------------------------------------------------------------ checkpoints

    def get_state(self) -> dict[str, Any]:
        if self._runner is None and self._source is None:
            return self._unfused().get_state()
        return {"input": self._chunk_state, "skip": self._pos}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "skip"), "parallel map")
        if self._runner is None and self._source is None:
            self._unfused().set_state(state)
            return
        if self._runner is None or self._source is None:  # ended (the pool parked): the unfused pipeline
            self._hand_over(state)
            return
        self._runner.reset()
        self._chunk, self._pos, self._pending, self._done = [], 0, None, False
        try:
            self._source.set_state(state["input"])
            self._source._skip(int(state["skip"]))
        except SpanFallback:
            self._hand_over(state)
            return
        self._chunk_state = self._source.get_state()

    def close(self) -> None:
        self._done = True
        self._end_processes()
        if self._source is not None:
            self._source.close()
        if self._inproc is not None:
            self._inproc.close()
