"""Steps prepared ahead on a background thread, with exact checkpoint positions.

A producer thread pulls host elements, splits them and transfers them to the
devices (the caller's ``produce`` does all of that), keeping at most ``depth`` finished steps in a queue, so host work and
host-to-device copies overlap the compiled step. Each queued step carries the
host iterator's state from *before* it was produced: ``get_state`` reports the
position of the next step the consumer will get, not of what was prefetched.
"""

from __future__ import annotations

import collections
import threading
import weakref
from collections.abc import Callable
from typing import Any

from tpustrategy._src import background


class Prefetcher:
    """Runs ``produce()`` ahead of the consumer.

    Args:
      produce: returns ``(state_before, step)`` or raises StopIteration.
      depth: how many steps to keep ready (0: produce on demand, no thread).
    """

    def __init__(self, produce: Callable[[], tuple[Any, Any]], depth: int):
        # A weak reference: the worker thread must not keep the iterator alive, so
        # dropping the iterator garbage-collects it and stops the thread.
        self._produce_ref = weakref.WeakMethod(produce) if hasattr(produce, "__self__") else (lambda: produce)
        self._depth = depth
        self._cond = threading.Condition()
        self._queue: collections.deque = collections.deque()
        self._thread: threading.Thread | None = None
        # Held while a step is produced and queued, so a state snapshot never
        # falls between "host iterator advanced" and "step visible in the queue".
        self._production = threading.Lock()
        # The running thread's own "let go" flag (never cleared: a thread that stop() gave
        # up waiting for still sees it after a new thread starts), read through cancelled().
        self._cancel = threading.Event()
        self._local = threading.local()

    def _start(self) -> None:
        if self._depth > 0 and self._thread is None:
            background.register(self)  # a thread inside a JAX call at exit aborts the process
            self._cancel = threading.Event()
            self._thread = threading.Thread(target=self._run, args=(self._cancel,),
                                            name="tps-prefetch-to-device", daemon=True)
            self._thread.start()

    def cancelled(self) -> bool:
        """Whether the calling thread is a prefetch thread that ``stop`` has let go.

        Long waits inside ``produce`` (the processes' input agreement) poll it, so the
        thread ends soon after ``stop``; always False on the consumer's thread.
        """
        cancel = getattr(self._local, "cancel", None)
        return cancel is not None and cancel.is_set()

    def _run(self, cancel: threading.Event) -> None:
        self._local.cancel = cancel
        while True:
            with self._cond:
                while len(self._queue) >= self._depth and not cancel.is_set():
                    self._cond.wait()
                if cancel.is_set():
                    return
            with self._production:
                produce = self._produce_ref()
                if produce is None:
                    return
                try:
                    item: Any = ("ok", produce())
                except StopIteration:
                    item = ("end", None)
                except BaseException as e:  # delivered to the consumer
                    item = ("error", e)
                with self._cond:
                    if cancel.is_set():
                        return
                    self._queue.append(item)
                    self._cond.notify_all()
                del produce
            if item[0] != "ok":
                return

    def next(self) -> tuple[Any, Any]:
        """The next ``(state_before, step)``; StopIteration at the end."""
        if self._depth == 0:
            produce = self._produce_ref()
            if produce is None:
                raise StopIteration
            return produce()
        self._start()
        with self._cond:
            while not self._queue:
                self._cond.wait()
            kind, value = self._queue[0]
            if kind == "ok":
                self._queue.popleft()
                self._cond.notify_all()
                return value
        if kind == "end":
            raise StopIteration
        with self._cond:
            self._queue.popleft()
            self._queue.append(("end", None))
        raise value

    def snapshot(self, host_state: Callable[[], Any]) -> Any:
        """State before the next step the consumer will get."""
        with self._production:
            with self._cond:
                if self._queue and self._queue[0][0] == "ok":
                    return self._queue[0][1][0]
            return host_state()

    def stop_at_exit(self) -> None:
        self.stop(timeout=5.0)

    def stop(self, timeout: float | None = None) -> None:
        thread = self._thread
        with self._cond:
            self._cancel.set()
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None
        with self._cond:
            self._queue.clear()
