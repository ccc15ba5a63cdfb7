"""Background workers: run part of a pipeline in a thread, hand off chunks.

A thread hand-off costs 100-200 µs on a small machine, so workers pass lists
of elements (chunks) rather than single elements, growing the chunk while
producing it takes well under a millisecond. `BackgroundIterator` runs an
input iterator in one worker thread with a bounded buffer; it backs
``prefetch``, the slots of a parallel ``interleave`` and parallel ``batch``.

Checkpoints record the consumer's position, not the worker's: the input's
state just before the chunk being consumed plus the offset into it. A restored
iterator sets the input to that state and skips the offset.

Workers never hold a reference to the iterator that owns them, so dropping
the iterator runs its finalizer, which stops and joins the thread. An error
raised in a worker is delivered to the consumer after every element produced
before it, once.
"""

from __future__ import annotations

import collections
import os
import threading
import time
import weakref
from typing import Any

from tpustrategy._src.data.core.iterator import NodeIterator, check_state, pull
from tpustrategy._src.data.core.options import AUTOTUNE
from tpustrategy._src.data.core.structure import flatten

_JOIN_TIMEOUT_S = 5.0
_FAST_CHUNK_S = 0.001
_ADAPTIVE_BUFFER_BYTES = 64 << 20


class ElementError:
    """An element whose production raised, kept in its place in a worker's chunk.

    TensorFlow's errors belong to one element: the consumer raises this error
    when it reaches the element and may go on with the next one (which is what
    ``ignore_errors`` does), so a worker keeps producing after it.
    """

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error


class FailedChunk(list):
    """A chunk holding at least one `ElementError` (only such chunks are scanned)."""

    __slots__ = ()


def take_from_chunk(chunk: list[Any], pos: int, n: int, failed: bool) -> tuple[list[Any], int, Exception | None]:
    """Up to ``n`` elements of ``chunk`` from ``pos``, the new position, and the error to raise.

    The elements stop before an `ElementError`; when one is first, the result
    is ``([], pos + 1, its error)``: the caller moves past it, then raises.
    """
    out = chunk[pos : pos + n]
    if failed:
        for j, x in enumerate(out):
            if type(x) is ElementError:
                if j == 0:
                    return [], pos + 1, x.error
                out = out[:j]
                break
    return out, pos + len(out), None


def read_chunk(it: NodeIterator, n: int, bulk: bool = False) -> tuple[Any, list[Any], BaseException | None]:
    """Reads a worker's next chunk of ``it``: ``(state before it, up to n elements, None)``.

    The one place where every chunked worker (``BackgroundIterator``'s
    thread, a parallel map's threads, the process runner) reads its input.
    ``bulk``: exactly ``n`` elements (fewer only at the end; `pull`) rather
    than what one ``_next_many`` gives. An input element's error comes as
    ``(state, FailedChunk([ElementError(e)]), None)``, delivered in its place
    while the stream goes on (TensorFlow's rule); an error that ends the
    stream (KeyboardInterrupt, SystemExit) as ``(None, [], e)``; ``[]`` is
    the end.
    """
    state = None
    try:
        state = it.get_state()
        return state, (pull(it, n) if bulk else it._next_many(n)), None
    except Exception as e:
        return state, FailedChunk([ElementError(e)]), None
    except BaseException as e:
        return None, [], e


def element_nbytes(element: Any) -> int:
    """A rough size of one element, to bound adaptive buffers by memory."""
    total = 0
    for leaf in flatten(element):
        if isinstance(leaf, bytes):
            total += len(leaf) + 33
        else:
            total += getattr(leaf, "nbytes", 8) + 100
    return total


def cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def autotune_parallelism(options: Any = None) -> int:
    """What AUTOTUNE parallelism resolves to: ``autotune.cpu_budget`` or the CPU count (1 with autotune off)."""
    if options is None:
        return cpu_count()
    if options.autotune.enabled is False:
        return 1
    return options.autotune.cpu_budget or cpu_count()


def cap_workers(n: int, options: Any = None) -> int:
    """``n`` capped at ``threading.private_threadpool_size`` (when set and > 0)."""
    cap = None if options is None else options.threading.private_threadpool_size
    return min(n, cap) if cap else n


