"""``copy.deepcopy`` of a variable: a new variable of the same kind on the same strategy.

TensorFlow's ``deepcopy`` of a ``ResourceVariable`` / ``MirroredVariable`` /
``SyncOnReadVariable`` makes a new variable with the current value (each
replica's component for a sync-on-read one), the same name, dtype, trainable
flag, constraint, synchronization and aggregation, on the same strategy
(shadow weights, EMA copies and model copies rely on it). The strategy and the
constraint are shared, not copied; the value is a new buffer with the same
sharding, so writing one variable leaves the other as it was.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.variables import frames, ids, store
from tpustrategy._src.variables.state import SYNC_ON_READ, VariableState


class _Copyable(VariableState, Protocol):
    """A variable ``deep_copy`` can copy: its state, and the value it was created with."""

    _initial: np.ndarray | jax.Array | None


V = TypeVar("V", bound=_Copyable)


def _copy_array(value: jax.Array) -> jax.Array:
    if isinstance(value, jax.Array):
        out = jnp.array(value, copy=True)
        if out.sharding != value.sharding:
            out = jax.device_put(out, value.sharding)
        return out
    return value


def deep_copy(var: V, memo: dict[int, Any]) -> V:
    """A new variable equal to ``var`` now, independent of it from then on."""
    if frames.current() is not None or isinstance(var._value, jax.core.Tracer):
        # TensorFlow's text first (inside tf.function it raises the same).
        raise NotImplementedError(
            "__deepcopy__() is only available when eager execution is enabled.\n"
            f"(variable {var.name!r} was copied while a strategy.run / tps.function step was being "
            "traced.)\nFix: copy the variable outside the step, e.g. right after creating it.")
    new = object.__new__(type(var))
    new.__dict__.update(var.__dict__)
    store.detach(new)  # its own value, not a slot in ``var``'s program's store
    new._id = ids.next_id()
    new._value = _copy_array(var._value)
    # TensorFlow's copy starts from the current value: that is its initial value.
    new._initial = new._value[0] if var._kind == SYNC_ON_READ else new._value
    memo[id(var)] = new
    return new
