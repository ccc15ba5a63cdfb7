"""Running concrete work while a function is being traced.

JAX's trace state is per thread: on the tracing thread every array operation would be
traced. Work that needs concrete values in the middle of a trace (pulling a batch from
an iterator, evaluating a host value a multi-host function closes over) runs on a
helper thread, and its exception is re-raised on the tracing thread.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


def call(fn: Callable[[], Any], name: str) -> Any:
    """``fn()`` on a helper thread, outside any trace; its result, or its exception re-raised."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised on the tracing thread
            box["error"] = e

    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
