"""Every Keras 3 attribute tpustrategy replaces, as one table installed and uninstalled as a unit.

``TABLE`` lists each patched attribute: its owner (a ``keras.src`` module and class, or the
module itself), its name, the signature of Keras's original it was written against, and the
function that makes the wrapper from that original. ``install`` (on the first
``strategy.scope()`` after ``import keras``) checks every signature first, so a Keras release
that changed one fails loudly before anything is replaced, then replaces them all;
``uninstall`` puts Keras's own attributes back exactly. Each wrapper calls Keras's original and
changes behaviour only for objects that belong to a strategy:

- ``JaxVariable._initialize_layout``: a variable made under a strategy's scope (or in a replica
  function / ``tps.function`` of one) is the strategy's; one made outside everything is the
  default strategy's;
- ``JaxVariable._initialize_with_initializer``: inside a traced step the initializer runs
  concretely, once (TensorFlow lifts a ``tf.function``'s variable initializers out of it);
- ``Layer.__new__`` / ``Layer._maybe_build``: a layer remembers the strategy it was created
  under and is built under it, also when first called (or fitted) outside the scope;
- ``BaseOptimizer.apply``: in a replica function gradients are all-reduced (SUM) first —
  tf.keras's ``apply_gradients`` rule — and an optimizer first built inside a traced step
  builds its state concretely, under the strategy;
- ``Trainer.compile`` / ``JAXTrainer.fit`` / ``evaluate`` / ``predict``, ``get_data_adapter``,
  ``JAXEpochIterator._get_iterator`` / ``__next__``: see ``trainer``;
- ``BatchNormalization.__init__`` / ``_moments``: ``synchronized=True`` is accepted and gives
  the global batch's moments (tf-keras's ``SyncBatchNormalization``, see ``sync_batch_norm``);
- ``BackupAndRestore._save_model`` / ``on_train_begin`` / ``on_train_end``,
  ``ModelCheckpoint._save_model``: on several processes only the chief writes the real files
  (see ``callbacks``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any

import tpustrategy._src.keras.variables as variables_lib
from tpustrategy._src.keras.ownership import layer_strategy, strategy_of


@dataclasses.dataclass(frozen=True)
class Patch:
    """One replaced Keras attribute."""

    module: str          # under keras.src
    owner: str | None    # a class of that module, or None for the module itself
    name: str
    signature: str       # str(inspect.signature(original)) of the Keras it was written against
    make: Callable[[Any], Any]   # Keras's original -> the wrapper

    @property
    def where(self) -> str:
        return f"keras.src.{self.module}.{self.owner + '.' if self.owner else ''}{self.name}"

    def resolve(self) -> Any:
        """The object the attribute lives on (class or module)."""
        module = importlib.import_module(f"keras.src.{self.module}")
        return getattr(module, self.owner) if self.owner else module


_ORIGINALS: dict[Patch, Any] = {}


def check_seams() -> None:
    """Raises ImportError naming the first private Keras name that moved (``internals.check_seams``)."""
    import tpustrategy._src.keras.internals as internals

    internals.check_seams()


def check_signatures() -> None:
    """Raises ImportError naming the first patched Keras attribute that is missing or has another signature."""
    for patch in table():
        owner = patch.resolve()
        current = _ORIGINALS.get(patch, getattr(owner, patch.name, None))
        if current is None:
            raise ImportError(
                f"tpustrategy's Keras support replaces {patch.where}, which this Keras does not have.\n"
                "Fix: install the tested Keras range (pip install 'tpustrategy[keras]').")
        got = str(inspect.signature(current))
        if got != patch.signature:
            raise ImportError(
                f"tpustrategy's Keras support replaces {patch.where}, written against the signature "
                f"{patch.signature}; this Keras has {got}.\n"
                "Fix: install the tested Keras range (pip install 'tpustrategy[keras]').")


def installed() -> bool:
    return bool(_ORIGINALS)


def install() -> None:
    """Replaces every attribute of ``table()`` (idempotent); nothing is replaced if one does not match."""
    if _ORIGINALS:
        return
    check_seams()
    check_signatures()
    for patch in table():
        owner = patch.resolve()
        original = vars(owner)[patch.name]
        _ORIGINALS[patch] = original
        setattr(owner, patch.name, patch.make(original))


def uninstall() -> None:
    """Puts Keras's own attributes back, exactly the objects that were replaced."""
    for patch in reversed(table()):
        if patch in _ORIGINALS:
            setattr(patch.resolve(), patch.name, _ORIGINALS.pop(patch))


