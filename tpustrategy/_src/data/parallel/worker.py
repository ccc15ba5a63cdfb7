"""The worker process's side of a parallel ``map``: its loop and the tasks it runs.

A worker (started by `processes.ProcessPool` as a fresh interpreter that imports this module) loads
its pickled task, then maps the chunks its parent sends until the socket closes: element by element
(`map_elements`, an element's error in its place), or whole batches (`MapBatchTask`, also for
`RecordRange` elements, whose records the worker reads itself).
"""

from __future__ import annotations

import abc
import os
import pickle
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any

from tpustrategy._src.data.parallel.channel import RESULT_SLOTS, Channel, RemoteError


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            os._exit(0)


def map_elements(task: Any, elems: list[Any]) -> tuple[list[Any], RemoteError | None]:
    """``task`` applied to each element; an element's error in its place, a fatal one ends the chunk."""
    outs: list[Any] = []
    for x in elems:
        try:
            outs.append(task(x))
        except Exception as e:  # this element's error, delivered in its place
            outs.append(RemoteError(e))
        except BaseException as e:  # SystemExit, KeyboardInterrupt: ends the stream
            return outs, RemoteError(e)
    return outs, None


class RecordRange(tuple, metaclass=abc.ABCMeta):
    """An element that names where its records lie instead of holding them: the worker reads them
    itself (``read``), so that the consumer's process neither reads nor sends them
    (`sources.record_spans.Span`)."""

    __slots__ = ()

    @abc.abstractmethod
    def read(self) -> list[bytes]:
        """The records, every checksum checked (an error if they are not as described)."""


class SpanFallback(Exception):
    """A stretch of records that cannot be read by ranges (a file that cannot be opened or framed, an
    inner dataset that is not a reader): the pipeline that reads records in this process reads it,
    from ``state`` (the stream's state before it)."""

    def __init__(self, why: str, state: Any = None):
        super().__init__(why)
        self.state = state


class Batches(list):
    """A fused chunk's result: ``(count, batch)`` pairs, each batch stacked in the worker."""

    __slots__ = ()


class MapBatchTask:
    """``map`` then ``batch`` in the worker: one stacked array per batch crosses back, not one per element.

    ``map_chunk`` maps a chunk of whole batches (the last one may be short at
    the end of the stream) and stacks each batch as ``Dataset.batch`` does. A
    chunk in which an element fails, or whose elements do not stack, comes
    back element by element (with `RemoteError` in the failed places), so that
    the parent can deliver it exactly as the unfused pipeline would.
    """

    def __init__(self, fn: Any, batch_size: int):
        self.fn, self.batch_size = fn, batch_size

    def __call__(self, x: Any) -> Any:
        return self.fn(x)

    def map_chunk(self, elems: list[Any]) -> tuple[list[Any], RemoteError | None]:
        if elems and isinstance(elems[0], RecordRange):
            return self._map_ranges(elems)
        from tpustrategy._src.data.core.structure import stack

        outs, fatal = map_elements(self.fn, elems)
        if fatal is not None or any(type(x) is RemoteError for x in outs):
            return outs, fatal
        n = self.batch_size
        try:
            return Batches((len(outs[i : i + n]), stack(outs[i : i + n], "Dataset.batch"))
                           for i in range(0, len(outs), n)), None
        except Exception:  # elements that do not stack: the parent batches them, raising batch's own error
            return outs, None


    def _map_ranges(self, ranges: list[RecordRange]) -> tuple[list[Any], RemoteError | None]:
        """Each range is one batch: its records are read here, mapped and stacked. Anything but the
        plain case (damage, a missing file, an element's error, elements that do not stack, SystemExit)
        fails the whole chunk, which the parent hands, from its start, to the pipeline that reads the
        records in its own process and reports exactly what it always reports there."""
        out = Batches()
        for r in ranges:
            try:
                records = r.read()
            except Exception as e:
                return [RemoteError(SpanFallback(f"{type(e).__name__}: {e}"))] * len(ranges), None
            got, fatal = self.map_chunk(records)
            if fatal is not None or type(got) is not Batches or len(got) != 1:
                return [RemoteError(SpanFallback("an element failed or did not stack"))] * len(ranges), None
            out.append(got[0])
        return out, None


def worker_main(fd: int) -> None:
    """A worker process: loads the task, then maps chunks until its socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    parent = os.getppid()
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="tpsd-watch-parent").start()
    sock = Channel(socket.socket(fileno=fd), slots=RESULT_SLOTS)
    try:
        init = sock.recv()
    except EOFError:
        return
    sys.path[:] = init["sys_path"]
    try:
        task = pickle.loads(init["task"])
    except BaseException as e:
        sock.send(("init_error", "".join(traceback.format_exception(type(e), e, e.__traceback__))))
        return
    sock.send(("ready", os.getpid()))
    map_chunk = getattr(task, "map_chunk", None)  # a task that maps a whole chunk (MapBatchTask)
    while True:
        try:
            cid, elems, slot = sock.recv()
        except (EOFError, ConnectionError, OSError):
            return
        if cid == "task":  # a parked pool adopted by another map: its function replaces this one
            try:
                task = pickle.loads(elems)
            except BaseException as e:
                sock.send(("init_error", "".join(traceback.format_exception(type(e), e, e.__traceback__))))
                return
            map_chunk = getattr(task, "map_chunk", None)
            sock.send(("ready", os.getpid()))
            continue
        t0 = time.perf_counter()
        outs, fatal = map_chunk(elems) if map_chunk is not None else map_elements(task, elems)
        dt = time.perf_counter() - t0
        try:
            sock.send(("ok", cid, outs, dt, fatal), slot)
        except (EOFError, ConnectionError, BrokenPipeError):
            return
        except Exception:  # a result that cannot be pickled: fail those elements only
            fixed = []
            for out in outs:
                try:
                    pickle.dumps(out, protocol=5)
                    fixed.append(out)
                except Exception as e:
                    fixed.append(RemoteError(TypeError(
                        f"Dataset.map: the map function's result ({type(out).__name__}) cannot be sent from the "
                        f"worker process: {e}.\nFix: return NumPy arrays, bytes, Python scalars or tuples/dicts "
                        "of them, or set Options().threading.experimental_worker_processes = False.")))
            sock.send(("ok", cid, fixed, dt, fatal), slot)
        if fatal is not None:
            return
