"""JAX internals behind ``tps.GradientTape``: the recorded graph of the trace being built.

While ``jax.make_jaxpr`` / ``jax.jit`` traces a function, every traced value
(a ``DynamicJaxprTracer``) knows the equation that produced it (``parent``),
and each equation its input tracers. ``slice_function`` walks that graph back
from a target to the sources and returns a Python function that recomputes
the target from new source values by re-binding the same primitives — a
function JAX can differentiate (``jax.vjp``), emitted into the same trace.

Public JAX has no way to differentiate a value after it was computed
(``jax.vjp`` needs the function up front), which TensorFlow's tape does; this
module reads JAX's tracing internals for it, through ``jax_shims.tracing`` (the
private imports, and ``check()``, which fails loudly when a name it relies on moves).
For the eager tape (``RecordTrace``, below) it also subclasses JAX's ``Trace`` and
``Tracer`` and implements the trace hooks ``process_primitive``,
``process_custom_jvp_call``, ``process_custom_vjp_call``, ``process_call``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np

from tpustrategy._src.jax_shims.tracing import core as _core
from tpustrategy._src.jax_shims.tracing import partial_eval as _pe

DynamicJaxprTracer = _pe.DynamicJaxprTracer


def position() -> tuple[Any, int] | None:
    """``(trace, number of equations so far)`` of the jaxpr being traced now, or None outside a trace."""
    trace = _core.trace_ctx.trace
    if isinstance(trace, _pe.DynamicJaxprTrace):
        return trace, len(trace.frame.tracing_eqns)
    return None


def equations_between(trace: Any, start: int, end: int | None) -> list[Any]:
    """The live equations ``trace`` recorded between two positions."""
    out = []
    for e in trace.frame.tracing_eqns[start:end]:
        e = e() if isinstance(e, weakref.ReferenceType) else e
        if e is not None:
            out.append(e)
    return out


def made_by(x: Any, equations: set[int]) -> bool:
    """Whether traced value ``x`` is an output of one of ``equations`` (ids)."""
    return x.parent is not None and id(x.parent) in equations


def is_traced(x: Any) -> bool:
    return isinstance(x, DynamicJaxprTracer)


def same_trace(a: Any, b: Any) -> bool:
    return is_traced(a) and is_traced(b) and a._trace is b._trace


def slice_function(targets: Sequence[Any], sources: Sequence[Any],
                   allowed: set[int] | None = None) -> tuple[Callable[..., list[Any]], list[bool]]:
    """A function ``f(*source_values) -> targets`` recomputing the targets from the sources.

    ``allowed`` (ids of equations) limits the walk to what the tape recorded: a value
    made by any other equation is a constant (TensorFlow records only while recording).

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
    def walk(t: Any) -> bool:
        return t.parent is not None and (allowed is None or id(t.parent) in allowed)

    for t in targets:
        if is_traced(t) and walk(t):
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
                if id(t.val) not in source_ids and walk(t) and id(t.parent) not in depends:
                    stack.append((t.parent, False))
            continue
        found: set[int] = set()
        for t in eqn.in_tracers:
            if id(t.val) in source_ids:
                found.add(source_ids[id(t.val)])
            elif walk(t):
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
        elif walk(t):
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


# The eager tape ------------------------------------------------------------------------------
# Outside any trace there is no graph to slice, so an eager ``GradientTape`` installs a JAX
# trace of its own while its ``with`` block runs (as ``jax.jvp`` installs a JVP trace):
# every primitive is computed at once on concrete values, as in eager JAX, and when an
# input depends on a watched value the equation is kept, so ``gradient`` can replay the
# recorded equations from the sources as a function and differentiate it with ``jax.vjp``.


class _Node:
    """One recorded equation: ``outputs = primitive.bind(*inputs, **params)``."""

    __slots__ = ("primitive", "params", "inputs", "outputs")

    def __init__(self, primitive: Any, params: dict[str, Any], inputs: list[Any]):
        self.primitive = primitive
        self.params = params
        self.inputs = inputs
        self.outputs: list[Any] = []


