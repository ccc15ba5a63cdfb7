"""Feeds of a fused ``map(fn).batch(n)``: the records of a reader or of an interleave of readers as
byte ranges the worker processes read themselves.

`transformations.map_batch.MapBatchIterator` asks its input for ``_record_feed`` (a
``TFRecordDataset``, with or without ``num_parallel_reads``; an ``interleave`` whose inner datasets
are such readers). Its workers then get `record_spans.Span`s of a batch's records instead of the
records: each worker reads, maps one by one and stacks a batch (`parallel.worker.MapBatchTask`), so
that this process neither reads nor sends the records (per-example 3 KB images on 2 cores: 63-74k
-> 90-97k records/s, this process 6 -> 1.1-1.3 µs a record). A feed's state is the record stream's
own (the reader's, the interleave's), so checkpoints move between this and the pipeline that reads
the records here. `InterleaveFeed` follows the interleave's own loop -- the one other place its
order is written down; ``test_record_feeds`` restores the interleave from the feed's state after
every span.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.iterator import NodeIterator, check_state
from tpustrategy._src.data.sources.record_spans import (
    Cursor,
    Segment,
    Span,
    SpanFallback,
    Spans,
    count,
)


def placed(feed: NodeIterator, state: Any) -> NodeIterator:
    """``feed`` moved to ``state`` (closed if it cannot be: the error propagates)."""
    try:
        feed.set_state(state)
    except BaseException:
        feed.close()
        raise
    return feed



class _RecordFeed(Spans):
    """The records of a reader (or of an interleave of readers) for a fused ``map(fn).batch(n)``:
    `Span`s of ``n`` records (the last may be short), each a batch the worker reads, maps and stacks.

    Its state is the record stream's (the reader's, the interleave's), and `_skip` counts records:
    the fused iterator's state (``{"input": {"input": stream state, "skip": records}, "done"}``) is
    kept as in the pipeline reading records here.
    """

    _n = 1

    @abc.abstractmethod
    def _take(self, need: int) -> list[Segment]:
        """Segments of the next ``need`` records (fewer only at the end of the stream)."""

    def _next_span(self) -> Span:
        segments = self._take(self._n)
        if not segments:
            raise StopIteration
        return Span(segments)

    def _skip(self, n: int) -> int:
        """Discards the next ``n`` *records*; returns how many there were."""
        return count(self._take(n)) if n > 0 else 0


class ReaderFeed(_RecordFeed):
    """The records of a ``TFRecordDataset`` (uncompressed, one file at a time); the reader's state."""

    def __init__(self, files: NodeIterator, batch_size: int, block: int):
        self._cursor = Cursor(files, block)
        self._n = batch_size

    def _take(self, need: int) -> list[Segment]:
        return self._cursor.take(need)

    def get_state(self) -> dict[str, Any]:
        return self._cursor.get_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._reset()
        self._cursor.set_state(state)

    def close(self) -> None:
        self._cursor.close()


