"""The one place that reads and writes library internals for checkpoints.

Everything else in this package goes through these functions. They rely on a
small, stable surface: a ``tps.Variable`` keeps its global ``jax.Array`` in
``_value`` (mirrored: replicated ``NamedSharding(mesh, P())``; sync-on-read:
``[R, ...]`` sharded over ``"replica"``; plain: one device) — the one private
member read here —; its ``kind`` and ``strategy`` (with ``.mesh``) are public
(``context.contracts.DistributedVariableContract``); iterators have
``get_state()``/``set_state()``, and a distributed iterator's dataset says
(``shard_mode``) whether every process reads the same stream.

Sync-on-read variables are saved twice: their per-replica components and
their aggregated value (TensorFlow saves only this one). They are restored as
TensorFlow restores them (``values_util.get_on_read_restore_ops``), onto any
replica count: every replica gets the saved aggregate, divided by the replica
count (cast back to the variable's dtype) for SUM. Only a NONE-aggregated
variable, which has no aggregate, gets its components back (same replica count).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

SYNC_ON_READ = "sync_on_read"


def is_variable(x: Any) -> bool:
    from tpustrategy._src.variables.variable import Variable

    return isinstance(x, Variable)


def is_keras_variable(x: Any) -> bool:
    """A Keras 3 variable (False without loading Keras when the program never imported it)."""
    if "keras" not in sys.modules:
        return False
    import keras

    return isinstance(x, keras.Variable)


def is_strategy(x: Any) -> bool:
    from tpustrategy._src.strategy.base import Strategy

    return isinstance(x, Strategy)


def is_iterator(x: Any) -> bool:
    """A checkpointable iterator: ``get_state()`` and ``set_state(state)``."""
    return (not isinstance(x, type) and callable(getattr(x, "get_state", None))
            and callable(getattr(x, "set_state", None)))


def is_dataset(x: Any) -> bool:
    from tpustrategy._src.data.core.dataset import Dataset

    if isinstance(x, Dataset):
        return True
    return type(x).__name__ in ("DistributedDataset", "DistributedDatasetsFromFunction")


# Variables ----------------------------------------------------------------------------------
def _replicas(var: Any) -> int:
    return int(var._value.shape[0]) if var.kind == SYNC_ON_READ else 1


def _aggregation(var: Any) -> str:
    return str(getattr(var.aggregation, "name", var.aggregation)).upper()


def describe_variable(var: Any) -> dict[str, Any]:
    """The manifest record of a variable (JSON)."""
    return {
        "kind": "variable",
        "sync": var.kind,
        "shape": list(var.shape),
        "dtype": str(np.dtype(var.dtype)),
        "replicas": _replicas(var),
        "aggregation": _aggregation(var),
    }


def variable_arrays(var: Any) -> dict[str, Any]:
    """The arrays to write for ``var``: its value, and a sync-on-read variable's components."""
    if var.kind != SYNC_ON_READ:
        return {"value": var._value}
    parts = {"components": var._value}
    if _aggregation(var) != "NONE":
        parts["value"] = var.read_value()
    return parts


def variable_plan(var: Any, saved: dict[str, Any], key: str, api: str
                  ) -> tuple[dict[str, jax.ShapeDtypeStruct], Callable[[dict[str, Any]], Any]]:
    """What to read for ``var`` and how to turn it into its new ``_value``.

    Returns:
      ``(targets, finish)``: the saved parts to read (part name -> target on
      this variable's devices) and a function from the read parts to the
      array to store.

    Raises:
      ValueError: the saved shape or dtype differs, or a NONE-aggregated
        sync-on-read variable is restored onto a different replica count.
    """
    shape, dtype = tuple(var.shape), np.dtype(var.dtype)
    if tuple(saved["shape"]) != shape or saved["dtype"] != str(dtype):
        raise ValueError(
            f"{api}: variable {key!r} was saved with shape {tuple(saved['shape'])} and dtype "
            f"{saved['dtype']}, but the variable being restored has shape {shape} and dtype "
            f"{dtype}.\nFix: build the model with the same configuration as when it was saved, "
            "or leave this variable out of the Checkpoint you restore into."
        )
    sharding = var._value.sharding
    if var.kind == SYNC_ON_READ:
        replicas = _replicas(var)
        if saved["sync"] == SYNC_ON_READ and saved["replicas"] == replicas and "value" not in saved["parts"]:
            target = jax.ShapeDtypeStruct((replicas, *shape), dtype, sharding=sharding)
            return {"components": target}, lambda got: got["components"]
        if "value" not in saved["parts"]:
            raise ValueError(
                f"{api}: sync-on-read variable {key!r} has aggregation NONE, so only its "
                f"{saved['replicas']} per-replica components were saved, and this strategy has "
                f"{replicas} replicas.\nFix: restore with {saved['replicas']} replicas, or give the "
                "variable an aggregation (SUM, MEAN or ONLY_FIRST_REPLICA) so its value can be saved."
            )
        replicated = NamedSharding(var.strategy.mesh, P())
        target = jax.ShapeDtypeStruct(shape, dtype, sharding=replicated)
        return {"value": target}, lambda got: _spread(var, got["value"], replicas, sharding)
    if "value" not in saved["parts"]:
        raise ValueError(
            f"{api}: {key!r} was saved from a sync-on-read variable with aggregation NONE, whose "
            "per-replica components have no single value to restore into a "
            f"{var.kind} variable.\nFix: restore it into a sync-on-read variable with the same "
            "replica count."
        )
    target = jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
    return {"value": target}, lambda got: got["value"]