def concrete(x: Any) -> Any:
    """The value a recorded tracer stands for (the innermost one, for nested tapes)."""
    while isinstance(x, RecordTracer):
        x = x.val
    return x


class RecordTracer(_core.Tracer):
    """A value computed while an eager tape records: the value itself and the equation that made it."""

    __slots__ = ("val", "node")

    def __init__(self, trace: RecordTrace, val: Any, node: _Node | None):
        super().__init__(trace, _core.typeof(val))
        self.val = val
        self.node = node

    def full_lower(self) -> Any:
        # Outside the recording trace (after the `with` block) the value is used as it is.
        return self.val

    def to_concrete_value(self) -> Any:
        value = concrete(self)
        return None if isinstance(value, _core.Tracer) else value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(concrete(self), dtype=dtype)

    def __float__(self) -> float:
        return float(concrete(self))

    def __int__(self) -> int:
        return int(concrete(self))

    def __bool__(self) -> bool:
        return bool(concrete(self))

    def __complex__(self) -> complex:
        return complex(concrete(self))

    def __index__(self) -> int:
        return concrete(self).__index__()

    def __format__(self, spec: str) -> str:
        return format(concrete(self), spec)

    def __repr__(self) -> str:
        return repr(concrete(self))

    def __str__(self) -> str:
        return str(concrete(self))

    def tolist(self) -> Any:
        return concrete(self).tolist()

    def item(self, *args: Any) -> Any:
        return concrete(self).item(*args)

    def block_until_ready(self) -> RecordTracer:
        jax.block_until_ready(concrete(self))
        return self

    @property
    def sharding(self) -> Any:
        return concrete(self).sharding

    @property
    def device(self) -> Any:
        return concrete(self).device


class RecordTrace(_core.Trace):
    """The eager tape's trace: computes every primitive now and records those that depend on a source."""

    __slots__ = ("parent", "recording", "substitutes")

    def __init__(self, parent: Any):
        super().__init__()
        self.parent = parent
        self.recording = True
        self.substitutes: dict[int, tuple[Any, RecordTracer]] = {}  # id(watched array) -> (it, source)

    def source(self, value: Any) -> RecordTracer:
        """A new source: a value ``gradient`` can differentiate with respect to."""
        return RecordTracer(self, value, None)

    def watch(self, value: Any) -> RecordTracer:
        """``value`` (an array computed outside the tape) becomes a source wherever it is used."""
        if isinstance(value, RecordTracer) and value._trace is self:
            return value
        known = self.substitutes.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        tracer = self.source(value)
        self.substitutes[id(value)] = (value, tracer)
        return tracer

    def lookup(self, value: Any) -> RecordTracer | None:
        if isinstance(value, RecordTracer) and value._trace is self:
            return value
        known = self.substitutes.get(id(value))
        return known[1] if known is not None and known[0] is value else None

    def _inputs(self, args: Sequence[Any]) -> tuple[list[Any], bool]:
        ins, any_recorded = [], False
        for a in args:
            found = self.lookup(a) if self.recording else None
            if found is None and isinstance(a, RecordTracer) and a._trace is self:
                a = a.val
            elif found is not None:
                a, any_recorded = found, True
            ins.append(a)
        return ins, any_recorded

    def stage_value(self, val: Any) -> Any:
        # A constant lifted into this trace (``jnp.asarray(numpy_array)``) becomes what it
        # would outside the tape: the parent trace's (an eager device array), never a literal.
        with _core.set_current_trace(self.parent):
            return self.parent.stage_value(val)

    def process_primitive(self, primitive: Any, args: Sequence[Any], params: dict[str, Any], /) -> Any:
        ins, recorded = self._inputs(args)
        values = [a.val if isinstance(a, RecordTracer) and a._trace is self else a for a in ins]
        with _core.set_current_trace(self.parent):
            out = primitive.bind(*values, **params)
        if not recorded:
            return out
        node = _Node(primitive, params, ins)
        outs = out if primitive.multiple_results else [out]
        node.outputs = [RecordTracer(self, o, node) for o in outs]
        return node.outputs if primitive.multiple_results else node.outputs[0]

    def process_call(self, primitive: Any, f: Any, tracers: Sequence[Any], params: dict[str, Any], /) -> Any:
        with _core.set_current_trace(self):
            return f.call_wrapped(*tracers)

    def process_custom_jvp_call(self, primitive: Any, fun: Any, jvp: Any, tracers: Sequence[Any], /,
                                *, symbolic_zeros: Any) -> Any:
        # Recorded as one equation, so the replay under jax.vjp applies the custom rule.
        return self.process_primitive(primitive, tracers, {"subfuns": (fun, jvp), "symbolic_zeros": symbolic_zeros})

    def process_custom_vjp_call(self, primitive: Any, fun: Any, fwd: Any, bwd: Any, tracers: Sequence[Any], /,
                                *, out_trees: Any, symbolic_zeros: Any) -> Any:
        return self.process_primitive(primitive, tracers, {"subfuns": (fun, fwd, bwd), "out_trees": out_trees,
                                                           "symbolic_zeros": symbolic_zeros})


