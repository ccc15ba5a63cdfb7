"""The one tracer: a cross-replica computation as a jaxpr, with its state split out.

``strategy.run`` and ``tps.function`` both trace user code here, the way Flax
NNX's and Equinox's transforms do around ``jax.jit``: the inputs are
classified (``signature``), every variable the code reads becomes an input of
the program and every variable it writes an output (``variables.frames``),
every batch it pulls from an iterator becomes an input (``pulls``), and the
outputs are classified; the caller (``program``) splits the state out before
the call and merges the updates back after it. Variables and batches first
met during a trace are not inputs yet, so the trace is repeated until that
set settles (as ``tf.function`` traces again when it meets new variables).

Two views of the same machinery:

- the *replica* view (``strategy.run``): ``fn`` sees one replica's components,
  traced with JAX's axis environment (the replica axis bound, classic
  semantics: broadcast inputs are each replica's own copy, so ``jax.grad``
  gives per-replica gradients and the transpose of an all-reduce is the same
  all-reduce, as in TensorFlow);
- the *cross-replica* view (``tps.function``): ``fn`` sees whole distributed
  values (stacked ``[R, ...]`` or replicated tracers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax

from tpustrategy._src.context import stack as context
from tpustrategy._src.execution import outputs
from tpustrategy._src.execution import pulls as pulls_lib
from tpustrategy._src.execution.protocol import ReplicaStrategy
from tpustrategy._src.execution.signature import (
    Inputs,
    wrap_cross_input,
)
from tpustrategy._src.values import regroup
from tpustrategy._src.values.distributed import DistributedValues, Mirrored
from tpustrategy._src.values.leaf import LeafSpec
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS
from tpustrategy._src.variables import frames

_MAX_TRACES = 32


@dataclass
class Traced:
    """One settled trace."""

    closed: Any  # ClosedJaxpr: (inputs, variables, pulled batches) -> (outputs, written variables)
    out_treedef: Any
    out_kinds: list[outputs.OutKind]  # per output leaf (see the views' ``output``)
    variables: list[Any]
    written: list[Any]
    strategies: list[Any]  # strategies met while tracing (placement of the program)
    pull_log: pulls_lib.PullLog | None = None
    pull_layout: list[tuple[Any, int]] = field(default_factory=list)  # (source, batches) in input order
    pulled: dict[Any, list[Inputs]] = field(default_factory=dict)  # the batches of the tracing call
    one_shot: bool = False  # it initialises variables created while tracing: run it once, then retrace

    @property
    def num_dynamic_outputs(self) -> int:
        return sum(1 for k in self.out_kinds if not k.is_static)


@dataclass
class TraceState:
    """What repeated traces of one function share: its variables and created objects."""

    known_vars: list[Any] = field(default_factory=list)
    created: list[Any] = field(default_factory=list)
    sources: pulls_lib.Sources = field(default_factory=pulls_lib.Sources)


class ReplicaView:
    """``fn`` runs as one replica (``strategy.run``)."""

    level = "replica"

    def __init__(self, strategy: ReplicaStrategy, local_shapes: list[tuple[int, ...]] | None = None):
        self.strategy = strategy
        self.local_shapes = local_shapes  # ragged: this replica class's component shapes

    @property
    def axis_env(self) -> list[tuple[str, int]]:
        return [(REPLICA_AXIS, self.strategy.num_replicas_in_sync)]

    def in_avals(self, inputs: Inputs) -> list[Any]:
        avals = []
        for i, spec in enumerate(inputs.specs):
            shape = self.local_shapes[i] if self.local_shapes is not None else spec.local_shape
            avals.append(jax.ShapeDtypeStruct(shape, spec.dtype, weak_type=spec.weak_type))
        return avals

    def var_aval(self, var: Any) -> Any:
        return jax.ShapeDtypeStruct(var.shape, var.dtype)

    def make_input(self, spec: LeafSpec, leaf: Any, value: Any) -> Any:
        return value

    def call(self, fn: Any, args: Any, kwargs: Any) -> Any:
        from tpustrategy._src.replica.context import CompiledReplicaContext

        with context.push(self.strategy, CompiledReplicaContext(self.strategy)):
            return fn(*args, **kwargs)

    def output(self, leaf: Any) -> tuple[Any, Any] | None:
        if isinstance(leaf, jax.core.Tracer):
            return outputs.REPLICA, leaf
        if isinstance(leaf, DistributedValues) and leaf.replica_tracer is not None:
            return outputs.REPLICA, leaf.replica_tracer
        return None


class CrossView:
    """``fn`` runs once for all replicas (``tps.function``)."""

    level = "cross"
    axis_env: list[tuple[str, int]] = []
    strategy = None

    def in_avals(self, inputs: Inputs) -> list[Any]:
        return [s.aval for s in inputs.specs]

    def var_aval(self, var: Any) -> Any:
        return jax.ShapeDtypeStruct(var.global_shape, var.dtype)

    def make_input(self, spec: LeafSpec, leaf: Any, value: Any) -> Any:
        return wrap_cross_input(spec, leaf, value)

    def call(self, fn: Any, args: Any, kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    def output(self, leaf: Any) -> tuple[Any, Any] | None:
        if isinstance(leaf, Mirrored) and leaf.is_traced:
            return outputs.OutKind(outputs.Kind.MIRRORED, num_replicas=leaf.num_replicas), leaf.replicated_array
        if isinstance(leaf, DistributedValues) and leaf.is_traced:
            stacked = leaf.stacked_array()
            shapes = leaf.shapes if leaf.is_ragged else None
            return outputs.OutKind(outputs.Kind.PER_REPLICA, cls=type(leaf), shapes=shapes), stacked
        if isinstance(leaf, jax.core.Tracer):
            return outputs.ARRAY, leaf
        return None


@dataclass
class _Attempt:
    traced: Traced | None
    missing: list[Any]
    more_pulls: list[tuple[Any, Any]]


def _trace_once(fn: Any, inputs: Inputs, view: Any, state: TraceState, variables: list[Any],
                available: dict[Any, list[Inputs]], ended_at: dict[Any, int]) -> _Attempt:
    in_avals = view.in_avals(inputs)
    var_avals = [view.var_aval(v) for v in variables]
    pull_avals = [s.aval for source in available for p in available[source] for s in p.specs]
    cell: dict[str, Any] = {}

    def body(*flat: Any) -> list[Any]:
        a, v = len(in_avals), len(in_avals) + len(var_avals)
        args, kwargs = inputs.rebuild(list(flat[:a]), view.make_input)
        frame = frames.Frame(view.level, dict(zip(variables, flat[a:v])), state.created, view.strategy)
        if view.level == "cross":
            traced_batches: dict[Any, list[Any]] = {}
            rest = list(flat[v:])
            for source, batches in available.items():
                for batch in batches:
                    mine, rest = rest[: len(batch.specs)], rest[len(batch.specs):]
                    traced_batches.setdefault(source, []).append(batch.rebuild(mine, wrap_cross_input))
            frame.pulls = pulls_lib.TracePulls(state.sources, inputs.leaves, traced_batches, dict(ended_at))
        with frames.active(frame):
            out = view.call(fn, args, kwargs)
        out_leaves, out_treedef = regroup.flatten(out)
        dynamic, kinds = [], []
        for leaf in out_leaves:
            found = view.output(leaf)
            if found is None:
                kinds.append(outputs.static(leaf))
            else:
                kinds.append(found[0])
                dynamic.append(found[1])
        written = [x for x in frame.written if x in variables or x in frame.initialised]
        cell.update(frame=frame, treedef=out_treedef, kinds=kinds, written=written)
        return dynamic + [frame.current(x) for x in written]

    closed = jax.make_jaxpr(body, axis_env=view.axis_env)(*in_avals, *var_avals, *pull_avals)
    frame = cell["frame"]
    trace_pulls = getattr(frame, "pulls", None)
    more = trace_pulls.more if trace_pulls is not None else []
    if frame.missing or more:
        return _Attempt(None, list(frame.missing), more)
    layout = [(source, len(batches)) for source, batches in available.items()]
    if trace_pulls is not None:
        for source, n in layout:
            if trace_pulls.log.counts.get(source, 0) != n:
                raise RuntimeError(
                    f"{getattr(fn, '__qualname__', fn)!r}: a tps.function call pulled {n} batches from an "
                    f"iterator but its trace used {trace_pulls.log.counts.get(source, 0)}; the number of "
                    "batches a function pulls must not depend on the batches' shapes or values.\nFix: pull "
                    "a fixed number of batches per call."
                )
    traced = Traced(closed, cell["treedef"], cell["kinds"], list(variables), cell["written"],
                    list(frame.strategies), trace_pulls.log if trace_pulls is not None else None, layout,
                    dict(available), bool(frame.initialised))
    return _Attempt(traced, [], [])


def trace(fn: Any, inputs: Inputs, view: Any, state: TraceState,
          available: dict[Any, list[Inputs]] | None = None,
          ended_at: dict[Any, int] | None = None) -> Traced:
    """Traces ``fn`` until the variables and pulled batches it needs settle.

    Args:
      fn: the user function.
      inputs: its classified arguments.
      view: ``ReplicaView`` or ``CrossView``.
      state: shared across traces of ``fn`` (known variables, created variables).
      available: batches already pulled for this call, per source (cross view).
      ended_at: sources whose data ended, and after how many batches.
    """
    available = {k: list(v) for k, v in (available or {}).items()}
    ended_at = dict(ended_at or {})
    known = list(state.known_vars)
    for _ in range(_MAX_TRACES):
        attempt = _trace_once(fn, inputs, view, state, known, available, ended_at)
        if attempt.traced is not None:
            state.known_vars = known
            return attempt.traced
        known += [v for v in attempt.missing if v not in known]
        for source, batch in attempt.more_pulls:
            if batch is pulls_lib.END:
                ended_at[source] = len(available.get(source, []))
            else:
                from tpustrategy._src.execution import signature

                available.setdefault(source, []).append(signature.classify(batch))
    raise RuntimeError(  # pragma: no cover - needs a function whose state never settles
        f"{getattr(fn, '__qualname__', fn)!r}: the set of variables and pulled batches it uses kept "
        f"changing over {_MAX_TRACES} traces.\nFix: make the variables it reads and the number of "
        "batches it pulls independent of the values it computes."
    )
