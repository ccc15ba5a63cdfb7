"""Background threads that wait inside C++ calls end before the interpreter finalizes.

At finalization CPython ends every daemon thread that tries to take the GIL with
``pthread_exit``; one that is inside a JAX call at that moment (a blocking get of
the coordination service, a transfer to a device) unwinds through C++ frames that
catch everything, and the process aborts ("FATAL: exception not rethrown",
SIGABRT) instead of exiting with its code. So every object that runs such a
thread registers here, and at exit (``atexit``) each one is asked to let its
thread go and to wait for it briefly; its waits are sliced so that they notice.
"""

from __future__ import annotations

import atexit
import weakref
from typing import Any, Protocol


class StopsAtExit(Protocol):
    def stop_at_exit(self) -> None:
        """Lets the background thread go and waits for it a few seconds at most."""


_live: weakref.WeakSet[Any] = weakref.WeakSet()


def register(owner: StopsAtExit) -> None:
    """``owner.stop_at_exit()`` runs at interpreter exit if ``owner`` is still alive then."""
    _live.add(owner)


@atexit.register
def _stop_all() -> None:
    for owner in list(_live):
        try:
            owner.stop_at_exit()
        except Exception:  # noqa: BLE001 - interpreter shutdown: best effort for every owner
            pass
