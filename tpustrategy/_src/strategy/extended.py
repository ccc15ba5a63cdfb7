"""``strategy.extended``: the ``tf.distribute.StrategyExtended`` methods TensorFlow code calls.

Keras optimizers, custom loops and TensorFlow's own tests reach for
``strategy.extended.reduce_to`` / ``batch_reduce_to`` / ``update`` and a few
properties; they map onto the strategy's reduce and context machinery. The
destination of a reduction is validated but does not move data: a reduced
value lives replicated on every replica's device (``Mirrored``), which is
where any destination would read it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax

from tpustrategy._src.strategy import context
from tpustrategy._src.values.distributed import DistributedValues, Mirrored


def _check_destinations(destinations: Any, api: str) -> None:
    if destinations is None:
        raise ValueError(f"strategy.extended.{api}: `destinations` must not be None.")
    ok = (isinstance(destinations, (str, jax.Device, DistributedValues))
          or hasattr(destinations, "read_value") or isinstance(destinations, jax.Array))
    if not ok:
        raise TypeError(
            f"strategy.extended.{api}: `destinations` must be a device string, a jax.Device, a variable or a "
            f"distributed value. Received: {destinations!r} ({type(destinations).__name__})."
        )


class StrategyExtended:
    """Additional strategy APIs (``strategy.extended``)."""

    def __init__(self, strategy: Any):
        self._strategy = strategy

    # Reductions --------------------------------------------------------------------------
    def reduce_to(self, reduce_op: Any, value: Any, destinations: Any, options: Any = None) -> Any:
        """Reduces ``value`` across replicas; the result is on every replica (``Mirrored``).

        Args:
          reduce_op: ``ReduceOp.SUM``/``MEAN`` or a string.
          value: a ``PerReplica``/``Mirrored`` or a value equal on every replica.
          destinations: where TensorFlow would place the result (validated only).
          options: a ``tps.experimental.CommunicationOptions`` (accepted).
        """
        _check_destinations(destinations, "reduce_to")
        return self._replicate(self._strategy.reduce(reduce_op, value, axis=None))

    def batch_reduce_to(self, reduce_op: Any, value_destination_pairs: Any, options: Any = None) -> list[Any]:
        """``reduce_to`` for each ``(value, destinations)`` pair, in order."""
        pairs = list(value_destination_pairs)
        for pair in pairs:
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise ValueError(
                    "strategy.extended.batch_reduce_to: `value_destination_pairs` must be a list of "
                    f"(value, destinations) pairs. Received an element {pair!r}."
                )
        return [self.reduce_to(reduce_op, v, d, options) for v, d in pairs]

    def _replicate(self, reduced: Any) -> Any:
        n = self._strategy.num_replicas_in_sync
        if n == 1:
            return reduced
        from tpustrategy._src.execution.program import Placement

        placement = Placement.of(self._strategy)
        return jax.tree_util.tree_map(
            lambda x: Mirrored.from_replicated(placement.put(jax.numpy.asarray(x), False), n), reduced)

    # Updates -----------------------------------------------------------------------------
    def update(self, var: Any, fn: Callable[..., Any], args: Any = (), kwargs: Any = None, group: bool = True) -> Any:
        """Runs ``fn(var, *args, **kwargs)`` in cross-replica context (how optimizers update variables)."""
        with self._strategy.scope() if context.get_replica_context() is None else contextlib.nullcontext():
            return fn(var, *tuple(args), **dict(kwargs or {}))

    def call_for_each_replica(self, fn: Callable[..., Any], args: Any = (), kwargs: Any = None) -> Any:
        return self._strategy.run(fn, args, kwargs)

    def experimental_logical_device(self, logical_device_id: int) -> Any:
        """Accepted and validated: under SPMD partitioning XLA places variables on the cores."""
        from tpustrategy._src.strategy.logical_devices import logical_device_scope

        return logical_device_scope(self._strategy, logical_device_id)

    def value_container(self, value: Any) -> Any:
        return value

    @contextlib.contextmanager
    def colocate_vars_with(self, colocate_with_variable: Any) -> Iterator[None]:
        yield

    def variable_created_in_scope(self, v: Any) -> bool:
        """Whether ``v`` was created under this strategy's scope."""
        return getattr(v, "_strategy", None) is self._strategy

    # Properties ---------------------------------------------------------------------------
    @property
    def worker_devices(self) -> tuple[Any, ...]:
        return self._strategy.worker_devices

    @property
    def parameter_devices(self) -> tuple[Any, ...]:
        return self._strategy.worker_devices

    @property
    def experimental_require_static_shapes(self) -> bool:
        from tpustrategy._src.strategy.strategies import TPUStrategy

        return isinstance(self._strategy, TPUStrategy)

    @property
    def experimental_between_graph(self) -> bool:
        return False

    @property
    def experimental_should_init(self) -> bool:
        return True

    @property
    def should_checkpoint(self) -> bool:
        return True

    @property
    def should_save_summary(self) -> bool:
        return jax.process_index() == 0

    @property
    def num_replicas_in_sync(self) -> int:
        return self._strategy.num_replicas_in_sync

    def __getattr__(self, name: str) -> Any:
        # Anything else TensorFlow code reads from `extended` that the strategy itself has.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._strategy, name)
