"""``tps.experimental.PreemptionWatcher``: learn that a process of the job is being preempted.

TensorFlow's watcher starts a background thread that waits on the coordination
service's key-value store for a preemption message, which the preempted worker
writes there; a non-empty ``preemption_message`` is the reliable sign that a
preemption happened. Here a preemption notice is SIGTERM to any process of the
job (what Cloud TPU, Kubernetes and Slurm send before they stop a process). The
process that receives it writes the message under one key of JAX's coordination
service (``jax.distributed``), so every process's watcher sees it; in one
process the signal handler stores it directly.

The watcher notices; it does not save (``PreemptionCheckpointHandler`` does).
Its SIGTERM handler then calls the handler that was installed before it (so the
two can be used together), or, where SIGTERM had its default action, ends the
process as that would have: the preempted process stops, the others read the
message.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any

from tpustrategy._src import background

PREEMPTION_KEY = "tpustrategy/preemption/message"
_LOG = logging.getLogger("tpustrategy")
_POLL_MS = 1000


def _client() -> Any:
    from tpustrategy._src.jax_shims import coordination

    return coordination.client() if coordination.is_initialized() else None


class PreemptionWatcher:
    """Watches for a preemption notice to any process of the job (``tf.distribute.experimental.PreemptionWatcher``).

    Create it once, from the main thread (signal handlers can only be set there),
    after ``tps.initialize`` in a multi-process job.

    Example:
      >>> watcher = tps.experimental.PreemptionWatcher()
      >>> for step in range(steps):
      ...     if watcher.preemption_message:  # some process got SIGTERM
      ...         break
      ...     train_step()
    """

    def __init__(self) -> None:
        self._message: str | None = None
        self._noticed = threading.Event()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._previous: Any = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        else:
            _LOG.warning("PreemptionWatcher created off the main thread: it cannot catch SIGTERM in this process, "
                         "only notices that other processes publish.")
        self._client = _client()
        self._thread: threading.Thread | None = None
        if self._client is not None:
            self._thread = threading.Thread(target=self._watch_key, name="tps-preemption-watcher", daemon=True)
            self._thread.start()
            background.register(self)  # its thread waits inside the service's C++ get

    # TensorFlow's surface ---------------------------------------------------------------------
    @property
    def preemption_message(self) -> str | None:
        """None until a process of the job received a preemption notice; then a message saying which."""
        return self._message

    def block_until_worker_exit(self, timeout: float | None = None) -> None:
        """Blocks until a preemption notice has been seen (the preempted process is about to exit).

        Args:
          timeout: seconds to wait at most (None: until the notice). TensorFlow's
            method takes no timeout; ours accepts one so a test or a supervisor
            can poll.
        """
        self._noticed.wait(timeout)

    # Noticing ----------------------------------------------------------------------------------
    def _record(self, message: str) -> None:
        with self._lock:
            if self._message is None:
                self._message = message
                self._noticed.set()
                _LOG.warning("PreemptionWatcher: %s", message)

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        process = 0
        if self._client is not None:
            import jax

            process = jax.process_index()
        message = f"preemption notice (SIGTERM) received by process {process} (pid {os.getpid()})"
        self._record(message)
        if self._client is not None:
            try:
                self._client.key_value_set(PREEMPTION_KEY, message)
            except Exception:  # another process published first: the key is set once
                pass
        previous = self._previous
        if callable(previous):
            previous(signum, frame)
        elif previous in (signal.SIG_DFL, None):  # the process still ends, as SIGTERM's default does
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def _watch_key(self) -> None:
        while not self._closed.is_set() and self._message is None:
            try:
                message = self._client.blocking_key_value_get(PREEMPTION_KEY, _POLL_MS)
            except Exception:  # not set yet (deadline exceeded), or the service is gone
                if self._closed.wait(0.05):
                    return
                continue
            self._record(message)
            return

    def close(self) -> None:
        """Stops watching and puts back the SIGTERM handler found at creation."""
        self._closed.set()
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == self._on_sigterm:
            signal.signal(signal.SIGTERM, self._previous if self._previous is not None else signal.SIG_DFL)

    def stop_at_exit(self) -> None:
        self.close()
        if self._thread is not None:
            self._thread.join(3 * _POLL_MS / 1000)

    def __repr__(self) -> str:
        return f"PreemptionWatcher(preemption_message={self._message!r})"
