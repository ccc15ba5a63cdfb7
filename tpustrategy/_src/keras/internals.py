"""Every private Keras 3 name tpustrategy's Keras support uses, in one place (``keras.src``).

Public Keras names (``keras.layers.Layer``, ``keras.metrics.Metric``,
``keras.distribution.*``, ``keras.tree``, ``keras.name_scope``) are used directly by the
other modules; this module holds the seams that have no public form: the JAX trainer
and epoch iterator, the data-adapter lookup, the JAX variable class, the optimizer base
class whose ``apply`` is wrapped, the distribution base class, the stateless scope, Keras's global state and its JAX
data distribution. Each is imported only when called, so nothing here runs unless the
user imported Keras. ``check_seams`` names every attribute relied on; a test calls it,
so a Keras release that moves one fails loudly instead of silently doing nothing.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

SEAMS = (   # private names read or called (the replaced ones are patches.TABLE, checked by signature)
    ("keras.src.backend.jax.trainer", "JAXTrainer", "make_train_function"),
    ("keras.src.backend.jax.trainer", "JAXTrainer", "_make_function"),
    ("keras.src.backend.jax.trainer", "JAXTrainer", "_get_state_sharding_spec"),
    ("keras.src.trainers.data_adapters.data_adapter", "DataAdapter", "get_jax_iterator"),
    ("keras.src.trainers.epoch_iterator", None, "data_adapters"),
    ("keras.src.backend.common.stateless_scope", None, "in_stateless_scope"),
    ("keras.src.backend.common.stateless_scope", None, "get_stateless_scope"),
    ("keras.src.backend.common.global_state", None, "get_global_attribute"),
    ("keras.src.backend.jax.distribution_lib", None, "distribute_data_input"),
    ("keras.src.distribution.distribution_lib", "Distribution", "scope"),
    ("keras.src.backend.common.masking", None, "get_keras_mask"),
    ("keras.src.backend.jax.trainer", "JAXTrainer", "_update_metrics_variables"),
    ("keras.src.backend.jax.trainer", "JAXTrainer", "compute_loss_and_updates"),
)

# The trainer methods whose being Keras's own lets ``replica_steps`` run ``train_step`` per replica.
TRAIN_STEP_METHODS = ("train_step", "compute_loss", "compute_loss_and_updates", "compute_metrics",
                      "_update_metrics_variables", "stateless_compute_loss")

# BackupAndRestore's paths, set in its __init__ (instance attributes: checked on an instance).
BACKUP_PATHS = ("backup_dir", "_weights_path", "_training_metadata_path", "_prev_weights_path",
                "_prev_training_metadata_path")


@functools.cache  # variable reads ask for the stateless scope on every read
def _module(name: str) -> ModuleType:
    return importlib.import_module(f"keras.src.{name}")


def check_seams() -> None:
    """Raises ImportError naming the first Keras attribute that moved."""
    for module_name, cls, attr in SEAMS:
        module = importlib.import_module(module_name)
        owner = getattr(module, cls) if cls else module
        if not hasattr(owner, attr):
            where = f"{module_name}.{cls + '.' if cls else ''}{attr}"
            raise ImportError(
                f"tpustrategy's Keras support relies on {where}, which this Keras "
                "does not have.\nFix: install the tested Keras range (pip install 'tpustrategy[keras]')."
            )
    probe = _module("callbacks.backup_and_restore").BackupAndRestore(backup_dir="unused")  # writes nothing
    for attr in BACKUP_PATHS:
        if not isinstance(getattr(probe, attr, None), str):
            raise ImportError(
                f"tpustrategy's Keras support relies on BackupAndRestore's attribute {attr}, which this Keras "
                "does not have.\nFix: install the tested Keras range (pip install 'tpustrategy[keras]')."
            )


def base_optimizer() -> type:
    """The class every Keras optimizer derives from (``apply`` is wrapped on it)."""
    return _module("optimizers.base_optimizer").BaseOptimizer


def jax_variable() -> type:
    return _module("backend.jax.core").JaxVariable


def trainer_methods_are_keras_own(cls: type, names: tuple[str, ...] = TRAIN_STEP_METHODS) -> bool:
    """Whether a model class uses Keras's own JAX-trainer methods ``names`` (none overridden)."""
    trainer, base = jax_trainer().JAXTrainer, base_trainer()
    for name in names:
        mine = getattr(cls, name, None)
        if mine is not getattr(trainer, name, None) and mine is not getattr(base, name, None):
            return False
    return True


def jax_trainer() -> ModuleType:
    """``JAXTrainer`` and ``JAXEpochIterator``."""
    return _module("backend.jax.trainer")


def base_trainer() -> type:
    return _module("trainers.trainer").Trainer


def data_adapters() -> ModuleType:
    return _module("trainers.data_adapters")


def epoch_iterator() -> ModuleType:
    return _module("trainers.epoch_iterator")


def data_adapter() -> type:
    return _module("trainers.data_adapters.data_adapter").DataAdapter


def stateless_scope() -> ModuleType:
    """``in_stateless_scope`` / ``get_stateless_scope`` (``keras.StatelessScope`` is the public class)."""
    return _module("backend.common.stateless_scope")


def keras_mask(x: object) -> object:
    """The mask Keras attached to a layer's output (None when there is none)."""
    return _module("backend.common.masking").get_keras_mask(x)


def global_attribute(name: str) -> object:
    return _module("backend.common.global_state").get_global_attribute(name)


def distribute_data_input(data: object, layout: object, batch_dim_name: str) -> object:
    return _module("backend.jax.distribution_lib").distribute_data_input(data, layout, batch_dim_name)


def distribution_base() -> type:
    """The base class of Keras distributions (public ones are its subclasses, not it)."""
    return _module("distribution.distribution_lib").Distribution


def variable_layout(variable: object) -> object:
    """A Keras variable's layout (``_layout``: Keras has no public reader)."""
    return getattr(variable, "_layout", None)


def set_variable_layout(variable: object, layout: object) -> None:
    variable._layout = layout  # type: ignore[attr-defined]


def set_backend_mesh(device_mesh: object, mesh: object) -> None:
    """Makes a Keras ``DeviceMesh`` use this very JAX mesh (one set of shardings)."""
    device_mesh._backend_mesh = mesh  # type: ignore[attr-defined]


def backup_paths(callback: object) -> dict[str, str]:
    """A ``BackupAndRestore``'s backup directory and file paths (private attributes, no public form)."""
    return {name: getattr(callback, name) for name in BACKUP_PATHS}


def set_backup_paths(callback: object, paths: dict[str, str]) -> None:
    for name, path in paths.items():
        setattr(callback, name, path)
