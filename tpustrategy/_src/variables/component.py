"""One replica's copy of a distributed variable (``MirroredVariable.values[i]``).

TensorFlow's mirrored and sync-on-read variables hold one component variable per
device; ``v.values`` and ``experimental_local_results(v)`` give them, each with its
``device``, ``read_value`` and ``assign*``. Here a distributed variable is one global
array, so a component is a light handle on (variable, replica): reading it gives that
replica's copy on that replica's device(s) (no copy); writing it
- of a sync-on-read variable sets that replica's component (what TensorFlow does);
- of a mirrored variable raises: a write to one copy would make the copies diverge,
  which TensorFlow allows silently and we refuse (README, "Where we differ").
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import DTypeLike

from tpustrategy._src.jax_shims import array_protocol
from tpustrategy._src.types import Shape
from tpustrategy._src.variables import frames, operators
from tpustrategy._src.variables.state import SYNC_ON_READ, VariableState, first_device


class ReplicaComponent:
    """Replica ``replica_id``'s copy of ``variable`` (a component of ``variable.values``)."""

    __array_priority__ = 100

    def __init__(self, variable: VariableState, local_index: int, replica_id: int) -> None:
        self._variable = variable
        self._local_index = local_index
        self._replica_id = replica_id

    @property
    def name(self) -> str:
        base = self._variable._base_name
        return f"{base}:0" if self._replica_id == 0 else f"{base}/replica_{self._replica_id}:0"

    @property
    def primary(self) -> VariableState:
        """The distributed variable this component belongs to (TensorFlow's ``_primary``)."""
        return self._variable

    @property
    def shape(self) -> Shape:
        return self._variable.shape

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._variable.dtype

    @property
    def trainable(self) -> bool:
        return self._variable.trainable

    @property
    def device(self) -> jax.Device | None:
        """The replica's device (its first core when it has several); also inside a trace."""
        if frames.current() is None:
            value = self.read_value()
            if isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer):
                return first_device(value)
        strategy = self._variable._strategy
        return strategy.worker_devices[self._local_index] if strategy is not None else None

    def devices(self) -> set[jax.Device]:
        value = self.read_value()
        return set(value.sharding.device_set) if isinstance(value, jax.Array) else set()

    def read_value(self) -> jax.Array:
        return self._variable._local_components()[self._local_index]

    value = read_value

    def numpy(self) -> np.ndarray:
        return np.asarray(self.read_value())

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        return np.asarray(self.read_value(), dtype=dtype)

    def __jax_array__(self) -> jax.Array:
        return self.read_value()

    def __float__(self) -> float:
        return float(self.read_value())

    def __int__(self) -> int:
        return int(self.read_value())

    def __getattr__(self, name: str) -> Any:
        # Everything else an array has (sharding, ndim, reshape, sum, ...), read from the copy.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.read_value(), name)

    def __len__(self) -> int:
        return len(self.read_value())

    def __getitem__(self, index: Any) -> jax.Array:
        return self.read_value()[index]

    def __neg__(self) -> jax.Array:
        return -self.read_value()

    def __repr__(self) -> str:
        shown = "<traced>" if frames.current() else np.asarray(self.read_value())
        return f"<tps.ReplicaComponent {self.name!r} shape={self.shape} dtype={self.dtype} value={shown}>"

    # Writes ---------------------------------------------------------------------------
    def _write(self, method: str, value: Any) -> ReplicaComponent:
        var = self._variable
        if var._kind != SYNC_ON_READ:
            raise ValueError(
                f"{self.name!r}.{method}: this is replica {self._replica_id}'s copy of the mirrored "
                f"variable {var.name!r}; writing one copy would make the replicas' copies diverge.\n"
                f"Fix: write the variable itself (`{var._base_name}.{method}(value)`), in "
                "cross-replica context or in a replica function with an aggregation."
            )
        stacked = frames.global_value(var)
        current = stacked[self._replica_id]
        value = jnp.asarray(value, dtype=var.dtype)
        if method == "assign":
            new = jnp.broadcast_to(value, current.shape)
        elif method == "assign_add":
            new = current + value
        else:
            new = current - value
        new_stacked = stacked.at[self._replica_id].set(new)
        if not isinstance(new_stacked, jax.core.Tracer) and isinstance(stacked, jax.Array):
            new_stacked = jax.device_put(new_stacked, stacked.sharding)
        frames.set_global_value(var, new_stacked)
        return self

    def assign(
        self, value: Any, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> ReplicaComponent | None:
        """Sets this replica's component (sync-on-read variables only)."""
        self._write("assign", value)
        return self if read_value else None

    def assign_add(
        self, delta: Any, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> ReplicaComponent | None:
        self._write("assign_add", delta)
        return self if read_value else None

    def assign_sub(
        self, delta: Any, use_locking: bool = False, name: str | None = None, read_value: bool = True
    ) -> ReplicaComponent | None:
        self._write("assign_sub", delta)
        return self if read_value else None


operators.install(ReplicaComponent, names=("add", "sub", "mul", "truediv", "pow", "matmul"), comparisons=False)
array_protocol.register(ReplicaComponent, lambda c: c.read_value())
