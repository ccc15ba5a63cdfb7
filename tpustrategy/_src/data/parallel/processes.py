"""Worker processes for parallel ``map``: a pool fed in chunks, shared memory for big arrays.

Threads share one interpreter lock, so a map function written in Python and
NumPy does not scale with threads. `ProcessPool` runs the function in worker
*processes* instead, as Grain's and PyTorch's loaders do:

* Workers are fresh interpreters (``subprocess`` with ``sys.executable``; no
  fork after JAX/XLA started threads, no re-run of the user's ``__main__`` as
  ``multiprocessing``'s spawn and forkserver do). A worker imports only
  ``tpustrategy._src.data`` and NumPy (plus what the function's pickle names),
  runs with ``JAX_PLATFORMS=cpu`` (it never takes the accelerator) and ignores
  Ctrl-C, which the parent handles by closing the pool.
* Messages go over one Unix socket per worker (`Channel`). A message is
  pickled with protocol 5; NumPy buffers of `SHM_MIN_BYTES` or more (and a
  pickle longer than `INLINE_MAX_BYTES`) go into the sender's shared-memory
  arena: an anonymous ``memfd`` of `DEPTH` slots, mapped once by each side
  (its descriptor travels over the socket when the arena is made or grown).
  A worker copies its request's buffers out; the parent unpickles a result as
  views of the worker's slot, lent until the last of them is gone (see
  `channel`); nothing is left in ``/dev/shm`` even if a process dies.
* A worker holds at most `DEPTH` chunks; socket messages stay small, so a
  parent sending and a worker sending never block each other.
* A worker that dies (killed, segfault, ``os._exit``) closes its socket; the
  parent sees end-of-file and raises `WorkerCrashedError` naming the worker
  and its exit code at the position of the first chunk it held — never a hang.
* `ProcessPool.close` ends the workers (socket closed, SIGTERM, then SIGKILL
  after a grace period) and reaps them; it runs from the owner's weakref
  finaliser, at interpreter exit (``atexit``) and on a crash.

What a worker runs (its loop, `MapBatchTask`, the `RecordRange`s it reads itself) is in `worker`.

`ProcessMapRunner` reads chunks of an input iterator, sends them to the pool
and returns the mapped chunks in input order, each with the input's state
before it (the same checkpoint positions as the thread version).
"""

from __future__ import annotations

import atexit
import collections
import os
import pickle
import select
import socket
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

from tpustrategy._src.data.core.iterator import NodeIterator
from tpustrategy._src.data.parallel.channel import AVAILABLE as AVAILABLE
from tpustrategy._src.data.parallel.channel import DEPTH as DEPTH
from tpustrategy._src.data.parallel.channel import INLINE_MAX_BYTES as INLINE_MAX_BYTES
from tpustrategy._src.data.parallel.channel import SHM_MIN_BYTES as SHM_MIN_BYTES
from tpustrategy._src.data.parallel.channel import STATS as STATS
from tpustrategy._src.data.parallel.channel import Channel as Channel
from tpustrategy._src.data.parallel.channel import (
    RemoteError,
    _signal_name,
    pack_elements,
)
from tpustrategy._src.data.parallel.sendable import pickle_task as pickle_task
from tpustrategy._src.data.parallel.threads import ElementError, FailedChunk, read_chunk
from tpustrategy._src.data.parallel.worker import Batches as Batches
from tpustrategy._src.data.parallel.worker import MapBatchTask as MapBatchTask
from tpustrategy._src.data.parallel.worker import RecordRange as RecordRange
from tpustrategy._src.data.parallel.worker import SpanFallback as SpanFallback
from tpustrategy._src.data.parallel.worker import map_elements as map_elements
from tpustrategy._src.errors import InternalError

TARGET_CHUNK_S = 0.004  # a chunk's mapping time in a worker (amortises ~100 µs of hand-off)
MAX_CHUNK = 1024
START_TIMEOUT_S = 120.0
_GRACE_S = 2.0
_POLL_S = 1.0




# Set in a worker's environment: a parallel map inside a worker (a module that builds and runs a
# pipeline when imported, as the worker imports the map function's module) stays on threads instead
# of starting pools of its own, which would start pools of their own in turn.
IN_WORKER_ENV = "TPSD_MAP_WORKER"


def in_worker() -> bool:
    """Whether this process is a map worker (its parallel maps run on threads)."""
    return os.environ.get(IN_WORKER_ENV) == "1"


