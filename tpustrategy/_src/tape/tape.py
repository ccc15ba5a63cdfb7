"""``tps.GradientTape``: TensorFlow's tape, in eager code, ``strategy.run`` and ``tps.function``.

How it works: JAX differentiates functions, not values computed earlier, so
the tape turns what it recorded into a function of the sources and
differentiates that.

- Inside a replica function or ``tps.function`` every value is a tracer of the
  trace being built, and every variable read returns the trace frame's value of
  that variable. The tape notes which equations the trace records while the tape
  records (between ``__enter__`` and ``__exit__``, outside ``stop_recording``,
  after the last ``reset``); ``gradient(target, sources)`` slices those equations
  between the sources' traced values and the target (``jaxpr_slice``) into a
  function and emits ``jax.vjp`` of it into the same trace. The forward part is
  recomputed inside the program (XLA removes the duplicate work it can); side
  effects in the ``with`` block (variable writes, metric updates) are not
  equations, so they happen once. Inside ``strategy.run`` the gradient is the
  replica's own.
- In eager code the tape installs a JAX trace of its own for its ``with`` block
  (``jaxpr_slice.RecordTrace``): every operation runs at once, as in eager JAX,
  and those that depend on a watched value (a watched array, a trainable variable
  read while recording) are recorded; ``gradient`` replays them under ``jax.vjp``.

Nested tapes give higher derivatives in both modes (the inner tape's gradient is
computed while the outer one records). A variable's gradient is with respect to
the value it had when read (a variable assigned inside the block after it was
read is read again as a new value); ``jax.lax`` control flow is differentiated
as a whole.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp

from tpustrategy._src.jax_shims import tracing
from tpustrategy._src.tape import jaxpr_slice
from tpustrategy._src.variables import access, frames

_log = logging.getLogger("tpustrategy")

_NON_PERSISTENT = ("A non-persistent GradientTape can only be used to compute one set of gradients "
                   "(or jacobians)")
_PERSISTENT_INSIDE = (
    "Calling GradientTape.gradient on a persistent tape inside its context is significantly less efficient "
    "than calling it outside the context (it causes the gradient ops to be recorded on the tape, leading to "
    "increased CPU and memory usage). Only call GradientTape.gradient inside the context if you actually want "
    "to trace the gradient in order to compute higher order derivatives.")


class UnconnectedGradients:
    """What ``gradient`` returns for a source the target does not depend on (``tf.UnconnectedGradients``)."""

    NONE = "none"
    ZERO = "zero"


def _is_variable(x: Any) -> bool:
    from tpustrategy._src.variables.variable import Variable

    return isinstance(x, Variable) or _keras_state(x) is not None


def _keras_state(x: Any) -> Any:
    d = getattr(x, "__dict__", None)
    return d.get("_tps_state") if d is not None else None


def _state(x: Any) -> Any:
    """A Keras variable's companion tps.Variable, or ``x`` itself."""
    found = _keras_state(x)
    return x if found is None else found


def _contains(items: list[Any], x: Any) -> bool:
    return any(x is y for y in items)


def _unconnected_mode(value: Any) -> str:
    mode = str(getattr(value, "value", value)).lower()
    if mode not in (UnconnectedGradients.NONE, UnconnectedGradients.ZERO):
        raise ValueError(f"tps.GradientTape: `unconnected_gradients` must be 'none' or 'zero' "
                         f"(tps.UnconnectedGradients.NONE / ZERO). Received: unconnected_gradients={value!r}.")
    return mode


