"""JAX's tracing internals that ``tps.GradientTape`` reads (``tape/jaxpr_slice.py`` uses them).

Public JAX has no way to differentiate a value after it was computed (``jax.vjp``
needs the function up front), which TensorFlow's tape does; the tape therefore
reads the graph of the trace being built. This module is where those private
modules are imported, and ``check()`` fails loudly, naming the internal, when a
JAX release moves one (``tests/jax_shims/test_tracing.py`` runs it). The names:
from ``jax._src.interpreters.partial_eval`` (``partial_eval``) ``DynamicJaxprTracer``
(``.parent``, ``.val``, ``._trace``), ``TracingEqn`` (``in_tracers``, ``outvars``,
``primitive``, ``params``, ``ctx``), ``DynamicJaxprTrace.frame.tracing_eqns``,
``JaxprStackFrame``; from ``jax._src.core`` (``core``) the ``Trace`` / ``Tracer`` /
``EvalTrace`` classes, ``trace_ctx``, ``set_current_trace`` and ``typeof``.
"""

from __future__ import annotations

import jax
from jax._src import core
from jax._src.interpreters import partial_eval

from tpustrategy._src.jax_shims import supported

__all__ = ["check", "core", "partial_eval"]

_EQN_FIELDS = ("in_tracers", "outvars", "primitive", "params", "ctx")


def check() -> None:
    """Raises ImportError when a JAX internal the tape uses is missing."""
    for name in ("DynamicJaxprTracer", "TracingEqn"):
        if not hasattr(partial_eval, name):
            raise ImportError(f"tps.GradientTape needs jax._src.interpreters.partial_eval.{name}; this "
                              f"JAX ({jax.__version__}) has none.\n" + supported.FIX)
    for name in ("Trace", "Tracer", "EvalTrace", "trace_ctx", "set_current_trace", "typeof"):
        if not hasattr(core, name):
            raise ImportError(f"tps.GradientTape (eager) needs jax._src.core.{name}; this JAX ({jax.__version__}) "
                              "has none.\n" + supported.FIX)
    if not hasattr(partial_eval.JaxprStackFrame, "tracing_eqns") and "tracing_eqns" not in getattr(
            partial_eval.JaxprStackFrame, "__slots__", ()):
        raise ImportError(f"tps.GradientTape: JAX {jax.__version__} has no JaxprStackFrame.tracing_eqns.\n"
                          + supported.FIX)
    slots = set(getattr(partial_eval.DynamicJaxprTracer, "__slots__", ()))
    missing = [s for s in ("val", "parent") if s not in slots]
    eqn_fields = set(getattr(partial_eval.TracingEqn, "__annotations__", {}))
    missing += [f for f in _EQN_FIELDS if f not in eqn_fields]
    if missing:
        raise ImportError(f"tps.GradientTape: JAX {jax.__version__} moved tracing internals {missing}.\n"
                          + supported.FIX)