class InterleaveFeed(_RecordFeed):
    """The records of ``interleave(fn, cycle_length, block_length)`` over readers, in the interleave's
    order (`transformations.interleave.InterleaveIterator`'s loop, with a `Cursor` per open slot): each
    inner dataset must be an uncompressed ``TFRecordDataset`` (`cursor_of` says; else `SpanFallback`).
    Its state is the interleave's. With one slot (what ``num_parallel_calls=AUTOTUNE`` gives on hosts
    of up to 17 cores) the inner datasets come one after another and a span has a segment per file;
    with several, a segment per block (`read_span` reads each file's part of a span at once).

    Args:
      new_input: makes a fresh iterator of the interleave's input.
      open_inner: ``fn(element)``, the inner `Dataset`.
      cursor_of: the `Cursor` over an inner dataset's records (`SpanFallback` if it is not a reader).
      cycle_length, block_length: the interleave's (resolved).
      batch_size: records per span.
      parallel: the interleave has ``num_parallel_calls`` (its inner iterators run in background
        threads, whose state wraps the reader's: ``{"input": reader state, "skip": records}``).
    """

    def __init__(self, new_input: Callable[[], NodeIterator], open_inner: Callable[[Any], Any],
                 cursor_of: Callable[[Any], Cursor], cycle_length: int, block_length: int, batch_size: int,
                 parallel: bool):
        self._new_input, self._open, self._cursor_of = new_input, open_inner, cursor_of
        self._cycle, self._block, self._n, self._parallel = cycle_length, block_length, batch_size, parallel
        self._input = new_input()
        self._input_done = False
        # Per open slot: its cursor and the input's state before the element that opened it.
        self._slots: list[tuple[Cursor, Any] | None] = [None] * cycle_length
        self._ci = 0
        self._bi = 0

    def _open_next(self) -> tuple[Cursor, Any] | None:
        """The next input element's inner dataset as a slot (None at the end of the input)."""
        outer = self._input.get_state()
        try:
            x = self._input.__next__()
        except StopIteration:
            self._input_done = True
            return None
        except Exception as e:  # the unfused interleave raises it in its place
            raise SpanFallback(f"the interleave's input raised {type(e).__name__}") from e
        return self._open_cursor(x), outer

    def _open_cursor(self, x: Any) -> Cursor:
        try:
            inner = self._open(x)
        except Exception as e:
            raise SpanFallback(f"the interleave's function raised {type(e).__name__}") from e
        return self._cursor_of(inner)

    def _advance(self) -> None:
        self._ci = (self._ci + 1) % self._cycle
        self._bi = 0

    def _take(self, need: int) -> list[Segment]:
        segments: list[Segment] = []
        slots = self._slots
        while need:
            slot = slots[self._ci]
            if slot is not None:
                one = self._cycle == 1  # blocks do not change the order: the state's count wraps
                got = slot[0].take(need if one else min(need, self._block - self._bi))
                if got:
                    segments += got
                    c = got[0][3] if len(got) == 1 else count(got)
                    need -= c
                    if one:
                        self._bi = (self._bi + c) % self._block
                        continue
                    self._bi += c
                    if self._bi >= self._block:
                        self._advance()
                else:  # exhausted: the next input element's inner dataset opens in its place
                    slot[0].close()
                    slots[self._ci] = None
                    self._advance()
            elif not self._input_done:
                slots[self._ci] = self._open_next()
            elif any(s is not None for s in slots):
                self._advance()
            else:
                break
        return segments

    def get_state(self) -> dict[str, Any]:
        slots = []
        for slot in self._slots:
            if slot is None:
                slots.append(None)
                continue
            inner = slot[0].get_state()
            slots.append({"outer": slot[1], "inner": {"input": inner, "skip": 0} if self._parallel else inner})
        return {"input": self._input.get_state(), "input_done": self._input_done, "cycle": self._ci,
                "block": self._bi, "slots": slots}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "input_done", "cycle", "block", "slots"), "interleave")
        if len(state["slots"]) != self._cycle:
            raise SpanFallback(f"an interleave state of {len(state['slots'])} slots, not {self._cycle}")
        self._reset()
        self._close_slots()
        self._input.set_state(state["input"])
        self._input_done = bool(state["input_done"])
        self._ci, self._bi = int(state["cycle"]), int(state["block"])
        for i, slot in enumerate(state["slots"]):
            if slot is not None:
                self._slots[i] = (self._restore_slot(slot), slot["outer"])

    def _restore_slot(self, slot: dict[str, Any]) -> Cursor:
        source = self._new_input()
        try:
            source.set_state(slot["outer"])
            x = source.__next__()
        except Exception as e:
            raise SpanFallback(f"the interleave's input raised {type(e).__name__}") from e
        finally:
            source.close()
        cursor = self._open_cursor(x)
        try:
            inner = slot["inner"]
            if self._parallel:
                inner = check_state(inner, ("input", "skip"), "prefetch")
                cursor.set_state(inner["input"])
                cursor.take(int(inner["skip"]))
            else:
                cursor.set_state(inner)
        except BaseException:
            cursor.close()
            raise
        return cursor

    def _close_slots(self) -> None:
        for i, slot in enumerate(self._slots):
            if slot is not None:
                slot[0].close()
                self._slots[i] = None

    def close(self) -> None:
        self._close_slots()
        self._input.close()