class WorkerCrashedError(InternalError):
    """A worker process of a parallel ``map`` died (``tpsd.experimental.WorkerCrashedError``).

    tpustrategy's own (tf.data runs ``map`` on C++ threads and has no worker
    processes); a subclass of ``tf.errors.InternalError`` (``tps.errors.InternalError``),
    so a program catching that catches this too. Raised at the position of the
    first element the worker held, after every earlier element; the iterator
    ends after it. Attributes: ``worker`` (its index), ``pid``, ``exitcode``
    (negative: killed by that signal).

    Example:
      >>> try:
      ...     for batch in ds: ...
      ... except tpsd.experimental.WorkerCrashedError as e:
      ...     print(e.worker, e.exitcode)
    """

    def __init__(self, message: str, worker: int = -1, pid: int = -1, exitcode: int | None = None):
        super().__init__(message)
        self.worker, self.pid, self.exitcode = worker, pid, exitcode


class ThreadFallbackWarning(UserWarning):
    """A parallel ``map``'s function cannot go to worker processes and runs on threads instead.

    ``tpsd.experimental.ThreadFallbackWarning``; tpustrategy's own (no TensorFlow
    counterpart). Warned once per dataset, saying why (a closure over a live
    object, JAX calls, no cloudpickle for a lambda). Silence it with
    ``warnings.filterwarnings("ignore", category=tpsd.experimental.ThreadFallbackWarning)``
    or choose threads with ``Options().threading.experimental_worker_processes = False``.
    """


class WorkerStartError(RuntimeError):
    """The workers could not load the function (the caller falls back to threads)."""


# --------------------------------------------------------------------------- the pool

_BOOT = ("import sys; sys.path.insert(0, {root!r}); "
         "from tpustrategy._src.data.parallel.worker import worker_main; worker_main(int(sys.argv[1]))")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
_POOLS: weakref.WeakSet[ProcessPool] = weakref.WeakSet()


class _Worker:
    __slots__ = ("cids", "dead", "index", "pid", "proc", "sock")

    def __init__(self, index: int, proc: subprocess.Popen[bytes], sock: socket.socket):
        self.index, self.proc, self.sock = index, proc, Channel(sock)
        self.dead = False
        self.pid = proc.pid
        self.cids: collections.deque[int] = collections.deque()