class GradientTape:
    """Records operations to differentiate (``tf.GradientTape``).

    Args:
      persistent: allow several ``gradient`` / ``jacobian`` calls (TensorFlow's default: one).
      watch_accessed_variables: differentiate trainable variables read while recording
        without ``watch`` (default True). With False only watched sources have
        gradients; others get None.

    Example:
      ```python
      def step(x, y):
          with tps.GradientTape() as tape:
              loss = loss_fn(y, model(x, training=True))
          grads = tape.gradient(loss, model.trainable_variables)
          optimizer.apply_gradients(zip(grads, model.trainable_variables))
      strategy.run(step, args=next(it))
      ```
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True):
        if not isinstance(persistent, bool):
            raise TypeError(f"tps.GradientTape: `persistent` must be a bool. Received: persistent={persistent!r}.")
        self._persistent = persistent
        self._watch_accessed = bool(watch_accessed_variables)
        self._watched: list[Any] = []     # explicitly watched tensors and variables
        self._accessed: list[Any] = []    # variables read while recording
        self._used = False
        self._recording = False
        self._ranges: list[list[Any]] = []  # [trace, start, end] of the equations recorded (traced mode)
        self._eager: jaxpr_slice.RecordTrace | None = None
        self._previous_trace: Any = None
        self._variable_sources: dict[int, list[Any]] = {}  # variable id -> its recorded reads (eager)

    # Recording ---------------------------------------------------------------------------
    def __enter__(self) -> GradientTape:
        tracing.check()
        if frames.current() is None and jaxpr_slice.is_eager():
            self._previous_trace = jaxpr_slice.current_trace()
            self._eager = jaxpr_slice.RecordTrace(self._previous_trace)
            jaxpr_slice.set_trace(self._eager)
            for x in self._watched:
                if not _is_variable(x):
                    self._eager.watch(x)
        self._start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop()
        if self._previous_trace is not None:
            jaxpr_slice.set_trace(self._previous_trace)
            self._previous_trace = None

    def _start(self) -> None:
        self._recording = True
        access.add(self)
        if self._eager is not None:
            self._eager.recording = True
        else:
            where = jaxpr_slice.position()
            if where is not None:
                self._ranges.append([where[0], where[1], None])

    def _stop(self) -> None:
        if not self._recording:
            return
        self._recording = False
        access.remove(self)
        if self._eager is not None:
            self._eager.recording = False
        for r in self._ranges:
            if r[2] is None:
                where = jaxpr_slice.position()
                r[2] = where[1] if where is not None and where[0] is r[0] else len(r[0].frame.tracing_eqns)

    @contextlib.contextmanager
    def stop_recording(self) -> Iterator[None]:
        """Temporarily stops recording: operations inside have no gradient (``tf.GradientTape.stop_recording``)."""
        if not self._recording:
            raise ValueError("Tape must be recording when stop_recording is called "
                             "(tps.GradientTape.stop_recording: use it inside the tape's `with` block).")
        self._stop()
        try:
            yield
        finally:
            self._start()

    def reset(self) -> None:
        """Forgets everything recorded, as if the ``with`` block were left and a new tape entered."""
        recording = self._recording
        self._stop()
        self._watched, self._accessed, self._ranges, self._variable_sources = [], [], [], {}
        if self._eager is not None and jaxpr_slice.current_trace() is self._eager:
            self._eager = jaxpr_slice.RecordTrace(self._eager.parent)
            jaxpr_slice.set_trace(self._eager)
        if recording:
            self._start()

    # access.ReadObserver: the variables' plug point
    def on_read(self, variable: Any, value: Any) -> Any:
        if not self._recording:
            return value
        if not _contains(self._accessed, variable) and getattr(variable, "trainable", True):
            self._accessed.append(variable)
        if self._eager is None or not self._is_watched(variable):
            return value
        sources = self._variable_sources.setdefault(variable.unique_id, [])
        if sources and sources[-1].val is value:
            return sources[-1]
        sources.append(self._eager.source(value))
        return sources[-1]

    def to_stored(self, value: Any) -> Any:
        return jax.tree_util.tree_map(jaxpr_slice.concrete, value)

    def watch(self, tensor: Any) -> None:
        """Marks tensors or variables (a nested structure) as sources."""
        for x in jax.tree_util.tree_leaves(tensor, is_leaf=_is_variable):
            if not _contains(self._watched, x):
                self._watched.append(x)
            if self._eager is not None and self._recording and not _is_variable(x):
                self._eager.watch(x)

    def watched_variables(self) -> tuple[Any, ...]:
        """The variables watched explicitly or (``watch_accessed_variables``) read while recording."""
        out: list[Any] = []
        for x in self._watched + (self._accessed if self._watch_accessed else []):
            if _is_variable(x) and not _contains(out, x):
                out.append(x)
        return tuple(out)

    def _is_watched(self, source: Any) -> bool:
        if _contains(self._watched, source):
            return True
        if _is_variable(source):
            state = _state(source)
            accessed = _contains(self._accessed, state) or _contains(self._accessed, source)
            return self._watch_accessed and accessed and bool(getattr(state, "trainable", True))
        return False

    # Differentiation ---------------------------------------------------------------------------
    def _begin_call(self) -> None:
        if self._used and not self._persistent:
            raise RuntimeError(_NON_PERSISTENT)
        if self._recording:
            if self._persistent:
                _log.warning(_PERSISTENT_INSIDE)
            else:
                self._stop()  # TensorFlow: the tape stops recording and gives the gradient
        self._used = True

    def _prepare(self, targets: list[Any], sources: list[Any]) -> tuple[Any, list[Any], list[list[int]], list[Any]]:
        """``(fn, values, groups, like)``: ``fn(*values)`` recomputes ``targets``; ``groups[i]`` are the
        positions in ``values`` of source leaf ``i`` (empty when unconnected); ``like[i]`` its shape/dtype."""
        values: list[Any] = []
        groups: list[list[int]] = []
        like: list[Any] = []
        for s in sources:
            found = [v for v in self._source_values(s, targets)   # TensorFlow: no gradient for integers
                     if jnp.issubdtype(jnp.result_type(jaxpr_slice.concrete(v)), jnp.inexact)]
            like.append(self._like(s, found))
            idx = []
            for v in found:
                known = next((i for i, u in enumerate(values) if u is v), None)
                if known is None:
                    values.append(v)
                    known = len(values) - 1
                idx.append(known)
            groups.append(idx)
        if not values:
            return None, values, groups, like
        if self._eager is not None:
            fn, connected = jaxpr_slice.record_slice(targets, values)
        else:
            fn, connected = jaxpr_slice.slice_function(targets, values, self._allowed(targets))
        groups = [[i for i in g if connected[i]] for g in groups]
        return fn, values, groups, like

    def _source_values(self, source: Any, targets: list[Any]) -> list[Any]:
        if self._eager is not None:
            if _is_variable(source):
                return list(self._variable_sources.get(_state(source).unique_id, [])) if self._is_watched(source) else []
            found = self._eager.lookup(source)   # a watched array, or a value computed while recording
            return [found] if found is not None else []
        if not self._is_watched(source) and not self._recorded_here(source):
            return []
        value = source
        if _is_variable(source):
            frame = frames.current()
            state = _state(source)
            if frame is None or not frame.has(state):
                return []  # first met now: the tracer traces again with it as an input
            value = frame.current(state)
        return [value] if any(jaxpr_slice.same_trace(value, t) for t in targets) else []

    def _recorded_here(self, value: Any) -> bool:
        """A traced value computed while this tape recorded (TensorFlow differentiates with respect to it)."""
        if not jaxpr_slice.is_traced(value) or _is_variable(value):
            return False
        allowed = self._allowed([value])
        return allowed is not None and jaxpr_slice.made_by(value, allowed)

    @staticmethod
    def _like(source: Any, found: list[Any]) -> Any:
        if found:
            v = jaxpr_slice.concrete(found[0])
            return jax.ShapeDtypeStruct(jnp.shape(v), jnp.result_type(v))
        state = _state(source)
        value = state.read_value() if _is_variable(source) and hasattr(state, "read_value") else source
        dtype = getattr(value, "dtype", None) or jnp.result_type(float)
        return jax.ShapeDtypeStruct(jnp.shape(value), dtype)

    def _allowed(self, targets: list[Any]) -> set[int] | None:
        traces = {id(t._trace) for t in targets if jaxpr_slice.is_traced(t)}
        ranges = [r for r in self._ranges if id(r[0]) in traces]
        if not ranges:
            return None
        allowed: set[int] = set()
        for trace, start, end in ranges:
            allowed.update(id(e) for e in jaxpr_slice.equations_between(trace, start, end))
        self._keep_alive = ranges  # equation ids stay valid while the slice is built
        return allowed

    def _targets(self, target: Any) -> list[Any]:
        leaves = [jnp.asarray(t.read_value()) if _is_variable(t) else t
                  for t in jax.tree_util.tree_leaves(target, is_leaf=_is_variable)]
        if self._eager is not None:   # a watched array as the target itself is its source
            found = [self._eager.lookup(t) for t in leaves]
            leaves = [t if f is None else f for t, f in zip(leaves, found)]
        return leaves

    def _missing_fill(self, unconnected: str) -> bool:
        frame = frames.current()
        return unconnected == UnconnectedGradients.ZERO or (frame is not None and bool(frame.missing))

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: Any = UnconnectedGradients.NONE) -> Any:
        """The gradient of ``target`` (summed over its elements and leaves) with respect to ``sources``.

        Args:
          target: a tensor or a nested structure of them.
          sources: variables (``tps.Variable``, Keras variables), tensors, or a nested
            structure of them (``model.trainable_variables``).
          output_gradients: upstream gradients, one per target leaf (default ones).
          unconnected_gradients: ``"none"`` (default) or ``"zero"``.

        Returns:
          Gradients with the structure of ``sources`` (None where unconnected).

        Raises:
          RuntimeError: a second call on a non-persistent tape (TensorFlow's rule).
        """
        unconnected = _unconnected_mode(unconnected_gradients)
        self._begin_call()
        source_leaves, treedef = jax.tree_util.tree_flatten(sources, is_leaf=_is_variable)
        targets = self._targets(target)
        fn, values, groups, like = self._prepare(targets, source_leaves)
        flat: list[Any] = [None] * len(values)
        if any(groups):
            outs, vjp = jax.vjp(fn, *[v.val if self._eager is not None else v for v in values])
            flat = list(vjp(self._cotangents(outs, output_gradients, targets)))
        grads: list[Any] = []
        for g, spec in zip(groups, like):
            if g:
                grads.append(sum(flat[i] for i in g[1:]) + flat[g[0]] if len(g) > 1 else flat[g[0]])
            elif self._missing_fill(unconnected):
                grads.append(jnp.zeros(spec.shape, spec.dtype))
            else:
                grads.append(None)
        return jax.tree_util.tree_unflatten(treedef, grads)

    def jacobian(self, target: Any, sources: Any, unconnected_gradients: Any = UnconnectedGradients.NONE,
                 parallel_iterations: int | None = None, experimental_use_pfor: bool = True) -> Any:
        """The Jacobian of ``target`` with respect to each source: shape ``target.shape + source.shape``.

        ``parallel_iterations`` and ``experimental_use_pfor`` are accepted (JAX computes every
        row at once with ``vmap``, which is what pfor does).
        """
        unconnected = _unconnected_mode(unconnected_gradients)
        self._begin_call()
        source_leaves, treedef = jax.tree_util.tree_flatten(sources, is_leaf=_is_variable)
        targets = self._targets(target)
        if len(targets) != 1:
            raise ValueError(f"tps.GradientTape.jacobian: `target` must be one tensor. Received a structure of "
                             f"{len(targets)} tensors.\nFix: call jacobian once per target tensor.")
        return self._jacobians(targets, source_leaves, treedef, unconnected)

    def _jacobians(self, targets: list[Any], source_leaves: list[Any], treedef: Any, unconnected: str) -> Any:
        fn, values, groups, like = self._prepare(targets, source_leaves)
        tshape = tuple(jnp.shape(jaxpr_slice.concrete(targets[0])))
        flat: list[Any] = []
        if any(groups):
            primals = [v.val if self._eager is not None else v for v in values]
            flat = list(jax.jacrev(lambda *v: fn(*v)[0], argnums=tuple(range(len(values))))(*primals))
        out: list[Any] = []
        for g, spec in zip(groups, like):
            if g:
                out.append(sum(flat[i] for i in g[1:]) + flat[g[0]] if len(g) > 1 else flat[g[0]])
            elif self._missing_fill(unconnected):
                out.append(jnp.zeros(tshape + tuple(spec.shape), spec.dtype))
            else:
                out.append(None)
        return jax.tree_util.tree_unflatten(treedef, out)

    def batch_jacobian(self, target: Any, source: Any, unconnected_gradients: Any = UnconnectedGradients.NONE,
                       parallel_iterations: int | None = None, experimental_use_pfor: bool = True) -> Any:
        """Per-example Jacobians: ``result[i] = d target[i] / d source[i]``, of shape
        ``[batch] + target.shape[1:] + source.shape[1:]`` (examples must be independent)."""
        unconnected = _unconnected_mode(unconnected_gradients)
        targets = self._targets(target)
        tshape = tuple(jnp.shape(jaxpr_slice.concrete(targets[0]))) if len(targets) == 1 else ()
        source_value = _state(source).read_value() if _is_variable(source) else source
        sshape = tuple(jnp.shape(jaxpr_slice.concrete(source_value)))
        for name, shape in (("target", tshape), ("source", sshape)):
            if len(shape) < 2:
                raise ValueError(f"Shape {shape} must have rank at least 2 (tps.GradientTape.batch_jacobian: "
                                 f"the {name} needs a batch dimension and at least one more).\nFix: pass "
                                 f"tensors of shape [batch, ...], or use jacobian.")
        if tshape[0] != sshape[0]:
            raise ValueError(f"Need first dimension of target shape ({tshape}) and source shape ({sshape}) to "
                             "match (tps.GradientTape.batch_jacobian).\nFix: pass a target computed example by "
                             "example from the source batch.")
        self._begin_call()
        full = self._jacobians(targets, [source], jax.tree_util.tree_structure(0), unconnected)
        if full is None:
            return None
        diagonal = jnp.diagonal(full, axis1=0, axis2=len(tshape))   # the batch pairs (i, i), last
        return jnp.moveaxis(diagonal, -1, 0)

    @staticmethod
    def _cotangents(outs: list[Any], output_gradients: Any, targets: list[Any]) -> list[Any]:
        if output_gradients is None:
            return [jnp.ones_like(o) for o in outs]
        given = jax.tree_util.tree_leaves(output_gradients, is_leaf=lambda x: x is None)
        if len(given) != len(targets):
            raise ValueError(
                f"tps.GradientTape.gradient: `output_gradients` has {len(given)} leaves but the target has "
                f"{len(targets)}.\nFix: pass one upstream gradient per target tensor.")
        return [jnp.ones_like(o) if g is None else jnp.asarray(jaxpr_slice.concrete(g), o.dtype) * jnp.ones_like(o)
                for g, o in zip(given, outs)]
