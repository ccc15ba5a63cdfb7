"""Work that must finish when the main program ends, before the interpreter starts to finalize.

Once finalization begins, Python 3.12 refuses to start threads ("can't create new
thread at interpreter shutdown"), and on every version ``concurrent.futures``
stops taking work; ``atexit`` handlers and even ``threading``'s own pre-shutdown
hooks run after that point on 3.12. Work that needs threads — an asynchronous
checkpoint whose files orbax is still writing — must therefore run while the
main program is still running: when its outermost frame (the ``__main__``
module's code, whether run as a file, ``-c`` or ``-m``) returns or unwinds.

On Python 3.12 and newer, `arm` asks ``sys.monitoring`` (PEP 669) for that
frame's return (a local event on that one code object: no cost elsewhere) and
for unwinding (a global event, on only while ``busy()`` says there is work:
its callback turns it off otherwise). Everywhere, ``threading``'s pre-shutdown
hook (``threading._register_atexit``, the one ``concurrent.futures`` uses) is the
fallback: it still comes before ``concurrent.futures`` stops, and on 3.11 and
3.13 threads can still start there. The callback must be idempotent: it may run
from both.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from collections.abc import Callable
from types import CodeType
from typing import Any

_log = logging.getLogger("tpustrategy")
_LOCK = threading.RLock()
_TOOL_NAME = "tpustrategy.before_exit"
# sys.monitoring's ids 0-2 and 5 are by convention the debugger's, coverage's, the profiler's
# and the optimizer's; 3 and 4 are free for others.
_TOOL_IDS = (3, 4)


class _State:
    def __init__(self) -> None:
        self.callbacks: list[tuple[Callable[[], None], Callable[[], bool]]] = []
        self.main_code: CodeType | None = None
        self.tool: int | None = None
        self.fallback = False


_state = _State()


def _run(reason: str) -> None:
    for callback, busy in reversed(list(_state.callbacks)):
        if not busy():
            continue
        try:
            callback()
        except BaseException as e:  # the program is ending: say so, never raise from here
            _log.error("tpustrategy: work left for the end of the program (%s) failed: %s", reason, e)


def _main_module_code() -> CodeType | None:
    """The code object of the ``__main__`` module's outermost frame on the main thread."""
    main = sys.modules.get("__main__")
    if main is None:
        return None
    if threading.current_thread() is threading.main_thread():
        frame = sys._getframe()
    else:
        frame = sys._current_frames().get(threading.main_thread().ident or -1)
    found = None
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is vars(main):
            found = frame.f_code
        frame = frame.f_back
    return found


def _any_busy() -> bool:
    # Runs inside the unwind callback, which may fire in a frame that holds any lock: no locks
    # here, and ``busy`` functions take none either (copying a list is atomic).
    for _, busy in list(_state.callbacks):
        if busy():
            return True
    return False


def _on_return(code: CodeType, offset: int, value: Any) -> Any:
    if code is _state.main_code:
        _run("the main module returned")
    return None


def _on_unwind(code: CodeType, offset: int, exception: BaseException) -> Any:
    if code is _state.main_code:
        _run(f"the main module raised {type(exception).__name__}")
    elif not _any_busy() and _state.tool is not None:
        sys.monitoring.set_events(_state.tool, 0)  # nothing left to wait for: stop listening
    return None


def _arm_monitoring() -> None:
    monitoring = getattr(sys, "monitoring", None)
    if monitoring is None:
        return
    code = _main_module_code()
    if code is None:
        return
    if _state.tool is None:
        for tool in _TOOL_IDS:
            if monitoring.get_tool(tool) is None:
                monitoring.use_tool_id(tool, _TOOL_NAME)
                monitoring.register_callback(tool, monitoring.events.PY_RETURN, _on_return)
                monitoring.register_callback(tool, monitoring.events.PY_UNWIND, _on_unwind)
                _state.tool = tool
                break
        else:
            return  # both ids taken by other tools: the fallback hook alone
    if _state.main_code is not code:
        _state.main_code = code
        monitoring.set_local_events(_state.tool, code, monitoring.events.PY_RETURN)
    monitoring.set_events(_state.tool, monitoring.events.PY_UNWIND)


def _arm_fallback() -> None:
    if _state.fallback:
        return
    import concurrent.futures.thread  # noqa: F401  (its hook registered first, so it runs after ours)

    hook = getattr(threading, "_register_atexit", None)
    try:
        if hook is not None:
            hook(lambda: _run("interpreter shutdown"))
        else:  # pragma: no cover - every supported Python has the hook
            atexit.register(lambda: _run("interpreter exit"))
    except RuntimeError:  # already shutting down: nothing more can be arranged
        return
    _state.fallback = True


def arm(callback: Callable[[], None], busy: Callable[[], bool]) -> None:
    """Runs ``callback()`` when the main program ends if ``busy()`` is then true.

    Call it whenever work starts that the end of the program must wait for;
    arming again is cheap. ``callback`` must be idempotent and must not raise
    (what it raises is logged). ``busy`` is asked while any exception unwinds
    in any thread, possibly in a frame that holds a lock: it must be quick and
    take no lock.
    """
    with _LOCK:
        if not any(c is callback for c, _ in _state.callbacks):
            _state.callbacks.append((callback, busy))
        _arm_fallback()
        _arm_monitoring()


def monitored_code() -> CodeType | None:
    """The main module's code being watched (None where ``sys.monitoring`` is not used)."""
    return _state.main_code if _state.tool is not None else None
