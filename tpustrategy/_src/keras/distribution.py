"""A Keras ``Distribution`` built from a strategy: the bridge for ``strategy.scope()``.

``strategy.scope()`` makes ``StrategyDistribution(strategy)`` Keras's current
distribution (``keras.distribution.set_distribution`` semantics, restored on
exit), so Keras's JAX trainer lays data and variables over ``strategy.mesh``
exactly as ``keras.distribution.DataParallel`` would: the mesh's axes are the
strategy's (``"replica"``, plus ``"core"`` with several cores per replica —
Keras's ``ModelParallel`` shape, where ``experimental_split_to_logical_devices``
or ``layout_map`` split a variable over a replica's cores), data are split
along ``"replica"``. Each variable Keras creates meanwhile is adopted
(``variables.adopt``), which gives it tf.keras's distribution rules.
"""

from __future__ import annotations

import weakref
from typing import Any

import tpustrategy._src.keras.device_mesh as device_mesh
import tpustrategy._src.keras.variables as variables_lib
from tpustrategy._src.values.mesh_axis import REPLICA_AXIS

_BY_STRATEGY: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def _current_caller() -> Any:
    import tpustrategy._src.keras.internals as internals

    stack = internals.global_attribute("name_scope_stack") or []
    return stack[-1].caller if stack else None


def _base() -> type:
    import tpustrategy._src.keras.internals as internals

    return internals.distribution_base()


def for_strategy(strategy: Any) -> Any:
    """The (cached) Keras distribution of ``strategy``."""
    found = _BY_STRATEGY.get(strategy)
    if found is None:
        found = _make_class()(strategy)
        _BY_STRATEGY[strategy] = found
    return found


_CLASS: list[type] = []


def _make_class() -> type:
    if _CLASS:
        return _CLASS[0]
    from keras.distribution import TensorLayout

    import tpustrategy._src.keras.internals as internals

    class StrategyDistribution(_base()):
        """Keras's view of a tps strategy: data split over ``"replica"``, variables adopted."""

        def __init__(self, strategy: Any, layout_map: Any = None):
            # the strategy's own jax Mesh: one set of shardings
            super().__init__(device_mesh.of(strategy), REPLICA_AXIS, auto_shard_dataset=False)
            self.strategy = strategy
            self.layout_map = layout_map

        @property
        def num_model_replicas(self) -> int:
            return self.strategy.num_replicas_in_sync

        def get_data_layout(self, data_shape: Any) -> Any:
            spec = [None] * len(data_shape)
            if spec and data_shape[0] is not None and data_shape[0] % self.strategy.num_replicas_in_sync == 0:
                spec[0] = REPLICA_AXIS
            # else a partial last batch (arrays given to fit/evaluate/predict): every device gets all of it,
            # so Keras computes on exactly the examples single-device Keras would (no IndivisibleError).
            return TensorLayout(spec, self.device_mesh)

        def get_variable_layout(self, variable: Any) -> Any:
            state = variables_lib.adopt(variable, self.strategy, _current_caller())
            if state._kind == variables_lib.SYNC_ON_READ:
                return None  # stored [R, ...] by the adopted class itself
            own = internals.variable_layout(variable)
            if own is not None:
                variables_lib.note_layout(state, own)
                return own
            if self.layout_map is not None:
                found = self.layout_map[variable.path]
                if found is not None:
                    variables_lib.note_layout(state, found)
                    return found
            return TensorLayout([None] * len(variable.shape), self.device_mesh)

        def get_tensor_layout(self, path: str) -> Any:
            return self.layout_map[path] if self.layout_map is not None else None

        def distribute_dataset(self, dataset: Any) -> Any:
            return dataset

        def __repr__(self) -> str:
            return f"<StrategyDistribution of {type(self.strategy).__name__} mesh={dict(self.strategy.mesh.shape)}>"

    _CLASS.append(StrategyDistribution)
    return StrategyDistribution


def current() -> Any:
    """Keras's current distribution (None when none is set)."""
    import keras

    return keras.distribution.distribution()


def strategy_of_distribution(dist: Any) -> Any:
    return getattr(dist, "strategy", None) if _CLASS and isinstance(dist, _CLASS[0]) else None
