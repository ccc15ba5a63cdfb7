"""Binary operators of ``tps.Variable`` and its per-replica handles: each reads the value (and a same-kind operand) and applies ``jnp``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


def _binary(cls: Any, op: Callable[..., jax.Array], reflected: bool = False) -> Callable[[Any, Any], jax.Array]:
    def method(self: Any, other: Any) -> jax.Array:
        a = self.read_value()
        if isinstance(other, cls):
            other = other.read_value()
        return op(other, a) if reflected else op(a, other)

    return method


_BINARY: dict[str, Callable[..., jax.Array]] = {
    "add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply, "truediv": jnp.true_divide,
    "floordiv": jnp.floor_divide, "mod": jnp.mod, "pow": jnp.power, "matmul": jnp.matmul,
    "and": jnp.bitwise_and, "or": jnp.bitwise_or, "xor": jnp.bitwise_xor,
}
_COMPARISONS: dict[str, Callable[..., jax.Array]] = {
    "lt": jnp.less, "le": jnp.less_equal, "gt": jnp.greater, "ge": jnp.greater_equal,
}


def install(cls: Any, names: tuple[str, ...] | None = None, comparisons: bool = True) -> None:
    """Gives ``cls`` (a variable or a handle on one copy) operators on its read.

    Args:
      names: the arithmetic / bitwise operators to give (default: all of TensorFlow's).
      comparisons: also ``<``, ``<=``, ``>``, ``>=``.
    """
    for name in names or tuple(_BINARY):
        op = _BINARY[name]
        setattr(cls, f"__{name}__", _binary(cls, op))
        setattr(cls, f"__r{name}__", _binary(cls, op, reflected=True))
    for name, op in (_COMPARISONS.items() if comparisons else ()):
        setattr(cls, f"__{name}__", _binary(cls, op))
