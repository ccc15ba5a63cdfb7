"""The few places where tpustrategy wraps Keras 3's own methods (installed once, on first scope).

Each wrapper calls Keras's original and changes behaviour only for objects
that belong to a strategy (their variables were adopted under its scope):

- ``JaxVariable._initialize_layout``: a variable made under a strategy's scope with a
  layout of its own (an optimizer slot) is adopted too, and one made outside any
  scope (and outside any Keras distribution) is the default strategy's;
- ``BaseOptimizer.apply``: in a replica function, gradients are all-reduced
  (SUM) first — tf.keras's ``apply_gradients`` rule — and an optimizer first
  built inside a traced step builds its state concretely, under the strategy;
- ``Trainer.compile`` / ``fit`` / ``evaluate`` / ``predict``: run under the
  model's strategy distribution even outside ``scope()``, refuse
  ``tps.optimizers`` / ``tps.metrics`` naming the Keras equivalent, and
  install the ``steps_per_execution`` programs (``steps``);
- ``data_adapters.get_data_adapter`` and ``JAXEpochIterator._get_iterator``:
  accept ``tpsd.Dataset``s and distributed datasets (``data``).

Every private Keras name is reached through ``internals``, whose ``check_seams`` names each
one; a test calls it so a Keras release that moves one fails loudly.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from tpustrategy._src.keras import internals
from tpustrategy._src.keras import variables as variables_lib

_INSTALLED: list[bool] = []

def check_seams() -> None:
    """Raises ImportError naming the first Keras attribute that moved (``internals.check_seams``)."""
    internals.check_seams()


def strategy_of(variables: Any, include_default: bool = False) -> Any:
    """The strategy of the first adopted Keras variable in ``variables`` (None if none).

    Variables made outside any scope belong to the default strategy; they count only with
    ``include_default`` (Keras's own ``fit`` keeps running such a model as plain Keras).
    """
    found_default = None
    for v in variables or ():
        state = variables_lib.state_of(v) if v is not None else None
        if state is not None and state._strategy is not None:
            if not getattr(state._strategy, "_is_default", False):
                return state._strategy
            found_default = state._strategy
    return found_default if include_default else None


def _replica_context() -> Any:
    from tpustrategy._src.variables import updates

    return updates._replica_context()


def install() -> None:
    """Installs the wrappers (idempotent)."""
    if _INSTALLED:
        return
    check_seams()
    _patch_optimizer()
    _patch_variable_layout()
    from tpustrategy._src.keras import trainer

    trainer.install()
    _INSTALLED.append(True)


def _patch_optimizer() -> None:
    BaseOptimizer = internals.base_optimizer()  # noqa: N806 - a class
    original = BaseOptimizer.apply

    @functools.wraps(original)
    def apply(self: Any, grads: Any, trainable_variables: Any = None) -> Any:
        known = trainable_variables if trainable_variables is not None else getattr(
            self, "_trainable_variables", None)
        strategy = strategy_of(list(known) if known is not None else [], include_default=True)
        if strategy is None:
            return original(self, grads, trainable_variables)
        if trainable_variables is not None and not self.built:
            build_for(self, list(trainable_variables), strategy)
        ctx = _replica_context()
        if ctx is not None and ctx.num_replicas_in_sync > 1:
            grads = list(grads)
            present = [i for i, g in enumerate(grads) if g is not None]
            summed = ctx.all_reduce("SUM", [grads[i] for i in present])
            for i, g in zip(present, summed):
                grads[i] = g
        return original(self, grads, trainable_variables)

    BaseOptimizer.apply = apply
    BaseOptimizer._tps_original_apply = original


def _patch_variable_layout() -> None:
    """A variable created with a layout of its own (an optimizer slot copies its weight's) is adopted too."""
    from tpustrategy._src.keras import distribution

    JaxVariable = internals.jax_variable()  # noqa: N806 - a class

    original = JaxVariable._initialize_layout

    @functools.wraps(original)
    def _initialize_layout(self: Any) -> None:
        original(self)
        dist = distribution.current()
        if variables_lib.state_of(self) is not None:
            return
        if distribution.strategy_of_distribution(dist) is not None:
            layout = self._layout
            dist.get_variable_layout(self)
            self._layout = layout
        elif dist is None:
            # Outside any scope a variable is the default strategy's (TensorFlow's rule), so a model,
            # optimizer or metric made there works in tps.function too (no baked-in or leaked values).
            from tpustrategy._src.strategy.default import default_strategy

            variables_lib.adopt(self, default_strategy(), distribution._current_caller())

    JaxVariable._initialize_layout = _initialize_layout


def build_for(optimizer: Any, variables: list[Any], strategy: Any) -> None:
    """Builds a Keras optimizer's state under ``strategy`` with concrete values (also mid-trace)."""
    import jax
    import keras

    from tpustrategy._src.keras import distribution

    dist = distribution.for_strategy(strategy)
    scope = dist.scope() if distribution.current() is not dist else contextlib.nullcontext()
    with scope, jax.ensure_compile_time_eval(), keras.name_scope(optimizer.name, caller=optimizer):
        optimizer.build(variables)
    optimizer.built = True