def original(owner: str | None, name: str) -> Any:
    """Keras's own attribute behind an installed patch (the attribute itself when not installed)."""
    for patch in table():
        if patch.owner == owner and patch.name == name:
            return _ORIGINALS.get(patch, vars(patch.resolve())[name])
    raise KeyError(f"{owner}.{name} is not patched")


def _replica_context() -> Any:
    from tpustrategy._src.variables import updates

    return updates._replica_context()


def _in_trace() -> bool:
    from tpustrategy._src.variables import frames

    return frames.current() is not None


def _scope_strategy() -> Any:
    """The strategy whose scope or replica function is current (None outside all and for the default)."""
    import tpustrategy._src.keras.distribution as distribution
    from tpustrategy._src.context import stack as context

    found = distribution.strategy_of_distribution(distribution.current())
    if found is None and context.has_strategy():
        found = context.current_strategy()
    return found


# Wrappers ------------------------------------------------------------------------------------

def _wrap_apply(original: Any) -> Any:
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

    return apply


def _wrap_initialize_layout(original: Any) -> Any:
    """A variable created with a layout of its own (an optimizer slot copies its weight's) is adopted too."""
    import tpustrategy._src.keras.distribution as distribution
    import tpustrategy._src.keras.internals as internals

    @functools.wraps(original)
    def _initialize_layout(self: Any) -> None:
        original(self)
        if variables_lib.state_of(self) is not None:
            return
        dist = distribution.current()
        if distribution.strategy_of_distribution(dist) is not None:
            layout = internals.variable_layout(self)
            dist.get_variable_layout(self)
            internals.set_variable_layout(self, layout)
        elif dist is None:
            # In a replica function or tps.function of a strategy (a model built at its first call
            # there) the variable is that strategy's; outside everything the default strategy's
            # (TensorFlow's rule), so a model, optimizer or metric made there works in tps.function too.
            strategy = _scope_strategy()
            if strategy is None:
                from tpustrategy._src.strategy.default import default_strategy

                strategy = default_strategy()
            variables_lib.adopt(self, strategy, distribution._current_caller())

    return _initialize_layout


def _wrap_initialize_with_initializer(original: Any) -> Any:
    @functools.wraps(original)
    def _initialize_with_initializer(self: Any, initializer: Any) -> None:
        if not _in_trace():
            return original(self, initializer)
        import jax

        # Created in a traced step (a model built at its first call): the initializer runs once,
        # concretely, as TensorFlow lifts a tf.function's variable initializers out of the graph.
        with jax.ensure_compile_time_eval():
            return original(self, initializer)

    return _initialize_with_initializer


def _wrap_layer_new(original: Any) -> Any:
    # __new__, not __init__: Keras reads each layer class's __init__ signature for its config.
    def __new__(cls: Any, *args: Any, **kwargs: Any) -> Any:
        self = original(cls, *args, **kwargs)
        strategy = _scope_strategy()
        if strategy is not None:
            self.__dict__["_tps_strategy"] = strategy   # tf.keras: a model keeps its creation scope's strategy
        return self

    functools.update_wrapper(__new__, original)
    return staticmethod(__new__)


def _wrap_maybe_build(original: Any) -> Any:
    import tpustrategy._src.keras.distribution as distribution

    @functools.wraps(original)
    def _maybe_build(self: Any, call_spec: Any) -> Any:
        strategy = None if self.built else layer_strategy(self)
        if strategy is None or _scope_strategy() is not None:
            return original(self, call_spec)
        with distribution.for_strategy(strategy).scope():   # built outside its scope: under its strategy
            return original(self, call_spec)

    return _maybe_build


def build_for(optimizer: Any, variables: list[Any], strategy: Any) -> None:
    """Builds a Keras optimizer's state under ``strategy`` with concrete values (also mid-trace)."""
    import jax
    import keras

    import tpustrategy._src.keras.distribution as distribution

    dist = distribution.for_strategy(strategy)
    scope = dist.scope() if distribution.current() is not dist else contextlib.nullcontext()
    with scope, jax.ensure_compile_time_eval(), keras.name_scope(optimizer.name, caller=optimizer):
        optimizer.build(variables)
    optimizer.built = True


