"""Settings: a handful of ``TPS_*`` environment variables, validated at import.

- ``TPS_RUN_EAGERLY`` (``0``/``1``): start with ``run_functions_eagerly(True)``.
- ``TPS_MAX_IN_FLIGHT`` (int >= 1): programs allowed in flight before ``run``
  waits (default 8 on several CPU devices, else 32; it waits once every limit//2
  calls, on the newest of the oldest half). XLA's CPU
  collectives deadlock when many programs with collectives are queued.
- ``TPS_EAGER_TIMEOUT`` (seconds > 0): how long a replica thread of the eager
  path waits for the others at a collective before raising
  ``DeadlineExceededError`` (default 300).
- ``TPS_MAX_UNROLLED_PULLS`` (int >= 1): how many batches one ``tps.function``
  call may pull from one iterator (a Python loop inside is unrolled into one
  program; default 256).
"""

from __future__ import annotations

import os
import threading

from tpustrategy._src import activity

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in _TRUE:
        return True
    if raw.strip().lower() in _FALSE:
        return False
    raise ValueError(
        f"Environment variable {name}={raw!r} is not a boolean. "
        f"Valid values: {', '.join(_TRUE + _FALSE[:-1])}."
    )


def _env_number(name: str, default: float | None, cast: type, minimum: float) -> float | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = cast(raw)
    except ValueError:
        raise ValueError(
            f"Environment variable {name}={raw!r} must be a {cast.__name__} >= {minimum}."
        ) from None
    if value < minimum:
        raise ValueError(f"Environment variable {name}={raw!r} must be >= {minimum}.")
    return value


_lock = threading.Lock()
_run_eagerly: bool = _env_bool("TPS_RUN_EAGERLY", False)
if _run_eagerly:
    activity.enter()  # the fast paths of ``run`` / ``tps.function`` check ``activity.ANY`` first
MAX_IN_FLIGHT: int | None = _env_number("TPS_MAX_IN_FLIGHT", None, int, 1)  # type: ignore[assignment]
EAGER_TIMEOUT: float = _env_number("TPS_EAGER_TIMEOUT", 300.0, float, 0.001)  # type: ignore[assignment]
MAX_UNROLLED_PULLS: int = _env_number("TPS_MAX_UNROLLED_PULLS", 256, int, 1)  # type: ignore[assignment]


def run_functions_eagerly(run_eagerly: bool) -> None:
    """Runs replica functions eagerly, one Python thread per replica.

    The eager path is for debugging (print, breakpoints, NumPy inside the
    replica function); ``run`` also takes it by itself, with a warning, for a replica
    function that cannot be compiled (Python control flow on per-replica values, or
    ragged inputs the ragged back end cannot cut).

    Args:
      run_eagerly: True to force the eager path for every ``strategy.run``.

    Raises:
      TypeError: if ``run_eagerly`` is not a bool.
    """
    global _run_eagerly
    if not isinstance(run_eagerly, bool):
        raise TypeError(
            f"run_functions_eagerly(run_eagerly=...) expects a bool. Received: {run_eagerly!r}."
        )
    with _lock:
        if run_eagerly != _run_eagerly:
            (activity.enter if run_eagerly else activity.leave)()
        _run_eagerly = run_eagerly


def functions_run_eagerly() -> bool:
    """Returns whether ``run`` is forced onto the eager path."""
    return _run_eagerly