def _spread(var: Any, value: Any, replicas: int, sharding: Any) -> Any:
    """TensorFlow's restore of a sync-on-read variable's saved aggregate: ``value / replicas`` cast to
    the dtype on every replica for SUM (so an integer's remainder is lost, as in TensorFlow), ``value``
    on every replica otherwise (``values_util.get_on_read_restore_ops``)."""
    total = _aggregation(var) == "SUM"

    def spread(a: Any) -> Any:
        if total and jnp.issubdtype(a.dtype, jnp.integer):
            a = jax.lax.div(a, jnp.asarray(replicas, a.dtype))   # TensorFlow's cast truncates toward zero
        elif total:
            a = (a / replicas).astype(a.dtype)
        return jnp.broadcast_to(a[None], (replicas, *a.shape))

    return jax.jit(spread, out_shardings=sharding)(value)


def set_variable(var: Any, value: Any) -> None:
    """Stores a restored global array (already on the variable's sharding)."""
    var._value = value


def assign_host_value(var: Any, value: np.ndarray) -> None:
    """Stores a host value read from a TensorFlow checkpoint, placed on the variable's devices.

    A sync-on-read variable's saved value is its aggregate (what TensorFlow saves); it is restored
    as TensorFlow does (``_spread``).
    """
    sharding = var._value.sharding
    if var.kind == SYNC_ON_READ:
        set_variable(var, _spread(var, jnp.asarray(value), _replicas(var), sharding))
    else:
        set_variable(var, jax.device_put(value, sharding))


# Optimizers --------------------------------------------------------------------------------
_VAR_LIST = "_var_list"
VAR_LIST = _VAR_LIST  # the attribute holding an optimizer's variables (tf_format.restore)


def unbuilt_optimizer(x: Any) -> bool:
    """A ``tps.optimizers.Optimizer`` whose state variables are not created yet (before its
    first update): restoring its state first creates them with ``build``."""
    from tpustrategy._src.optimizers.optimizer import Optimizer

    return isinstance(x, Optimizer) and not x.built


def optimizer_variable_keys(key: str, saved: dict[str, Any]) -> list[str]:
    """The saved keys of the variables an optimizer at ``key`` was built for, in order."""
    prefix = f"{key}/{_VAR_LIST}/"
    found: dict[int, str] = {}
    for saved_key, meta in saved.items():
        for name in (saved_key, *meta.get("aliases", ())):
            tail = name[len(prefix):] if name.startswith(prefix) else ""
            if tail.isdigit():
                found[int(tail)] = saved_key
    return [found[i] for i in range(len(found))] if set(found) == set(range(len(found))) else []


def build_optimizer(optimizer: Any, variables: list[Any]) -> None:
    optimizer.build(variables)


# Iterators -----------------------------------------------------------------------------------
def describe_iterator(it: Any) -> dict[str, Any]:
    """The iterator's kind and whether every process reads the same stream.

    ``mode`` is ``"global"`` when the pipeline of every process is the whole
    input (one process, or auto-shard DATA): its position is the same on all
    processes and can be restored onto any process count.
    """
    from tpustrategy._src.data.core.iterator import DatasetIterator
    from tpustrategy._src.input import interfaces
    from tpustrategy._src.input.distributed import DistributedIterator

    if isinstance(it, DistributedIterator):
        return {"kind": "iterator", "iterator": "distributed", "mode": it.dataset.shard_mode}
    if isinstance(it, interfaces.DistributedIterator):  # distribute_datasets_from_function's
        return {"kind": "iterator", "iterator": "from_function", "mode": "local"}
    if isinstance(it, DatasetIterator):
        return {"kind": "iterator", "iterator": "dataset", "mode": "global"}
    return {"kind": "iterator", "iterator": type(it).__name__, "mode": None}