class ProcessPool:
    """``n`` worker processes applying a pickled ``task`` to chunks of elements.

    Args:
      task: the pickled callable (`pickle_task`).
      n: the number of workers.
      intra_op: threads one worker's NumPy/BLAS may use (default 1).
    """

    def __init__(self, task: bytes, n: int, intra_op: int | None = None):
        self._task, self._n, self._intra_op = task, n, intra_op
        self.workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.closed = False
        self.started_s = 0.0

    def start(self) -> None:
        """Starts the workers and waits until each loaded the task (WorkerStartError if one cannot)."""
        t0 = time.perf_counter()
        env = dict(os.environ)
        env["JAX_PLATFORMS"] = "cpu"
        env[IN_WORKER_ENV] = "1"
        threads = str(self._intra_op or 1)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            if self._intra_op or var not in env:
                env[var] = threads
        _POOLS.add(self)
        init = {"sys_path": list(sys.path), "task": self._task}
        try:
            for i in range(self._n):
                mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    proc = subprocess.Popen(
                        [sys.executable, "-c", _BOOT.format(root=_ROOT), str(theirs.fileno())],
                        pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL, close_fds=True)
                finally:
                    theirs.close()
                with self._lock:
                    closed = self.closed
                    if not closed:
                        self.workers.append(_Worker(i, proc, mine))
                if closed:  # closed while starting (the owner was dropped): end this one too
                    mine.close()
                    proc.kill()
                    proc.wait()
                    raise WorkerStartError("the pool was closed while starting")
            for w in self.workers:
                w.sock.send(init)
            self._await_ready()
        except BaseException:
            self.close()
            raise
        self.started_s = time.perf_counter() - t0
        STATS["pools"] += 1
        STATS["pool_start_s"] += self.started_s

    def _await_ready(self) -> None:
        """Waits for every worker to report its task loaded (WorkerStartError naming one that did not)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        for w in self.workers:
            msg = self._recv_start(w, deadline)
            if msg[0] != "ready":
                raise WorkerStartError(f"worker {w.index} could not load the map function:\n{msg[1]}")

    def _recv_start(self, w: _Worker, deadline: float) -> Any:
        from multiprocessing.connection import wait

        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerStartError(f"worker {w.index} (pid {w.pid}) did not start within {START_TIMEOUT_S:.0f} s")
            if wait([w.sock.sock], min(left, _POLL_S)):
                try:
                    return w.sock.recv()
                except (EOFError, ConnectionError):
                    code = w.proc.wait(_GRACE_S)
                    raise WorkerStartError(
                        f"worker {w.index} (pid {w.pid}) exited with code {code}{_signal_name(code)} while "
                        "starting") from None

    def retask(self, task: bytes) -> None:
        """Loads another pickled task into the running workers (WorkerStartError if one cannot)."""
        if task == self._task:
            return
        self._task = task
        try:
            for w in self.workers:
                w.sock.send(("task", task, None))
            self._await_ready()
        except BaseException:
            self.close()
            raise

    def healthy(self, n: int, intra_op: int | None) -> bool:
        """Whether this pool has ``n`` live, idle workers with ``intra_op`` threads."""
        return (not self.closed and len(self.workers) == n and intra_op == self._intra_op
                and all(not w.cids and not w.dead and w.proc.poll() is None for w in self.workers))

    def free_worker(self) -> _Worker | None:
        """The worker holding the fewest chunks, if it holds fewer than `DEPTH`."""
        alive = [w for w in self.workers if not w.dead]
        if not alive:
            return None
        best = min(alive, key=lambda w: len(w.cids))
        return best if len(best.cids) < DEPTH else None

    def submit(self, w: _Worker, cid: int, elems: list[Any]) -> None:
        """Sends a chunk to ``w`` (an element that cannot be pickled raises here, and nothing is sent)."""
        slot = w.sock.next_slot()
        try:
            w.sock.send((cid, pack_elements(elems), slot))
        except (BrokenPipeError, ConnectionError):
            pass  # the worker died; its end-of-file reports it
        except BaseException:
            w.sock.unassign(slot)
            raise
        w.cids.append(cid)

    def receive(self, timeout: float | None) -> list[tuple[_Worker, Any]]:
        """Messages from the workers (waits up to ``timeout``); ``("crashed", code)`` for a dead worker."""
        busy = [w for w in self.workers if w.cids]
        if not busy:
            return []
        # select.poll directly: multiprocessing.connection.wait builds a selector each call (~50 µs
        # of this process's CPU per message on 2 busy cores, as much as the message's unpickling).
        poller = select.poll()
        by_fd = {}
        for w in busy:
            fd = w.sock.sock.fileno()
            by_fd[fd] = w
            poller.register(fd, select.POLLIN)
        events = poller.poll(None if timeout is None else int(timeout * 1000))  # a hang-up counts too
        ready = [by_fd[fd] for fd, _ev in events]
        out = []
        for w in ready:
            try:
                out.append((w, w.sock.recv(lend=True)))
            except (EOFError, ConnectionError):
                try:
                    code = w.proc.wait(_GRACE_S)
                except subprocess.TimeoutExpired:
                    w.proc.kill()
                    code = w.proc.wait()
                out.append((w, ("crashed", code)))
        if not ready:  # a backstop: a worker that died with its socket held elsewhere
            for w in busy:
                polled = w.proc.poll()
                if polled is not None:
                    out.append((w, ("crashed", polled)))
        return out

    def crash_error(self, w: _Worker, code: int | None) -> WorkerCrashedError:
        return WorkerCrashedError(
            f"Dataset.map: worker process {w.index} (pid {w.pid}) of a parallel map died with exit code "
            f"{code}{_signal_name(code)} while mapping elements; the elements it held are lost.\n"
            "Fix: look for what ends the process in the map function (os._exit, a crash in native code, "
            "running out of memory), or run it in-process with "
            "Options().threading.experimental_worker_processes = False.",
            worker=w.index, pid=w.pid, exitcode=code)

    def close(self) -> None:
        """Ends and reaps every worker (idempotent)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            workers, self.workers = self.workers, []
        for w in workers:
            try:
                w.sock.close()
            except OSError:
                pass
            if w.proc.poll() is None:
                try:
                    w.proc.terminate()
                except OSError:
                    pass
        deadline = time.monotonic() + _GRACE_S
        for w in workers:
            try:
                w.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()
        _POOLS.discard(self)


@atexit.register
def _close_all_pools() -> None:
    for pool in list(_POOLS):
        pool.close()


def restart_state(outs: Any, state: Any) -> Any:
    """Where the pipeline that reads records in this process takes over a failed chunk read by ranges:
    the state a `SpanFallback` raised while describing it carries (its first element's), else
    ``state``, the chunk's start."""
    if type(outs) is FailedChunk:
        first = next((x.error for x in outs if type(x) is ElementError), None)
        if isinstance(first, SpanFallback) and first.state is not None:
            return first.state
    return state