def resolve_parallelism(value: int | None, api: str, arg: str = "num_parallel_calls",
                        options: Any = None) -> int | None:
    """Validates a ``num_parallel_calls``-style argument; AUTOTUNE -> the CPU budget.

    With ``options`` (the pipeline's, at iteration) the result is capped at
    the private thread pool size.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"{api}: {arg} must be an int or AUTOTUNE; received {type(value).__name__}: {value!r}.\n"
            f"Fix: pass {arg}=AUTOTUNE or a positive int."
        )
    if value == AUTOTUNE:
        return cap_workers(autotune_parallelism(options), options)
    if value <= 0:
        raise ValueError(
            f"{api}: {arg} must be positive or AUTOTUNE (-1); received {value}.\n"
            f"Fix: pass {arg}=AUTOTUNE or a positive int."
        )
    return cap_workers(value, options)


def start_thread(target: Any, args: tuple[Any, ...], name: str) -> threading.Thread:
    t = threading.Thread(target=target, args=args, name=name, daemon=True)
    t.start()
    return t


def join_threads(threads: list[threading.Thread]) -> None:
    me = threading.current_thread()
    deadline = time.monotonic() + _JOIN_TIMEOUT_S
    for t in threads:
        if t is not me:
            t.join(max(0.0, deadline - time.monotonic()))


class _Shared:
    """State shared by a `BackgroundIterator` and its worker thread."""

    def __init__(self, it: NodeIterator, capacity: int | None, ram_budget: int | None = None):
        self.cond = threading.Condition()
        self.ram_budget = ram_budget or _ADAPTIVE_BUFFER_BYTES
        self.it = it
        self.chunks: collections.deque[tuple[Any, list[Any]]] = collections.deque()
        self.buffered = 0
        self.capacity = capacity  # None: adaptive
        self.end = False
        self.error: BaseException | None = None
        self.stop = False
        self.threads: list[threading.Thread] = []


def _produce(sh: _Shared) -> None:
    it = sh.it
    k = 1
    adaptive = sh.capacity is None
    cap = 2 if adaptive else sh.capacity
    while True:
        with sh.cond:
            while not sh.stop and sh.buffered >= cap:
                sh.cond.wait()
            if sh.stop:
                return
        n = max(1, min(k, cap // 2 if cap > 1 else 1))
        t0 = time.perf_counter()
        state, elems, err = read_chunk(it, n)
        dt = time.perf_counter() - t0
        if err is not None:  # delivered to the consumer
            with sh.cond:
                if not sh.stop:
                    sh.error = err
                sh.end = True
                sh.cond.notify_all()
            return
        if type(elems) is FailedChunk:  # an element's error: delivered in its place, then go on
            with sh.cond:
                if not sh.stop:
                    sh.chunks.append((state, elems))
                    sh.buffered += 1
                sh.cond.notify_all()
            continue
        with sh.cond:
            if elems:
                sh.chunks.append((state, elems))
                sh.buffered += len(elems)
            else:
                sh.end = True
            sh.cond.notify_all()
        if not elems:
            return
        if len(elems) == n and dt < _FAST_CHUNK_S:
            k = min(k * 2, 4096)
            if adaptive:
                limit = max(2, sh.ram_budget // element_nbytes(elems[0]))
                cap = min(max(cap, 2 * k), limit)
                k = min(k, max(1, cap // 2))
        elif adaptive and dt > 20 * _FAST_CHUNK_S and k > 1:
            k //= 2


def stop_workers(sh: Any) -> list[threading.Thread]:
    """Asks the worker threads sharing ``sh`` (``cond``, ``stop``, ``threads``) to stop; joins them."""
    with sh.cond:
        sh.stop = True
        sh.cond.notify_all()
    threads, sh.threads = sh.threads, []
    join_threads(threads)
    return threads


def shutdown_workers(sh: Any) -> None:
    """Stops the workers, then closes the input they read (once none is still running)."""
    threads = stop_workers(sh)
    if all(not t.is_alive() for t in threads):
        sh.it.close()


class WorkerOwner:
    """Mixin of node iterators whose worker threads share one state object ``self._sh``.

    The subclass sets ``_sh`` (None until started), ``_finalizer`` (a
    ``weakref.finalize`` calling `shutdown_workers`), ``_it`` and ``_done``.
    """

    _sh: Any
    _finalizer: Any
    _it: NodeIterator
    _done: bool

    def _stop(self) -> None:
        """Stops the workers but keeps the input open (for ``set_state``)."""
        sh, self._sh = self._sh, None
        if sh is not None:
            self._finalizer.detach()
            stop_workers(sh)

    def close(self) -> None:
        self._done = True
        sh, self._sh = self._sh, None
        if sh is not None:
            self._finalizer.detach()
            shutdown_workers(sh)
        else:
            self._it.close()


class ChunkConsumer:
    """The consumer's side of a chunk hand-off, shared by every chunked worker iterator.

    Holds the chunk being consumed (``_chunk``, ``_pos``), the input's state
    before it (``_chunk_state``) and an error to raise after its last element
    (``_pending``). The subclass implements ``_fill`` (the next chunk through
    `_set_chunk`; False at the end). The checkpoint is the consumer's
    position: ``{"input": state before the chunk, "skip": offset into it}``.
    """

    _chunk: list[Any]
    _pos: int
    _chunk_state: Any
    _done: bool
    _it: NodeIterator
    _failed = False
    _pending: BaseException | None = None

    def _fill(self) -> bool:
        raise NotImplementedError

    def _set_chunk(self, state: Any, elems: list[Any]) -> None:
        if state is not None:
            self._chunk_state = state
        self._chunk, self._pos = elems, 0
        self._failed = type(elems) is FailedChunk

    def _raise_pending(self) -> None:
        err, self._pending = self._pending, None
        self._done = True
        raise err  # type: ignore[misc]

    def __next__(self) -> Any:
        if self._pos >= len(self._chunk):
            if self._pending is not None:
                self._raise_pending()
            if not self._fill():
                raise StopIteration
        x = self._chunk[self._pos]
        self._pos += 1
        if self._failed and type(x) is ElementError:
            raise x.error
        return x

    def _next_many(self, n: int) -> list[Any]:
        if self._pos >= len(self._chunk):
            if self._pending is not None:
                self._raise_pending()
            if not self._fill():
                return []
        out, self._pos, err = take_from_chunk(self._chunk, self._pos, n, self._failed)
        if err is not None:
            raise err
        return out

    def _position(self, started: bool) -> dict[str, Any]:
        if not started and self._chunk_state is None:
            return {"input": self._it.get_state(), "skip": 0}
        return {"input": self._chunk_state, "skip": self._pos}

    def _restore_position(self, state: dict[str, Any]) -> None:
        """Moves the (stopped) input to ``state`` and forgets the chunk held."""
        self._it.set_state(state["input"])
        self._it._skip(int(state["skip"]))
        self._chunk, self._pos, self._chunk_state = [], 0, None
        self._done, self._pending = False, None


class BackgroundIterator(ChunkConsumer, WorkerOwner, NodeIterator):
    """Runs ``it`` in a worker thread, buffering up to ``capacity`` elements.

    Args:
      it: the input iterator (owned from now on).
      capacity: the buffer size in elements, or None to size it adaptively.
      name: a thread name for debugging.
    """

    def __init__(self, it: NodeIterator, capacity: int | None, name: str = "tpsd-prefetch",
                 ram_budget: int | None = None):
        self._it = it
        self._capacity = capacity
        self._ram_budget = ram_budget
        self._name = name
        self._sh: _Shared | None = None
        self._finalizer: Any = None
        self._chunk: list[Any] = []
        self._pos = 0
        self._chunk_state: Any = None
        self._done = False

    def _start(self) -> _Shared:
        sh = _Shared(self._it, self._capacity, self._ram_budget)
        self._chunk_state = self._it.get_state()
        self._chunk, self._pos = [], 0
        sh.threads.append(start_thread(_produce, (sh,), self._name))
        self._sh = sh
        self._finalizer = weakref.finalize(self, shutdown_workers, sh)
        return sh

    def start(self) -> None:
        """Starts the worker now (it starts on the first pull otherwise)."""
        if self._sh is None and not self._done:
            self._start()

    def _fill(self) -> bool:
        """Takes the next chunk from the worker; False at the end of the stream."""
        if self._done:
            return False
        sh = self._sh or self._start()
        with sh.cond:
            while not sh.chunks and not sh.end and not sh.stop:
                sh.cond.wait()
            if sh.chunks:
                state, elems = sh.chunks.popleft()
                sh.buffered -= len(elems)
                sh.cond.notify_all()
            else:
                err, sh.error = sh.error, None
                self._done = True
                if err is not None:
                    raise err
                return False
        self._set_chunk(state, elems)
        return True

    def get_state(self) -> dict[str, Any]:
        return self._position(self._sh is not None)

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "skip"), "prefetch")
        self._stop()
        self._restore_position(state)

