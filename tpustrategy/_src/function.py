"""``tps.function``: a cross-replica step compiled into one XLA program.

The ``tf.function`` role, built on the execution core: the function is traced
(``execution.trace.CrossView``) once per input signature; inside it
``strategy.run`` (its own ``shard_map``, possibly ragged), ``strategy.reduce``,
variable reads and writes and ``next(iterator)`` of a distributed iterator are
all traced, so a call is one dispatch. A Python loop of k steps inside gives
TPU-style steps-per-execution: k steps per dispatch. Batches pulled from
iterators are inputs of the program (``execution.pulls``); a call pulls the
same number of batches before it dispatches, and batches of another shape (the
partial last batch) or an end of data at another point trace again.

Called while another trace is in progress — inside a replica function
(``strategy.run(tps.function(fn))``), inside another ``tps.function``, or on
the eager path — the function body runs inline, as ``tf.function`` inlines
nested functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from tpustrategy._src import config
from tpustrategy._src.activity import ANY
from tpustrategy._src.context import contracts
from tpustrategy._src.context import stack as context
from tpustrategy._src.execution.cross import CrossFunction
from tpustrategy._src.execution.tracebacks import hide_library_frames
from tpustrategy._src.variables import frames


def _in_trace_or_replica() -> bool:
    if frames.current() is not None:
        return True
    entry = context.current_entry()
    return entry is not None and entry.replica_context is not None and not contracts.is_default(entry.replica_context)


class Function:
    """A compiled cross-replica function (see ``function``): runs inline inside another trace,
    a replica function or the eager path; otherwise ``execution.cross.CrossFunction`` runs it."""

    def __init__(self, fn: Callable[..., Any]):
        self._fn = fn
        self._compiled = CrossFunction(fn)
        self._fast_cache = self._compiled.fast_cache
        functools.update_wrapper(self, fn)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self.__call__, obj)

    @property
    def python_function(self) -> Callable[..., Any]:
        """The wrapped Python function (``tf.function``'s attribute)."""
        return self._fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841 - pytest's and IPython's marker
        try:
            if ANY and (config.functions_run_eagerly() or _in_trace_or_replica()) or self._compiled.uncompiled:
                return self._fn(*args, **kwargs)
            if not kwargs:
                # ``FastCache.call`` inline (a frame less on every step): the last hit's guard
                # passes the arguments -> its program's generated call.
                guarded = self._fast_cache.last_hit
                if guarded is not None and guarded[0] is self._compiled:
                    arrays = guarded[1](args, guarded[3])
                    if arrays is not None:
                        return guarded[2].fast(arrays)
            return self._compiled.call(args, kwargs)
        except Exception as e:  # library frames left out (``execution.tracebacks``)
            hide_library_frames(e)
            raise


def function(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Compiles a cross-replica step into one XLA program (``tf.function``).

    Args:
      fn: the function; usable as ``@tps.function`` or ``@tps.function(...)``.
      **options: accepted for compatibility (``jit_compile``, ``input_signature``,
        ``reduce_retracing``, ``autograph``); the program is always compiled by XLA.

    Returns:
      A callable with the same signature; each call is one dispatch.

    Example:
      >>> @tps.function
      ... def train(iterator):
      ...     for _ in range(10):          # 10 steps per dispatch
      ...         loss = strategy.run(step, (next(iterator),))
      ...     return strategy.reduce("MEAN", loss, axis=None)
    """
    signature = options.get("input_signature")
    if signature is not None and not isinstance(signature, (list, tuple)):
        raise TypeError(
            f"input_signature must be either a tuple or a list, got {type(signature)}.\n(tps.function: "
            f"Received: input_signature={signature!r:.60}.) Fix: pass a list of specs, e.g. "
            "[jax.ShapeDtypeStruct((None, 4), 'float32')], or leave it out (tps.function traces per "
            "input signature anyway)."
        )
    if fn is None:
        return lambda f: function(f, **options)
    if not callable(fn):
        raise TypeError(
            f"tps.function: `fn` must be a callable. Received: fn={fn!r:.60}.\nFix: decorate the "
            "function itself (@tps.function over a def), or pass the function, not its result."
        )
    return Function(fn)
