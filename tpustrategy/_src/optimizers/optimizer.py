"""``Optimizer``: an optax transformation applied to ``tps.Variable``s, Keras style.

``apply_gradients(zip(grads, variables))`` reads the variables, runs the
transformation's ``update`` and writes the new values and the new optax state
back; the state lives in mirrored variables created on first use under the
variables' strategy. It works where TensorFlow's Keras optimizers do:

- in a replica function (``strategy.run``, compiled or eager): the gradients
  are this replica's, so they are first summed over the replicas
  (``all_reduce(SUM)``, Keras 2's ``aggregate_gradients``); with the loss
  scaled by ``tps.nn.compute_average_loss`` the sum is the gradient of the
  global batch's mean loss. ``skip_gradients_aggregation=True`` (or Keras's
  older ``experimental_aggregate_gradients=False``) applies them as given, for
  gradients the step already all-reduced.
- in cross-replica code (eager, or ``tps.function`` outside ``run``) and with
  no strategy: the gradients are global values and are applied as given
  (TensorFlow's optimizers refuse cross-replica context; here there is nothing
  to aggregate, so it is allowed).

Every copy of a variable receives the same new value, so the update equals
the plain optax update on one device.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.optimizers import state as state_lib
from tpustrategy._src.reduce_op import ReduceOp
from tpustrategy._src.strategy.context import (
    get_replica_context,
    get_strategy,
    has_strategy,
    in_cross_replica_context,
)
from tpustrategy._src.values.distributed import DistributedValues, Mirrored
from tpustrategy._src.variables.enums import VariableAggregation, VariableSynchronization
from tpustrategy._src.variables.variable import Variable


def in_replica_context() -> bool:
    """True inside a replica function of a real (non-default) strategy."""
    return has_strategy() and not in_cross_replica_context()


def _describe(x: Any) -> str:
    if isinstance(x, Variable):
        return f"tps.Variable {x.name!r}"
    return f"{type(x).__name__}"


class Optimizer:
    """Applies an optax ``GradientTransformation`` to ``tps.Variable``s (``tf.keras.optimizers.Optimizer``).

    Args:
      transformation: an ``optax.GradientTransformation`` (anything with
        ``init(params)`` and ``update(updates, state, params)``).
      name: a name, used as the prefix of the state variables' names.

    Create it under ``strategy.scope()``, like the variables it updates.

    Example:
      >>> with strategy.scope():
      ...     w = tps.Variable(jnp.zeros(3))
      ...     optimizer = tps.optimizers.Optimizer(optax.adam(1e-3))
      >>> def step(x):
      ...     grads = jax.grad(loss_fn)(w.read_value(), x)
      ...     optimizer.apply_gradients([(grads, w)])
      >>> strategy.run(step, args=(batch,))
    """

    def __init__(self, transformation: Any, name: str = "Optimizer"):
        if not (callable(getattr(transformation, "init", None)) and callable(getattr(transformation, "update", None))):
            raise TypeError(
                f"tps.optimizers.Optimizer: `transformation` must be an optax.GradientTransformation "
                f"(an object with init(params) and update(updates, state, params)). Received: "
                f"{type(transformation).__name__}.\nFix: pass e.g. optax.adam(1e-3), or use "
                "tps.optimizers.SGD / Adam / AdamW."
            )
        if not isinstance(name, str) or not name:
            raise TypeError(f"tps.optimizers.Optimizer: `name` must be a non-empty str. Received: {name!r}.")
        self._transformation = transformation
        self._name = name
        self._strategy = get_strategy() if has_strategy() else None
        self._iterations = Variable(
            0, name=f"{name}/iteration", trainable=False,
            aggregation=VariableAggregation.ONLY_FIRST_REPLICA,
        )
        self._var_list: list[Any] | None = None
        self._slots: list[Any] = []
        self._treedef: Any = None

    # Properties ------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def built(self) -> bool:
        """Whether the optimizer's state variables exist (after ``build`` or the first update)."""
        return self._var_list is not None

    @property
    def transformation(self) -> Any:
        """The optax transformation."""
        return self._transformation

    @property
    def iterations(self) -> Any:
        """The number of ``apply_gradients`` calls so far (a mirrored int ``tps.Variable``)."""
        return self._iterations

    @property
    def variables(self) -> list[Any]:
        """``iterations`` followed by the optax state's variables (after the first use)."""
        return [self._iterations, *self._slots]

    def _api(self, method: str) -> str:
        return f"tps.optimizers.{type(self).__name__}.{method}"

    # Building ------------------------------------------------------------------------
    def build(self, var_list: Iterable[Any]) -> None:
        """Creates the optax state for ``var_list`` now instead of at the first update.

        Needed only for a transformation whose initial state depends on the
        variables' values when the first update runs inside a compiled step.

        Args:
          var_list: the variables this optimizer will update.
        """
        variables = list(var_list)
        self._check_variables(variables, self._api("build"))
        if self._var_list is None:
            self._build(variables, self._api("build"))
        else:
            self._check_same_variables(variables, self._api("build"))

    def _build(self, variables: list[Any], api: str) -> None:
        if self._var_list is not None:  # another replica thread's merge_call got here first
            return
        strategy = variables[0].strategy
        initial = state_lib.initial_state(self._transformation, variables, api)
        self._slots, self._treedef = state_lib.create_slots(initial, variables, strategy, self._name)
        self._var_list = list(variables)

    def _positions(self) -> dict[int, int]:
        """Variable id -> its index in the state (kept out of attributes that checkpoints walk)."""
        return {id(v): i for i, v in enumerate(self._var_list or ())}

    def _ensure_built(self, variables: list[Any], replica: bool, api: str) -> None:
        if self._var_list is None:
            if replica:
                # Once for all replicas, in cross-replica context (TF creates slots the same way).
                get_replica_context().merge_call(lambda _strategy: self._build(variables, api))
            else:
                self._build(variables, api)
        self._check_same_variables(variables, api)

    # Checks ------------------------------------------------------------------------------
    def _check_variables(self, variables: Sequence[Any], api: str) -> None:
        if not variables:
            raise ValueError(f"{api}: no variables given.\nFix: pass the model's trainable variables.")
        for i, v in enumerate(variables):
            if not isinstance(v, Variable):
                raise TypeError(
                    f"{api}: variable {i} is a {type(v).__name__}, not a tps.Variable; optimizers "
                    "update variables in place.\nFix: create the parameters as tps.Variable(...) "
                    "under strategy.scope(), or update a functional pytree with optax directly."
                )
            if not jnp.issubdtype(v.dtype, jnp.inexact):
                raise TypeError(
                    f"{api}: {v.name!r} has dtype {v.dtype}; optimizers update floating-point "
                    "variables (an integer variable would truncate every update).\nFix: create it "
                    "with a float dtype, or leave it out of the variables to update."
                )
            if v.synchronization is VariableSynchronization.ON_READ and v.strategy is not None:
                raise ValueError(
                    f"{api}: {v.name!r} is a sync-on-read variable (synchronization=ON_READ), which "
                    "holds a different value on each replica; optimizers update mirrored "
                    "variables.\nFix: create it with the default synchronization."
                )
        seen: set[Any] = set()
        for v in variables:
            if v in seen:
                raise ValueError(
                    f"{api}: variable {v.name!r} appears more than once.\nFix: pass each variable "
                    "once, with the sum of its gradients."
                )
            seen.add(v)
        strategies = {id(v.strategy): v for v in variables}
        if len(strategies) > 1:
            a, b = list(strategies.values())[:2]
            raise ValueError(
                f"{api}: the variables were created under different strategies ({a.name!r} under "
                f"{a.strategy!r}, {b.name!r} under {b.strategy!r}).\nFix: create all of them under "
                "one strategy.scope()."
            )
        if variables[0].strategy is not self._strategy:
            where = "outside any strategy scope" if self._strategy is None else f"under {self._strategy!r}"
            theirs = (
                "outside any strategy scope" if variables[0].strategy is None
                else f"under {variables[0].strategy!r}"
            )
            raise ValueError(
                f"{api}: the optimizer was created {where}, but variable {variables[0].name!r} was "
                f"created {theirs}; its state would be kept under the wrong strategy.\nFix: create "
                "the optimizer under the same `with strategy.scope():` as the model's variables."
            )

    def _check_same_variables(self, variables: Sequence[Any], api: str) -> None:
        assert self._var_list is not None
        positions = self._positions()
        if len(variables) == len(self._var_list) and all(id(v) in positions for v in variables):
            return
        given = {id(v) for v in variables}
        new = [v.name for v in variables if id(v) not in positions]
        missing = [v.name for v in self._var_list if id(v) not in given]
        raise ValueError(
            f"{api}: this optimizer's state was built for {len(self._var_list)} variables; this "
            f"call has new variables {new} and lacks {missing}. An optax transformation updates "
            "one fixed set of variables together.\nFix: pass a gradient for every variable of "
            "the first call each time (jnp.zeros_like for one without a gradient), or use one "
            "optimizer per set of variables."
        )

    def _pairs(self, grads_and_vars: Any, api: str) -> list[tuple[Any, Any]]:
        try:
            pairs = list(grads_and_vars)
        except TypeError as e:
            raise TypeError(
                f"{api}: `grads_and_vars` must be an iterable of (gradient, variable) pairs. "
                f"Received: {type(grads_and_vars).__name__}.\nFix: pass zip(grads, variables)."
            ) from e
        out = []
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise TypeError(
                    f"{api}: element {i} of `grads_and_vars` is {_describe(pair)}, not a "
                    "(gradient, variable) pair.\nFix: pass zip(grads, variables)."
                )
            g, v = pair
            if isinstance(g, Variable) and not isinstance(v, Variable):
                raise TypeError(
                    f"{api}: element {i} of `grads_and_vars` is (variable, gradient); the pairs "
                    "are reversed.\nFix: pass zip(grads, variables), gradient first."
                )
            out.append((g, v))
        return out

    def _gradient(self, g: Any, v: Any, replica: bool, api: str) -> Any:
        if isinstance(g, Mirrored):
            g = g.values[0]
            if isinstance(g, jax.Array) and not isinstance(g, jax.core.Tracer):
                g = np.asarray(g)  # one replica's copy is committed to that replica's device
        elif isinstance(g, DistributedValues):
            where = ("inside a replica function pass this replica's own gradient" if replica else
                     "call apply_gradients inside strategy.run, or reduce the gradients first "
                     "with strategy.reduce('SUM', grads, axis=None)")
            raise TypeError(
                f"{api}: the gradient of {v.name!r} is a {type(g).__name__} (one value per "
                f"replica); an update needs one gradient.\nFix: {where}."
            )
        g = jnp.asarray(g)
        if tuple(g.shape) != tuple(v.shape):
            raise ValueError(
                f"{api}: the gradient of {v.name!r} has shape {tuple(g.shape)} but the variable "
                f"has shape {tuple(v.shape)}.\nFix: pair each gradient with its own variable, "
                "in the same order (zip(grads, variables))."
            )
        return g

    # Updates -------------------------------------------------------------------------------
    def apply_gradients(
        self,
        grads_and_vars: Iterable[tuple[Any, Any]],
        name: str | None = None,
        skip_gradients_aggregation: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Applies one update to the variables (``tf.keras.optimizers.Optimizer.apply_gradients``).

        Args:
          grads_and_vars: (gradient, variable) pairs, e.g. ``zip(grads, variables)``.
          name: ignored (TensorFlow's op name).
          skip_gradients_aggregation: in a replica function, apply the gradients
            as given instead of summing them over the replicas first (for
            gradients the step already all-reduced).
          **kwargs: ``experimental_aggregate_gradients=False`` is the older
            spelling of ``skip_gradients_aggregation=True``.

        Returns:
          The ``iterations`` variable, incremented.

        Raises:
          ValueError: no gradient at all, a missing gradient, a wrong shape,
            variables of another strategy, or a different set of variables
            than the first call's.
          TypeError: malformed pairs, or per-replica gradients in cross-replica context.
        """
        api = self._api("apply_gradients")
        aggregate = kwargs.pop("experimental_aggregate_gradients", True)
        if kwargs:
            raise TypeError(
                f"{api}() got unexpected keyword arguments {sorted(kwargs)}; it takes "
                "grads_and_vars, name, skip_gradients_aggregation and "
                "experimental_aggregate_gradients."
            )
        pairs = self._pairs(grads_and_vars, api)
        if not pairs:
            return self._iterations  # Keras: applying no gradients is a no-op
        variables = [v for _, v in pairs]
        self._check_variables(variables, api)
        without = [v.name for g, v in pairs if g is None]
        if without:
            which = "any variable" if len(without) == len(pairs) else f"variables {without}"
            raise ValueError(
                f"No gradients provided for {which} ({api}: got None as the gradient of "
                f"{without}).\nFix: make sure the loss depends on every variable passed, or pass "
                "jnp.zeros_like(variable) as its gradient."
            )
        replica = in_replica_context()
        grads = [self._gradient(g, v, replica, api) for g, v in pairs]
        if replica and aggregate and not skip_gradients_aggregation:
            grads = get_replica_context().all_reduce(ReduceOp.SUM, grads)
        self._ensure_built(variables, replica, api)
        assert self._var_list is not None
        ordered: list[Any] = [None] * len(grads)
        positions = self._positions()
        for g, v in zip(grads, variables):
            ordered[positions[id(v)]] = g
        self._update(ordered, replica, api)
        return self._iterations

    def _update(self, grads: list[Any], replica: bool, api: str) -> None:
        assert self._var_list is not None
        params = [v.read_value() for v in self._var_list]
        state = jax.tree_util.tree_unflatten(self._treedef, [s.read_value() for s in self._slots])
        updates, new_state = self._transformation.update(grads, state, params)
        new_leaves, treedef = jax.tree_util.tree_flatten(new_state)
        if treedef != self._treedef:
            raise RuntimeError(
                f"{api}: the transformation's update returned a state of structure {treedef}, "
                f"but its init gave {self._treedef}; the state variables cannot hold it.\nFix: "
                "use a transformation whose update keeps the structure of its state."
            )
        for slot, leaf in zip(self._slots, new_leaves):
            slot.assign(leaf)
        for var, p, u in zip(self._var_list, params, updates):
            _write(var, (jnp.asarray(p) + u).astype(var.dtype), replica)
        self._iterations.assign_add(1)

    def minimize(self, loss: Callable[[list[Any]], Any], var_list: Any, tape: Any = None) -> Any:
        """Takes the gradient of ``loss`` and applies it (``Optimizer.minimize``).

        JAX differentiates functions, so ``loss`` takes the variables' values
        (a list in ``var_list`` order) instead of reading the variables itself.

        Args:
          loss: a function ``loss(values) -> scalar``.
          var_list: the variables, or a callable returning them.
          tape: TensorFlow's ``GradientTape``; must be None.

        Returns:
          The ``iterations`` variable, incremented.
        """
        api = self._api("minimize")
        if tape is not None:
            raise TypeError(
                f"{api}: `tape` is TensorFlow's GradientTape; JAX differentiates functions.\nFix: "
                "drop tape= and pass `loss` as a function of the variables' values."
            )
        if callable(var_list) and not isinstance(var_list, Variable):
            var_list = var_list()
        variables = list(var_list)
        self._check_variables(variables, api)
        if not callable(loss):
            raise TypeError(
                f"{api}: `loss` must be a function of the variables' values; received a "
                f"{type(loss).__name__} (a computed loss cannot be differentiated afterwards).\n"
                "Fix: optimizer.minimize(lambda values: loss_fn(values, batch), var_list)."
            )
        try:
            takes_values = any(
                p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
                for p in inspect.signature(loss).parameters.values()
            )
        except (TypeError, ValueError):  # builtins without a signature: try the call
            takes_values = True
        if not takes_values:
            raise TypeError(
                f"{api}: `loss` takes no arguments. In TensorFlow it reads the variables under a "
                "GradientTape; in JAX the gradient is taken with respect to a function's "
                "arguments.\nFix: write it as loss(values), where values[i] is the value of "
                "var_list[i], e.g. optimizer.minimize(lambda vs: loss_fn(vs, batch), var_list)."
            )
        grads = jax.grad(loss)([v.read_value() for v in variables])
        return self.apply_gradients(zip(grads, variables))

    def __repr__(self) -> str:
        return f"<tps.optimizers.{type(self).__name__} name={self._name!r}>"


def _write(var: Any, new: Any, replica: bool) -> None:
    """Sets every copy of ``var`` to ``new`` (the same on every replica), whatever its aggregation.

    A variable's ``constraint`` (``tps.Variable(..., constraint=fn)``) is applied to the
    updated value, as Keras optimizers apply it after each step.
    """
    constraint = getattr(var, "constraint", None)
    if constraint is not None:
        new = jnp.asarray(constraint(new)).astype(var.dtype)
    if replica and var.strategy is not None and var.aggregation is VariableAggregation.SUM:
        # SUM would add the R equal copies of `new`: only replica 0 contributes it.
        rid = get_replica_context().replica_id_in_sync_group
        new = jnp.where(rid == 0, new, jnp.zeros_like(new))
    var.assign(new)
