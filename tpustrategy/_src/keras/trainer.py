"""Keras's JAX trainer under a strategy: ``compile``, ``fit``, ``evaluate``, ``predict``.

Keras's own trainer does the work (its jitted ``train_step`` with state laid
out by the strategy's distribution, see ``distribution``). This module adds:

- the model's strategy is Keras's distribution for the whole call, also when
  ``fit`` is called after ``strategy.scope()`` ended (TensorFlow's guide does);
- ``tpsd`` datasets and distributed datasets as ``x`` (``data``);
- ``steps_per_execution=N`` as one compiled program per N steps (``steps``),
  never past ``steps_per_epoch``;
- ``tps.optimizers`` / ``tps.metrics`` in ``compile`` are refused with the
  name of the Keras equivalent.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import tpustrategy._src.keras.data as data_lib
import tpustrategy._src.keras.distribution as distribution


def model_strategy(model: Any) -> Any:
    """The strategy a model's variables belong to (or the current scope's), else None."""
    from tpustrategy._src.keras.ownership import layer_strategy, strategy_of

    found = strategy_of(list(getattr(model, "variables", []) or []))
    if found is None:
        found = distribution.strategy_of_distribution(distribution.current())
    if found is None:
        found = layer_strategy(model)   # created in a scope, not built yet (tf.keras: the model's strategy)
    return found


@contextlib.contextmanager
def _under(model: Any) -> Any:
    strategy = model_strategy(model)
    if strategy is None:
        yield None
        return
    dist = distribution.for_strategy(strategy)
    if distribution.current() is dist:
        yield strategy
        return
    with dist.scope():
        yield strategy


def _equivalent(obj: Any, family: str) -> str:
    return f"keras.{family}.{type(obj).__name__}(...)"


def check_compile_arguments(optimizer: Any, metrics: Any, weighted_metrics: Any) -> None:
    """Refuses tps.optimizers / tps.metrics, naming the Keras class to use instead."""
    import jax

    from tpustrategy._src.metrics.base import Metric
    from tpustrategy._src.optimizers.optimizer import Optimizer

    if isinstance(optimizer, Optimizer):
        raise TypeError(
            f"Model.compile: `optimizer` is a tps.optimizers.{type(optimizer).__name__}, which updates "
            "tps.Variables; Keras's trainer needs a Keras optimizer. Received: "
            f"optimizer={optimizer!r:.60}.\nFix: pass {_equivalent(optimizer, 'optimizers')} with the same "
            "arguments (created under strategy.scope() it applies all-reduced gradients)."
        )
    for group, name in ((metrics, "metrics"), (weighted_metrics, "weighted_metrics")):
        for m in jax.tree_util.tree_leaves(group, is_leaf=lambda x: isinstance(x, Metric)):
            if isinstance(m, Metric):
                raise TypeError(
                    f"Model.compile: `{name}` holds a tps.metrics.{type(m).__name__}; Keras's trainer "
                    f"needs Keras metrics. Received: {m!r:.60}.\nFix: pass {_equivalent(m, 'metrics')} "
                    "(created under strategy.scope() its state is sync-on-read, as in tf.keras)."
                )


def _array_batches(adapter: Any, dist: Any) -> Any:
    """Keras's own adapters (arrays, generators) under a strategy: each batch laid out by its own shape.

    Keras computes the layouts once from the first batch; a partial last batch then raises
    ``IndivisibleError``. Here a batch the replicas do not divide is replicated instead.
    """
    import jax
    import keras
    import numpy as np

    import tpustrategy._src.keras.internals as internals

    layouts: dict[tuple[Any, ...], Any] = {}
    several = jax.process_count() > 1

    def place(d: Any) -> Any:
        if d is None:
            return None
        shape = tuple(d.shape)
        layout = layouts.get(shape)
        if layout is None:
            layout = layouts[shape] = dist.get_data_layout(shape).backend_layout
        if several:
            # Every process holds the same arrays (TensorFlow shards NumPy input across workers): the
            # batch is the global batch, each process placing its devices' rows, so every example is
            # counted once (Keras's own rule would take each process's copy as more examples).
            host = np.asarray(d)
            return jax.make_array_from_callback(shape, layout, lambda index: host[index])
        return internals.distribute_data_input(d, layout, dist.batch_dim_name)

    for data in adapter.get_jax_iterator():
        yield keras.tree.map_structure(place, data)


def _adopt_outside_metrics(strategy: Any, *groups: Any) -> None:
    """Keras metrics made outside every scope, compiled into a model of ``strategy``: their
    variables become the strategy's (``variables.move_to``), as tf.keras updates such a metric
    in every replica; otherwise Keras's step would mix one-device and mesh state."""
    import jax
    import keras

    import tpustrategy._src.keras.variables as variables_lib
    from tpustrategy._src.context import contracts

    if strategy is None or contracts.is_default(strategy):
        return
    for group in groups:
        for m in jax.tree_util.tree_leaves(group, is_leaf=lambda x: isinstance(x, keras.metrics.Metric)):
            if isinstance(m, keras.metrics.Metric):
                for v in m.variables:
                    variables_lib.move_to(v, strategy, m)


