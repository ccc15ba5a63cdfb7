"""``Metric``: a streaming statistic kept in sync-on-read variables.

A metric's state (a running total, a count) lives in ``tps.Variable``s
created with ``synchronization=ON_READ`` and ``aggregation=SUM``, as Keras
creates metric weights under a ``tf.distribute`` strategy. Each replica adds
its own batch's contribution to its own component, with no communication;
reading the state sums the components, so a result covers every example seen
by every replica, whatever the size of each replica's piece.

Where the state is touched decides how (the same numbers in every case):

- replica context (inside ``strategy.run``): ``update_state`` adds to this
  replica's component; ``result`` all-reduces the components (SUM), so every
  replica returns the global result (Keras does the same with ``merge_call``).
- cross-replica context (under ``strategy.scope()``, in ``tps.function``
  outside ``run``, or after the loop): ``update_state`` adds to the aggregate
  (written as ``assign(total + delta)``: TensorFlow refuses ``assign_add`` on a
  SUM sync-on-read variable there); ``result`` reads the aggregate.
- no strategy (the metric was created outside any scope): plain variables.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
import numpy as np

from tpustrategy._src.reduce_op import ReduceOp
from tpustrategy._src.strategy.context import (
    get_replica_context,
    has_strategy,
    in_cross_replica_context,
)
from tpustrategy._src.variables.enums import VariableAggregation, VariableSynchronization
from tpustrategy._src.variables.variable import Variable

_FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _canonical_dtype(dtype: Any, api: str) -> Any:
    if dtype is None:
        return jnp.dtype(jnp.float32)
    try:
        resolved = jnp.dtype(dtype)
    except TypeError:
        resolved = None
    if resolved is None or not jnp.issubdtype(resolved, jnp.floating):
        raise ValueError(
            f"{api}: got dtype={dtype!r}, but a metric keeps a running "
            f"total and count in floating point.\nFix: pass one of {', '.join(_FLOAT_DTYPES)} "
            "(default float32)."
        )
    return resolved


def in_replica_context() -> bool:
    """True inside a replica function of a real (non-default) strategy."""
    return has_strategy() and not in_cross_replica_context()


def _is_distributed_on_read(var: Any) -> bool:
    return var.strategy is not None and var.synchronization is VariableSynchronization.ON_READ


def read(*variables: Any) -> Any:
    """The variables' values summed over replicas, in any context (one all-reduce for all).

    Returns:
      One value for one variable, else a list in the same order.
    """
    values = [v.read_value() for v in variables]
    if in_replica_context():
        summed = [i for i, v in enumerate(variables) if _is_distributed_on_read(v)]
        if summed:
            reduced = get_replica_context().all_reduce(ReduceOp.SUM, [values[i] for i in summed])
            for i, r in zip(summed, reduced):
                values[i] = r
    return values[0] if len(values) == 1 else values


def add(var: Any, delta: Any) -> None:
    """Adds ``delta`` to the variable's aggregate (to this replica's part in replica context)."""
    delta = jnp.asarray(delta, var.dtype)
    if _is_distributed_on_read(var) and not in_replica_context():
        # Cross-replica assign of a SUM sync-on-read variable writes value / R to each
        # component (TensorFlow's rule), so the components again sum to total + delta.
        var.assign(var.read_value() + delta)
    else:
        var.assign_add(delta)


class Metric(abc.ABC):
    """Base class of ``tps.metrics``: state in sync-on-read variables (``tf.keras.metrics.Metric``).

    Subclasses create their state with ``add_weight`` (or ``add_variable``) in
    ``__init__``, accumulate into it in ``update_state`` with ``assign_add``, and
    compute ``result`` from ``self.read_state(...)`` of it.

    Args:
      name: the metric's name.
      dtype: the floating dtype of the state and of ``result()`` (default float32).

    Example:
      >>> with strategy.scope():
      ...     loss_metric = tps.metrics.Mean(name="train_loss")
      >>> strategy.run(lambda x: loss_metric.update_state(x), args=(per_replica_losses,))
      >>> float(loss_metric.result())
    """

    def __init__(self, name: str | None = None, dtype: Any = None):
        self._name = name if name is not None else type(self).__name__.lower()
        self._dtype = _canonical_dtype(dtype, f"tps.metrics.{type(self).__name__}({self._name!r})")
        self._variables: list[Any] = []

    # Properties -----------------------------------------------------------------
    @property
    def name(self) -> str:
        """The metric's name."""
        return self._name

    @property
    def dtype(self) -> Any:
        """The dtype of the state and of ``result()``."""
        return self._dtype

    @property
    def variables(self) -> list[Any]:
        """The state variables (sync-on-read ``tps.Variable``s under a strategy)."""
        return list(self._variables)

    # State --------------------------------------------------------------------------
    def add_variable(self, name: str, shape: Sequence[int] = (), initializer: Any = "zeros",
                     dtype: Any = None) -> Any:
        """Creates a state variable (``Metric.add_weight`` in Keras).

        Under a strategy it is sync-on-read with SUM aggregation: every replica
        accumulates into its own component and a read sums them.

        Args:
          name: the variable's name.
          shape: its shape.
          initializer: ``"zeros"``, ``"ones"``, an array, or a callable
            ``(shape, dtype) -> array``.
          dtype: its dtype (default: the metric's).

        Returns:
          The new ``tps.Variable``.
        """
        dtype = jnp.dtype(dtype or self._dtype)
        shape = tuple(shape)
        if isinstance(initializer, str):
            makers = {"zeros": np.zeros, "ones": np.ones}
            if initializer not in makers:
                raise ValueError(
                    f"tps.metrics.{type(self).__name__}.add_variable: unknown initializer "
                    f"{initializer!r} for {name!r}.\nFix: pass 'zeros', 'ones', an array, or a "
                    "callable (shape, dtype) -> array."
                )
            value = makers[initializer](shape, dtype)
        elif callable(initializer):
            value = initializer(shape, dtype)
        else:
            value = np.broadcast_to(np.asarray(initializer, dtype), shape)
        var = Variable(
            value,
            name=name,
            dtype=dtype,
            trainable=False,
            synchronization=VariableSynchronization.ON_READ,
            aggregation=VariableAggregation.SUM,
        )
        self._variables.append(var)
        return var

    add_weight = add_variable

    def read_state(self, *variables: Any) -> Any:
        """The state variables' values summed over replicas, in any context.

        ``result()`` of a custom metric reads its state with this, so that inside
        ``strategy.run`` every replica gets the global result (one all-reduce for
        all the variables), as Keras's ``result()`` does.

        Args:
          *variables: state variables of this metric.

        Returns:
          One value for one variable, else a list in the same order.
        """
        return read(*variables)

    @abc.abstractmethod
    def update_state(self, *args: Any, **kwargs: Any) -> None:
        """Accumulates statistics for one batch (this replica's piece in replica context)."""

    @abc.abstractmethod
    def result(self) -> Any:
        """The metric's value over everything accumulated so far, on every replica."""

    def reset_state(self) -> None:
        """Sets every state variable back to zero (call between epochs)."""
        for var in self._variables:
            var.assign(jnp.zeros(var.shape, var.dtype))

    def reset_states(self) -> None:
        """Alias of ``reset_state`` (the Keras 2 name)."""
        self.reset_state()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``update_state(*args, **kwargs)``, then ``result()`` (as Keras metrics do)."""
        self.update_state(*args, **kwargs)
        return self.result()

    def __repr__(self) -> str:
        return f"<tps.metrics.{type(self).__name__} name={self._name!r}>"