# --------------------------------------------------------------------------- feeding a pool in order


class ProcessMapRunner:
    """Reads chunks of ``it``, maps them in ``pool``, returns them in input order.

    Each result is ``(state, elements, error)``: the input's state before the
    chunk, the mapped elements (a `FailedChunk` when some failed, with
    `ElementError` in their places) and an error that ends the stream after
    those elements (a crash, an error reading the input, a SystemExit in the
    function). ``(None, [], None)`` is the end.
    """

    def __init__(self, pool: ProcessPool, it: NodeIterator, chunk: int = 1, unit: int = 1):
        self.pool, self.it = pool, it
        self.unit = unit  # chunks are whole multiples of this many elements (a fused batch)
        self.chunk = self._chunk_size(chunk)
        self.sizes: dict[int, int] = {}
        self.next_cid = 0
        self.take_cid = 0
        self.states: dict[int, Any] = {}
        self.done: dict[int, tuple[Any, list[Any], BaseException | None]] = {}
        self.input_done = False
        self.dropped: set[int] = set()

    def _chunk_size(self, elements: int) -> int:
        u = self.unit
        return max(u, min(MAX_CHUNK, elements) // u * u)

    def reset(self) -> None:
        """Forgets every chunk in flight (after the input's state was set): their results are dropped."""
        for w in self.pool.workers:
            self.dropped.update(w.cids)
        self.take_cid = self.next_cid
        self.states.clear()
        self.sizes.clear()
        self.done.clear()
        self.input_done = False

    def _dispatch(self) -> None:
        while not self.input_done:
            w = self.pool.free_worker()
            if w is None:
                return
            cid = self.next_cid
            self.next_cid += 1
            # A fused chunk must hold whole batches: it reads until it has them (or the end).
            state, elems, err = read_chunk(self.it, self.chunk, bulk=self.unit > 1)
            if err is not None or type(elems) is FailedChunk:  # delivered in its place
                self.done[cid] = (state, elems, err)
                if err is not None:
                    self.input_done = True
                    return
                continue
            if not elems:
                self.done[cid] = (None, [], None)
                self.input_done = True
                return
            if self.unit > 1:
                try:
                    self.pool.submit(w, cid, elems)
                except (pickle.PicklingError, TypeError, AttributeError) as e:
                    # Elements that cannot be pickled: a fused map hands this chunk to the unfused pipeline.
                    self.done[cid] = (state, FailedChunk([ElementError(e)]), None)
                    continue
            else:
                self.pool.submit(w, cid, elems)
            self.states[cid] = state
            self.sizes[cid] = len(elems)

    def _handle(self, w: _Worker, msg: Any) -> None:
        if msg[0] == "crashed":
            err = self.pool.crash_error(w, msg[1])
            for cid in w.cids:
                if cid not in self.dropped:
                    self.done[cid] = (None, [], err)
            w.cids.clear()
            w.dead = True
            return
        _kind, cid, outs, dt, fatal = msg
        if w.cids and w.cids[0] == cid:
            w.cids.popleft()
        else:
            w.cids.remove(cid)
        if cid in self.dropped:
            self.dropped.discard(cid)
            return
        failed = False
        for i, x in enumerate(outs if type(outs) is not Batches else ()):
            if type(x) is RemoteError:
                outs[i] = ElementError(x.rebuild(w.index, w.pid))  # type: ignore[arg-type]
                failed = True
        if failed:
            outs = FailedChunk(outs)
        end = fatal.rebuild(w.index, w.pid) if fatal is not None else None
        STATS["worker_map_s"] += dt
        STATS["worker_elements"] += self.sizes.get(cid, len(outs))
        n_in = self.sizes.pop(cid, len(outs))
        if outs and n_in:
            per_elem = dt / n_in
            self.chunk = self._chunk_size(int(TARGET_CHUNK_S / max(per_elem, 1e-7)))
        self.done[cid] = (self.states.pop(cid, None), outs, end)

    def next_chunk(self) -> tuple[Any, list[Any], BaseException | None]:
        while True:
            self._dispatch()
            got = self.done.pop(self.take_cid, None)
            if got is not None:
                self.take_cid += 1
                return got
            if not any(w.cids for w in self.pool.workers):
                raise InternalError(  # every chunk is either done or held by a worker; this is a bug
                    f"Dataset.map: chunk {self.take_cid} of a parallel map is neither mapped nor held by a worker.")
            for w, msg in self.pool.receive(_POLL_S):
                self._handle(w, msg)