def wrap_compile(original: Any) -> Any:
    @functools.wraps(original)
    def compile(self: Any, optimizer: Any = "rmsprop", *args: Any, **kwargs: Any) -> Any:
        # compile(optimizer, loss, loss_weights, metrics, weighted_metrics, ...)
        metrics = kwargs.get("metrics", args[2] if len(args) > 2 else None)
        weighted = kwargs.get("weighted_metrics", args[3] if len(args) > 3 else None)
        check_compile_arguments(optimizer, metrics, weighted)
        with _under(self) as strategy:
            _adopt_outside_metrics(strategy, metrics, weighted)
            return original(self, optimizer, *args, **kwargs)

    return compile


def _wrap_entry(original: Any, name: str) -> Any:
    @functools.wraps(original)
    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        x = args[0] if args else kwargs.get("x")
        if data_lib.is_tps_dataset(x):
            y = args[1] if len(args) > 1 and name != "predict" else kwargs.get("y")
            data_lib.check_unused(f"Model.{name}", y, kwargs.get("sample_weight"), kwargs.get("batch_size"))
            if kwargs.get("class_weight") is not None and data_lib.is_distributed_dataset(x):
                data_lib.refuse_class_weight(kwargs["class_weight"])
        with _under(self) as strategy:
            if strategy is not None:
                import tpustrategy._src.keras.steps as steps

                steps.install_functions(self, strategy)
            return original(self, *args, **kwargs)

    return wrapped


def wrap_fit(original: Any) -> Any:
    return _wrap_entry(original, "fit")


def wrap_evaluate(original: Any) -> Any:
    return _wrap_entry(original, "evaluate")


def wrap_predict(original: Any) -> Any:
    return _wrap_entry(original, "predict")


def wrap_get_data_adapter(original: Any) -> Any:
    @functools.wraps(original)
    def get_data_adapter(x: Any, y: Any = None, sample_weight: Any = None, batch_size: Any = None,
                         steps_per_epoch: Any = None, shuffle: Any = False, class_weight: Any = None) -> Any:
        if data_lib.is_tps_dataset(x):
            strategy = distribution.strategy_of_distribution(distribution.current())
            if strategy is None and data_lib.is_distributed_dataset(x):
                strategy = x._strategy if hasattr(x, "_strategy") else None
            return data_lib.adapter_class()(x, strategy, steps_per_epoch, class_weight)
        return original(x, y=y, sample_weight=sample_weight, batch_size=batch_size,
                        steps_per_epoch=steps_per_epoch, shuffle=shuffle, class_weight=class_weight)

    return get_data_adapter


def wrap_get_iterator(original: Any) -> Any:
    @functools.wraps(original)
    def _get_iterator(self: Any) -> Any:
        if isinstance(self.data_adapter, data_lib.adapter_class()):
            return self.data_adapter.get_jax_iterator()  # already global arrays on the mesh
        dist = distribution.current()
        if distribution.strategy_of_distribution(dist) is not None:
            return _array_batches(self.data_adapter, dist)
        return original(self)

    return _get_iterator


def wrap_next(original: Any) -> Any:
    import tpustrategy._src.keras.steps as steps

    @functools.wraps(original)
    def __next__(self: Any) -> Any:
        begin, end, iterator = original(self)
        limit = self.steps_per_epoch or self._num_batches
        if limit and self.steps_per_execution > 1:
            count = max(0, min(self.steps_per_execution, limit - begin))
            return begin, begin + count - 1, steps.Limited(iterator, count)
        return begin, end, iterator

    return __next__
