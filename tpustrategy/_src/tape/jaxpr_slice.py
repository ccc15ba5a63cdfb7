"""JAX internals behind ``tps.GradientTape``: the recorded graph of the trace being built.

While ``jax.make_jaxpr`` / ``jax.jit`` traces a function, every traced value
(a ``DynamicJaxprTracer``) knows the equation that produced it (``parent``),
and each equation its input tracers. ``slice_function`` walks that graph back
from a target to the sources and returns a Python function that recomputes
the target from new source values by re-binding the same primitives — a
function JAX can differentiate (``jax.vjp``), emitted into the same trace.

Public JAX has no way to differentiate a value after it was computed
(``jax.vjp`` needs the function up front), which TensorFlow's tape does; this
module is the one place that reads JAX's tracing internals for it.
``check()`` fails loudly when a name it relies on moves (its test runs it).
The names, all from ``jax._src.interpreters.partial_eval`` (JAX 0.10.x):
``DynamicJaxprTracer`` (``.parent``, ``.val``, ``._trace``), its
``TracingEqn`` (``in_tracers``, ``outvars``, ``primitive``, ``params``,
``ctx``), ``Primitive.get_bind_params`` (params in, params out) and ``Primitive.multiple_results``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax._src.interpreters import partial_eval as _pe

DynamicJaxprTracer = _pe.DynamicJaxprTracer
_EQN_FIELDS = ("in_tracers", "outvars", "primitive", "params", "ctx")


def check() -> None:
    """Raises ImportError when a JAX internal this module uses is missing."""
    for name in ("DynamicJaxprTracer", "TracingEqn"):
        if not hasattr(_pe, name):
            raise ImportError(f"tps.GradientTape needs jax._src.interpreters.partial_eval.{name}; this "
                              f"JAX ({jax.__version__}) has none.\nFix: install jax>=0.10.2,<0.11.")
    slots = set(getattr(_pe.DynamicJaxprTracer, "__slots__", ()))
    missing = [s for s in ("val", "parent") if s not in slots]
    eqn_fields = set(getattr(_pe.TracingEqn, "__annotations__", {}))
    missing += [f for f in _EQN_FIELDS if f not in eqn_fields]
    if missing:
        raise ImportError(f"tps.GradientTape: JAX {jax.__version__} moved tracing internals {missing}.\n"
                          "Fix: install jax>=0.10.2,<0.11.")


def is_traced(x: Any) -> bool:
    return isinstance(x, DynamicJaxprTracer)


def same_trace(a: Any, b: Any) -> bool:
    return is_traced(a) and is_traced(b) and a._trace is b._trace


def slice_function(targets: Sequence[Any], sources: Sequence[Any]) -> tuple[Callable[..., list[Any]], list[bool]]:
    """A function ``f(*source_values) -> targets`` recomputing the targets from the sources.

    Returns:
      ``(f, connected)``: ``connected[i]`` says whether any target depends on
      source ``i``. Values the targets use that do not depend on a source are
      closed over as they are (tracers of the same trace).
    """
    source_ids = {id(s.val): i for i, s in enumerate(sources)}
    depends: dict[int, bool] = {}  # id(eqn) -> whether it depends on a source
    reached: dict[int, set[int]] = {}  # id(eqn) -> sources it depends on
    order: list[Any] = []
    stack: list[tuple[Any, bool]] = []
    for t in targets:
        if is_traced(t) and t.parent is not None:
            stack.append((t.parent, False))
    while stack:  # iterative post-order DFS over the producing equations
        eqn, expanded = stack.pop()
        key = id(eqn)
        if key in depends and not expanded:
            continue
        if not expanded:
            depends[key] = False
            stack.append((eqn, True))
            for t in eqn.in_tracers:
                if id(t.val) not in source_ids and t.parent is not None and id(t.parent) not in depends:
                    stack.append((t.parent, False))
            continue
        found: set[int] = set()
        for t in eqn.in_tracers:
            if id(t.val) in source_ids:
                found.add(source_ids[id(t.val)])
            elif t.parent is not None:
                found |= reached.get(id(t.parent), set())
        reached[key] = found
        depends[key] = bool(found)
        if found:
            order.append(eqn)
    connected_set: set[int] = set()
    for t in targets:
        if not is_traced(t):
            continue
        if id(t.val) in source_ids:
            connected_set.add(source_ids[id(t.val)])
        elif t.parent is not None:
            connected_set |= reached.get(id(t.parent), set())

    def replay(*values: Any) -> list[Any]:
        env: dict[int, Any] = {id(s.val): v for s, v in zip(sources, values)}

        def read(t: Any) -> Any:
            return env.get(id(t.val), t)

        for eqn in order:
            bind_params = eqn.primitive.get_bind_params(eqn.params)
            with eqn.ctx.manager:
                out = eqn.primitive.bind(*map(read, eqn.in_tracers), **bind_params)
            outs = out if eqn.primitive.multiple_results else [out]
            for var, value in zip(eqn.outvars, outs):
                env[id(var)] = value
        return [read(t) if is_traced(t) else t for t in targets]

    return replay, [i in connected_set for i in range(len(sources))]
