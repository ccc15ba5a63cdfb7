"""How a process of a job ends: its excepthook, exit barrier, main-thread signal and exit codes.

``end_process`` prints the named error (with where the main thread was, when the
monitor thread forces the end) and ends the process with the fault's exit code;
``deliver`` has the main thread raise a fault's exception. ``health.Monitor.install``
puts these in place:

- ``sys.excepthook``: an uncaught exception caused by a peer's fault (or a raw
  JAX runtime error that ``health`` explains) prints the named ``tps.errors``
  exception and ends the process with the fault's code (75 or 76); any other
  uncaught exception is this process's own failure: it tells its peers (they
  end with code 75 naming it), prints the traceback and exits with code 1
  (130 for KeyboardInterrupt).
- ``atexit``: at a normal end every process says goodbye and waits at one
  barrier for the others (``shutdown_timeout``); a process still waiting when
  it expires ends with ``DeadlineExceededError`` naming the ones that did not
  finish (76), and the others end with ``UnavailableError`` naming it.
- ``SIGUSR1`` (only if nothing else handles it): how the monitor thread raises
  a fault's exception in the main thread.
- ``sys.exit`` is wrapped (it behaves the same) to remember the code asked for:
  a program that catches a fault's exception and calls ``sys.exit(42)`` (as
  ``PreemptionCheckpointHandler`` does) exits with 42, not the fault's code.

Every such exit uses ``os._exit`` after flushing the standard streams: JAX's own
shutdown would wait at its shutdown barrier for the lost peer and then abort.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any, NoReturn

from tpustrategy._src.cluster import current, diagnosis, faults
from tpustrategy._src.cluster.faults import Fault
from tpustrategy._src.errors import DeadlineExceededError, UnavailableError

EXIT_BARRIER = "tpustrategy/exit"
SIGNAL = signal.SIGUSR1
exit_lock = threading.Lock()
_pending: Fault | None = None  # a fault found before any monitor exists (start-up)
_previous_excepthook = sys.excepthook
_original_sys_exit = sys.exit
_requested: Any = None  # the argument of the last sys.exit() call


def _sys_exit(status: Any = None) -> NoReturn:
    global _requested
    _requested = status
    _original_sys_exit(status)


def requested_exit_code() -> int | None:
    """The code of the last ``sys.exit(n)`` with a non-zero int (else None)."""
    return _requested if isinstance(_requested, int) and _requested != 0 else None


# The monitor's own modules: a signal that lands while the main thread runs them is
# already being handled there (the excepthook, translate, the exit barrier).
_HERE = os.path.dirname(os.path.abspath(__file__))
_OUR_FILES = {os.path.join(_HERE, name)
              for name in ("exits.py", "health.py", "diagnosis.py", "links.py")}


def install() -> bool:
    """Puts the hooks in place; returns whether the main-thread signal handler is ours."""
    if sys.excepthook is not _excepthook:
        sys.excepthook = _excepthook
    if sys.exit is _original_sys_exit:
        sys.exit = _sys_exit
    atexit.unregister(_at_exit)
    atexit.register(_at_exit)
    if threading.current_thread() is not threading.main_thread():
        return False
    try:
        if signal.getsignal(SIGNAL) in (signal.SIG_DFL, None, _on_signal):
            signal.signal(SIGNAL, _on_signal)
            return True
    except (ValueError, OSError):
        pass
    return False


def deliver(monitor: Any) -> None:
    """Has the main thread raise ``monitor.fault``'s exception (after ``monitor.report``).

    On the main thread (it found the fault and is raising it) this only records that;
    from another thread it sends ``SIGNAL`` to the main thread, if the handler is ours.
    """
    if threading.current_thread() is threading.main_thread():
        monitor.delivered = True  # the main thread itself found it and is raising it
    elif monitor.signal_installed and not monitor.exiting:
        try:
            signal.pthread_kill(threading.main_thread().ident or 0, SIGNAL)
        except (OSError, ValueError):
            pass


def end_process(monitor: Any, fault: Fault | None, *, exception: BaseException | None = None,
                printed: bool = False, code: int | None = None, forced: bool = False) -> None:
    """Prints the named error and ends the process now (never returns).

    Args:
      monitor: the process's ``health.Monitor``.
      fault: the fault the process ends for (None: its own failure, ``code``).
      exception: the exception to print (else the fault's own).
      printed: the exception was printed already (print only the marker line).
      code: the exit code (default: the fault's, else 1).
      forced: the monitor thread ends the process (the grace passed): also print where
        the main thread was.
    """
    if not exit_lock.acquire(blocking=not monitor.links.on_thread()):
        return  # another thread is already ending the process
    monitor.exiting = True
    code = fault.exit_code if code is None and fault is not None else (code or 1)
    parts: list[str] = []
    if forced:
        parts.append(f"tpustrategy: process {monitor.task} of {monitor.num_processes} is "
                     f"ending with exit code {code}; its main thread was here:\n")
        frame = sys._current_frames().get(threading.main_thread().ident or 0)
        if frame is not None:
            parts.extend(traceback.format_stack(frame))
    if not printed:
        error = exception if exception is not None else (
            fault.exception() if fault is not None else None)
        if error is not None:
            parts.extend(traceback.format_exception(error) if error.__traceback__
                         or error.__cause__ else traceback.format_exception_only(error))
    if fault is not None:
        parts.append(fault.marker(code) + "\n")
    write_and_exit(monitor, "".join(parts), code)


def write_and_exit(monitor: Any, text: str, code: int) -> None:
    try:
        sys.stdout.flush()
    except Exception:  # noqa: BLE001
        pass
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        os.write(2, text.encode(errors="replace"))
    if monitor is not None:
        monitor.links.close()
    os._exit(code)


def _own_exit_code(error: BaseException) -> int:
    if isinstance(error, KeyboardInterrupt):
        return 130
    if isinstance(error, UnavailableError):
        return faults.EXIT_UNAVAILABLE
    if isinstance(error, DeadlineExceededError):
        return faults.EXIT_DEADLINE_EXCEEDED
    return 1


def arm(fault: Fault, exit_at: float) -> None:
    """Ends the process at ``exit_at`` (monotonic) for a fault found before a monitor exists.

    An uncaught exception ends it at once with the fault's exit code.
    """
    global _pending
    _pending = fault
    sys.excepthook = _excepthook
    timer = threading.Timer(max(0.0, exit_at - time.monotonic()), _end_pending, (True,))
    timer.daemon = True
    timer.start()


def _end_pending(forced: bool, error: BaseException | None = None) -> None:
    fault = _pending
    if fault is None or not exit_lock.acquire(blocking=not forced):
        return
    error = error if error is not None else fault.exception()
    parts = (traceback.format_exception(error) if error.__traceback__
             else traceback.format_exception_only(error))
    write_and_exit(None, "".join(parts) + fault.marker() + "\n", fault.exit_code)


def _excepthook(etype: type[BaseException], value: BaseException, tb: Any) -> None:
    monitor = current.get()
    if monitor is None and _pending is not None:
        _end_pending(False, value)
    if monitor is None or monitor.exiting:
        _previous_excepthook(etype, value, tb)
        return
    monitor.exiting = True
    fault = monitor.fault
    if fault is None and faults.is_runtime_error(value):
        kind = faults.classify(value)
        fault = monitor.explain(kind) if kind else None
    if fault is not None and monitor.task not in fault.culprits:
        named = value
        if not isinstance(value, (UnavailableError, DeadlineExceededError)):
            named = fault.exception()
            named.__cause__ = value
        end_process(monitor, fault, exception=named)
        return
    own = monitor.own_error(value)
    monitor.tell_peers(own)
    _previous_excepthook(etype, value, tb)
    end_process(monitor, own, printed=True, code=_own_exit_code(value))


def _on_signal(signum: int, frame: Any) -> None:
    monitor = current.get()
    if (monitor is None or monitor.fault is None or monitor.exiting or monitor.delivered
            or _in_our_files(frame)):
        return  # our own exit path (excepthook, translate, atexit) is already handling it
    monitor.delivered = True
    raise monitor.fault.exception()


def _in_our_files(frame: Any) -> bool:
    while frame is not None:
        if os.path.abspath(frame.f_code.co_filename) in _OUR_FILES:
            return True
        frame = frame.f_back
    return False


def _at_exit() -> None:
    monitor = current.get()
    if monitor is None or monitor.stopping:
        return
    if monitor.fault is not None:  # the program caught the fault's exception and returned
        end_process(monitor, monitor.fault, code=requested_exit_code())
    monitor.exiting = True
    monitor.say_bye()
    try:
        from tpustrategy._src.jax_shims import coordination

        client = coordination.client()
    except (ImportError, RuntimeError):  # JAX is gone (interpreter shutdown) or moved
        client = None
    if client is not None:
        # A process leaving with sys.exit(n != 0) is failing: peers that will never
        # reach the end should hear of it within heartbeat_timeout, not shutdown_timeout.
        wait = monitor.shutdown_timeout if requested_exit_code() is None else min(
            monitor.shutdown_timeout, monitor.timeout)
        try:
            client.wait_at_barrier(EXIT_BARRIER, int(wait * 1000))
        except Exception:  # noqa: BLE001 - a timed-out barrier is reported below
            code = requested_exit_code()
            if monitor.fault is not None:
                end_process(monitor, monitor.fault, code=code)
            late = monitor.not_finished() or [p for p in range(monitor.num_processes)
                                              if p != monitor.task]
            monitor.tell_peers(diagnosis.left_at_end(monitor.peers, monitor.task, code, wait))
            end_process(monitor, diagnosis.late_at_end(monitor.peers, monitor.task, late, code,
                                                       wait, monitor.shutdown_timeout),
                        code=code)
    monitor.stop()


def _after_fork_in_child() -> None:
    """A forked child (e.g. a data-loader worker) must not hold the parent's links open."""
    monitor = current.take()
    if monitor is None:
        return
    monitor.links.abandon()
    if sys.excepthook is _excepthook:
        sys.excepthook = _previous_excepthook
    if sys.exit is _sys_exit:
        sys.exit = _original_sys_exit


os.register_at_fork(after_in_child=_after_fork_in_child)
