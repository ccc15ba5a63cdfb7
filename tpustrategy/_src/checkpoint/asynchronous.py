"""Asynchronous saves: the files are written while training goes on.

``Checkpoint.save(..., options=CheckpointOptions(enable_async=True))`` does
the parts that need the devices or the other processes on the calling thread
(collecting the objects, checking that the processes agree, each array's
fingerprint, the iterators' positions, the device-to-host copy of every
array, which orbax's ``AsyncCheckpointer`` makes before it returns), and
leaves the rest to a background thread: orbax writes the array files, then
process 0 commits the checkpoint (manifest, rename) and runs what the caller
chained after the commit (a manager's state file and deletions).

One asynchronous save is in flight per process at a time: the next save, any
``restore``/``read``, ``CheckpointManager.sync()`` / ``Checkpoint.sync()`` and
the end of the main program (``before_exit``: before the interpreter starts
to finalize) wait for it (`wait_all`); its error, if any, is raised by
the first of those to wait. A crash during it loses only that save (its
``.tps-tmp`` folder is removed by the next save or manager start).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from tpustrategy._src import before_exit

_log = logging.getLogger("tpustrategy.checkpoint")
_LOCK = threading.Lock()
_PENDING: list[PendingSave] = []


class PendingSave:
    """A save whose files are being written by a background thread."""

    def __init__(self, path: str, work: Callable[[], None]):
        self.path = path
        self._error: BaseException | None = None

        def run() -> None:
            try:
                work()
            except BaseException as e:  # handed to whoever waits
                self._error = e

        self._thread = threading.Thread(target=run, name=f"tps-checkpoint-save:{path}", daemon=True)
        with _LOCK:
            _PENDING.append(self)
        # Orbax's writer starts threads, which Python refuses once finalization begins:
        # the end of the main program waits for the save before that.
        before_exit.arm(_wait_at_exit, _unfinished)
        self._thread.start()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self) -> None:
        """Waits for the save to finish; raises its error (once)."""
        self._thread.join()
        with _LOCK:
            if self in _PENDING:
                _PENDING.remove(self)
        error, self._error = self._error, None
        if error is not None:
            raise error


def wait_all() -> None:
    """Waits for every asynchronous save of this process; raises the first error."""
    with _LOCK:
        pending = list(_PENDING)
    first: BaseException | None = None
    for save in pending:
        try:
            save.wait()
        except BaseException as e:
            first = first or e
    if first is not None:
        raise first


def in_flight() -> bool:
    with _LOCK:
        return any(not p.done() for p in _PENDING)


def _unfinished() -> bool:
    return bool(_PENDING)  # no lock: before_exit may ask while this thread holds it


def _wait_at_exit() -> None:
    try:
        wait_all()
    except BaseException as e:  # the program is ending: say so, do not raise
        _log.error("An asynchronous checkpoint save failed before exit: %s", e)
