"""``tps.GradientTape``: TensorFlow's tape inside ``strategy.run`` and ``tps.function``.

How it works: JAX differentiates functions, not values computed earlier,
so the tape works on the graph JAX is recording anyway. Inside a replica
function or ``tps.function`` every value is a tracer of the trace being
built, and every variable read returns the trace frame's value of that
variable. ``tape.gradient(target, sources)`` takes, for each source, the
traced value the target was computed from (a variable's current value in the
frame, or a watched tensor), slices the recorded equations between them
(``jaxpr_slice``) into a function of the sources, and emits ``jax.vjp`` of it
into the same trace. The forward part is recomputed inside the program
(XLA removes the duplicate work it can); side effects in the ``with`` block
(variable writes, metric updates) are not equations, so they happen once.
Inside ``strategy.run`` the gradient is the replica's own (classic axis
semantics: a variable enters as each replica's copy, as in TensorFlow).

Limits (what JAX requires that TensorFlow did not): the tape needs a trace
(outside ``strategy.run`` / ``tps.function`` there is nothing recorded:
use ``jax.grad``); a source is the value a variable has when ``gradient`` is
called, so a variable assigned inside the ``with`` block after it was read
differentiates with respect to its new value; ``jax.lax`` control flow is
differentiated as a whole; Python control flow on traced values is not
possible anyway.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from tpustrategy._src.tape import jaxpr_slice
from tpustrategy._src.variables import frames

_NON_PERSISTENT = ("A non-persistent GradientTape can only be used to compute one set of gradients "
                   "(or jacobians)")


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


def _variable_value(var: Any) -> Any:
    """The traced value a variable source stands for in the current frame."""
    state = _state(var)
    frame = frames.current()
    if frame is not None and frame.has(state):
        return frame.current(state)
    if frame is not None:
        return None  # first met now: the tracer traces again with it as an input
    return state.read_value()


class GradientTape:
    """Records a traced computation to differentiate (``tf.GradientTape``).

    Args:
      persistent: allow several ``gradient`` calls (TensorFlow's default: one).
      watch_accessed_variables: differentiate trainable variables without
        ``watch`` (default True). With False only watched sources have
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
        self._watched: list[Any] = []
        self._used = False
        self._recording = False

    def __enter__(self) -> GradientTape:
        jaxpr_slice.check()
        self._recording = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self._recording = False

    def watch(self, tensor: Any) -> None:
        """Marks tensors or variables (a nested structure) as sources."""
        for x in jax.tree_util.tree_leaves(tensor, is_leaf=_is_variable):
            self._watched.append(x)

    def watched_variables(self) -> tuple[Any, ...]:
        return tuple(x for x in self._watched if _is_variable(x))

    def reset(self) -> None:
        self._watched = []

    def stop_recording(self) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def _is_watched(self, source: Any) -> bool:
        if any(source is w for w in self._watched):
            return True
        if _is_variable(source):
            return self._watch_accessed and bool(getattr(_state(source), "trainable", True))
        return False

    def gradient(self, target: Any, sources: Any, output_gradients: Any = None,
                 unconnected_gradients: str = UnconnectedGradients.NONE) -> Any:
        """The gradient of ``target`` (summed over its elements and leaves) with respect to ``sources``.

        Args:
          target: a traced tensor or a nested structure of them.
          sources: variables (``tps.Variable``, Keras variables), traced tensors,
            or a nested structure of them (``model.trainable_variables``).
          output_gradients: upstream gradients, one per target leaf (default ones).
          unconnected_gradients: ``"none"`` (default) or ``"zero"``.

        Returns:
          Gradients with the structure of ``sources``.

        Raises:
          RuntimeError: a second call on a non-persistent tape, or a call inside the ``with`` block of a
            non-persistent tape (TensorFlow's rules), or a target that was not traced.
        """
        if self._used and not self._persistent:
            raise RuntimeError(_NON_PERSISTENT)
        if self._recording and not self._persistent:
            raise RuntimeError(
                "tps.GradientTape.gradient: called inside the tape's `with` block; TensorFlow refuses it "
                "for a non-persistent tape too.\nFix: call tape.gradient after the `with` block.")
        unconnected = str(getattr(unconnected_gradients, "value", unconnected_gradients)).lower()
        if unconnected not in (UnconnectedGradients.NONE, UnconnectedGradients.ZERO):
            raise ValueError(f"tps.GradientTape.gradient: `unconnected_gradients` must be 'none' or 'zero'. "
                             f"Received: {unconnected_gradients!r}.")
        self._used = True
        source_leaves, treedef = jax.tree_util.tree_flatten(sources, is_leaf=_is_variable)
        target_leaves = [jnp.asarray(t.read_value()) if _is_variable(t) else t
                         for t in jax.tree_util.tree_leaves(target, is_leaf=_is_variable)]
        frame = frames.current()
        settling = frame is not None and bool(frame.missing)
        if not any(jaxpr_slice.is_traced(t) for t in target_leaves):
            if frame is None:
                raise RuntimeError(
                    "tps.GradientTape.gradient: the target is a concrete value, so nothing was recorded to "
                    "differentiate. The tape works on the program JAX traces inside strategy.run and "
                    "tps.function.\nFix: run the step with strategy.run(step, ...) or inside @tps.function, "
                    "or use jax.grad / jax.value_and_grad for eager code.")
        values = [_variable_value(s) if _is_variable(s) else s for s in source_leaves]
        shapes = [jnp.shape(_keras_state(s).read_value() if _keras_state(s) is not None else s)
                  if values[i] is None else jnp.shape(values[i]) for i, s in enumerate(source_leaves)]
        usable = [i for i, (s, v) in enumerate(zip(source_leaves, values))
                  if v is not None and self._is_watched(s) and any(jaxpr_slice.same_trace(v, t) for t in target_leaves)]
        grads: list[Any] = [None] * len(source_leaves)
        if usable:
            traced_targets = [t for t in target_leaves if jaxpr_slice.is_traced(t)]
            fn, connected = jaxpr_slice.slice_function(traced_targets, [values[i] for i in usable])
            if any(connected):
                outs, vjp = jax.vjp(fn, *[values[i] for i in usable])
                cotangents = self._cotangents(outs, output_gradients, target_leaves, traced_targets)
                for i, c, g in zip(usable, connected, vjp(cotangents)):
                    grads[i] = g if c else None
        for i, g in enumerate(grads):
            if g is None and (unconnected == UnconnectedGradients.ZERO or settling):
                dtype = getattr(values[i], "dtype", None) or jnp.result_type(float)
                grads[i] = jnp.zeros(shapes[i], dtype)
        return jax.tree_util.tree_unflatten(treedef, grads)

    @staticmethod
    def _cotangents(outs: list[Any], output_gradients: Any, target_leaves: list[Any], traced: list[Any]) -> list[Any]:
        if output_gradients is None:
            return [jnp.ones_like(o) for o in outs]
        given = jax.tree_util.tree_leaves(output_gradients)
        if len(given) != len(target_leaves):
            raise ValueError(
                f"tps.GradientTape.gradient: `output_gradients` has {len(given)} leaves but the target has "
                f"{len(target_leaves)}.\nFix: pass one upstream gradient per target tensor.")
        by_id = {id(t): g for t, g in zip(target_leaves, given)}
        return [jnp.asarray(by_id[id(t)], o.dtype) * jnp.ones_like(o) for t, o in zip(traced, outs)]