def _trainer_patch(name: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        import tpustrategy._src.keras.trainer as trainer

        return getattr(trainer, f"wrap_{name}")(original)

    return make


def _batch_norm_patch(name: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        import tpustrategy._src.keras.sync_batch_norm as sync_batch_norm

        return getattr(sync_batch_norm, f"wrap_{name}")(original)

    return make


def _callback_patch(name: str) -> Callable[[Any], Any]:
    def make(original: Any) -> Any:
        import tpustrategy._src.keras.callbacks as callbacks

        return getattr(callbacks, f"wrap_{name}")(original)

    return make


_FIT_SIGNATURE = ("(self, x=None, y=None, batch_size=None, epochs=1, verbose='auto', callbacks=None, "
                  "validation_split=0.0, validation_data=None, shuffle=True, class_weight=None, "
                  "sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None, "
                  "validation_batch_size=None, validation_freq=1)")

_TABLE: tuple[Patch, ...] = (
    Patch("optimizers.base_optimizer", "BaseOptimizer", "apply",
          "(self, grads, trainable_variables=None)", _wrap_apply),
    Patch("backend.jax.core", "JaxVariable", "_initialize_layout", "(self)", _wrap_initialize_layout),
    Patch("backend.jax.core", "JaxVariable", "_initialize_with_initializer", "(self, initializer)",
          _wrap_initialize_with_initializer),
    Patch("layers.layer", "Layer", "__new__", "(cls, *args, **kwargs)", _wrap_layer_new),
    Patch("layers.layer", "Layer", "_maybe_build", "(self, call_spec)", _wrap_maybe_build),
    Patch("trainers.trainer", "Trainer", "compile",
          "(self, optimizer='rmsprop', loss=None, loss_weights=None, metrics=None, weighted_metrics=None, "
          "run_eagerly=False, steps_per_execution=1, jit_compile='auto', auto_scale_loss=True)",
          _trainer_patch("compile")),
    Patch("backend.jax.trainer", "JAXTrainer", "fit", _FIT_SIGNATURE, _trainer_patch("fit")),
    Patch("backend.jax.trainer", "JAXTrainer", "evaluate",
          "(self, x=None, y=None, batch_size=None, verbose='auto', sample_weight=None, steps=None, "
          "callbacks=None, return_dict=False, **kwargs)", _trainer_patch("evaluate")),
    Patch("backend.jax.trainer", "JAXTrainer", "predict",
          "(self, x, batch_size=None, verbose='auto', steps=None, callbacks=None)", _trainer_patch("predict")),
    # epoch_iterator reads it as data_adapters.get_data_adapter: the same module attribute.
    Patch("trainers.data_adapters", None, "get_data_adapter",
          "(x, y=None, sample_weight=None, batch_size=None, steps_per_epoch=None, shuffle=False, "
          "class_weight=None)", _trainer_patch("get_data_adapter")),
    Patch("backend.jax.trainer", "JAXEpochIterator", "_get_iterator", "(self)", _trainer_patch("get_iterator")),
    Patch("backend.jax.trainer", "JAXEpochIterator", "__next__", "(self)", _trainer_patch("next")),
    Patch("layers.normalization.batch_normalization", "BatchNormalization", "__init__",
          "(self, axis=-1, momentum=0.99, epsilon=0.001, center=True, scale=True, beta_initializer='zeros', "
          "gamma_initializer='ones', moving_mean_initializer='zeros', moving_variance_initializer='ones', "
          "beta_regularizer=None, gamma_regularizer=None, beta_constraint=None, gamma_constraint=None, "
          "renorm=False, renorm_clipping=None, renorm_momentum=0.99, synchronized=False, **kwargs)",
          _batch_norm_patch("init")),
    Patch("layers.normalization.batch_normalization", "BatchNormalization", "_moments", "(self, inputs, mask)",
          _batch_norm_patch("moments")),
    Patch("callbacks.backup_and_restore", "BackupAndRestore", "_save_model", "(self)",
          _callback_patch("backup_save")),
    Patch("callbacks.backup_and_restore", "BackupAndRestore", "on_train_begin", "(self, logs=None)",
          _callback_patch("backup_train_begin")),
    Patch("callbacks.backup_and_restore", "BackupAndRestore", "on_train_end", "(self, logs=None)",
          _callback_patch("backup_train_end")),
    Patch("callbacks.model_checkpoint", "ModelCheckpoint", "_save_model", "(self, epoch, batch, logs)",
          _callback_patch("checkpoint_save")),
)


def table() -> tuple[Patch, ...]:
    """Every patched Keras attribute, in installation order."""
    return _TABLE