def current_trace() -> Any:
    return _core.trace_ctx.trace


def set_trace(trace: Any) -> None:
    """Makes ``trace`` the current JAX trace of this thread (the eager tape's ``with`` block)."""
    _core.trace_ctx.set_trace(trace)


def is_eager() -> bool:
    """True outside any JAX transformation (or inside an eager tape's ``with`` block only)."""
    trace = _core.trace_ctx.trace
    return isinstance(trace, (_core.EvalTrace, RecordTrace))


def record_slice(targets: Sequence[Any], sources: Sequence[RecordTracer]) -> tuple[Callable[..., list[Any]], list[bool]]:
    """``slice_function`` for an eager tape: replays the recorded equations from ``sources``."""
    source_ids = {id(s): i for i, s in enumerate(sources)}
    reached: dict[int, set[int]] = {}  # id(node) -> sources it depends on
    order: list[_Node] = []
    stack: list[tuple[_Node, bool]] = []

    def node_of(t: Any) -> _Node | None:
        return t.node if isinstance(t, RecordTracer) and id(t) not in source_ids else None

    for t in targets:
        if node_of(t) is not None:
            stack.append((node_of(t), False))
    while stack:
        node, expanded = stack.pop()
        key = id(node)
        if not expanded:
            if key in reached:
                continue
            reached[key] = set()
            stack.append((node, True))
            stack.extend((node_of(a), False) for a in node.inputs
                         if node_of(a) is not None and id(node_of(a)) not in reached)
            continue
        found: set[int] = set()
        for a in node.inputs:
            if id(a) in source_ids:
                found.add(source_ids[id(a)])
            elif node_of(a) is not None:
                found |= reached.get(id(node_of(a)), set())
        reached[key] = found
        if found:
            order.append(node)
    connected: set[int] = set()
    for t in targets:
        if id(t) in source_ids:
            connected.add(source_ids[id(t)])
        elif node_of(t) is not None:
            connected |= reached.get(id(node_of(t)), set())

    def replay(*values: Any) -> list[Any]:
        env: dict[int, Any] = {id(s): v for s, v in zip(sources, values)}

        def read(a: Any) -> Any:
            if id(a) in env:
                return env[id(a)]
            return a.val if isinstance(a, RecordTracer) else a

        for node in order:
            out = node.primitive.bind(*map(read, node.inputs), **node.params)
            outs = out if node.primitive.multiple_results else [out]
            for tracer, value in zip(node.outputs, outs):
                env[id(tracer)] = value
        return [read(t) for t in targets]

    return replay, [i in connected for i in range(len(sources))]
