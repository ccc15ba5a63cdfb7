"""Library frames left out of the tracebacks of errors raised through ``strategy.run`` and
``tps.function`` (as JAX's and Grain's traceback filters do).

``user_boundary(fn)`` wraps an entry point (an entry on the per-call path calls
``hide_library_frames`` in its own ``except`` instead, saving the wrapper's call): an
exception raised below it keeps its type,
message and chained causes, but its traceback keeps only frames outside
``tpustrategy/_src`` (the user's code, and JAX's own boundary frames already filtered by
JAX), so the user's line is the last one. ``JAX_TRACEBACK_FILTERING=off`` (JAX's switch)
keeps every frame. No private JAX name: the traceback is rebuilt with
``types.TracebackType``.
"""

from __future__ import annotations

import functools
import os
import sys
import types
from collections.abc import Callable
from typing import Any, TypeVar

_SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tpustrategy/_src
_F = TypeVar("_F", bound=Callable[..., Any])


def _is_library(frame: types.FrameType) -> bool:
    return frame.f_code.co_filename.startswith(_SRC)


def filter_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """``tb`` without the frames of files under ``tpustrategy/_src``."""
    kept: list[types.TracebackType] = []
    while tb is not None:
        if not _is_library(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for entry in reversed(kept):
        out = types.TracebackType(out, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return out


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning issued by the caller point at the first frame
    outside ``tpustrategy/_src`` (the user's line), however deep the library's call chain is."""
    level, frame = 1, sys._getframe(1)
    while frame is not None and _is_library(frame):
        level += 1
        frame = frame.f_back  # type: ignore[assignment]
    return level


def hide_library_frames(e: BaseException) -> None:
    """Leaves the library's frames out of ``e``'s traceback (unless ``JAX_TRACEBACK_FILTERING=off``);
    an entry point calls it in its ``except`` block, then re-raises."""
    if os.environ.get("JAX_TRACEBACK_FILTERING", "auto") != "off":
        e.with_traceback(filter_traceback(e.__traceback__))


def user_boundary(fn: _F) -> _F:
    """``fn`` with library frames left out of the tracebacks of the errors it raises."""

    @functools.wraps(fn)
    def boundary(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841 - pytest's and IPython's marker
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            hide_library_frames(e)
            raise

    return boundary  # type: ignore[return-value]
