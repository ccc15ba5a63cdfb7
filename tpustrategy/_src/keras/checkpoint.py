"""Keras objects in ``tps.train.Checkpoint``: a model, optimizer or metric is its variables.

``state_tree(obj)`` gives the checkpoint graph a dict of ``tps.Variable``
faces of the object's Keras variables (``variables.checkpoint_state``: the
strategy's companion for adopted variables, a plain one otherwise), keyed by
position and name (``"0003_kernel"``; an optimizer's by position), so the same architecture built again —
under another strategy, another replica count or none — restores by key
even though Keras's auto-generated layer names (``dense_7``) differ.
A Keras optimizer must be built (``optimizer.build(model.trainable_variables)``
or one step) before restoring into it, so its slots exist.
"""

from __future__ import annotations

from typing import Any

import tpustrategy._src.keras.variables as variables_lib
from tpustrategy._src.keras.hook import keras_backend


def _keras_types() -> tuple[type, ...]:
    import keras

    import tpustrategy._src.keras.internals as internals

    return keras.layers.Layer, internals.base_optimizer(), keras.metrics.Metric


def state_tree(obj: Any) -> dict[str, Any] | None:
    """The checkpointable variables of a Keras layer/model, optimizer or metric (None for other objects)."""
    if isinstance(obj, (type, str, int, float, bool)) or obj is None or keras_backend() != "jax":
        return None
    if not isinstance(obj, _keras_types()):
        return None
    layer, optimizer, _ = _keras_types()
    # An optimizer's slot names embed the model's auto-generated path: key them by position only.
    named = not isinstance(obj, optimizer)
    return {f"{i:04d}_{v.name}" if named else f"{i:04d}": variables_lib.checkpoint_state(v)
            for i, v in enumerate(obj.variables)}
