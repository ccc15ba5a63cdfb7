"""``tps.Variable``'s binary operators: each reads the variable (and a variable operand) and applies ``jnp``."""

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


def install(cls: Any) -> None:
    """Gives the variable class TensorFlow's arithmetic, bitwise and comparison operators (on its read)."""
    for name, op in _BINARY.items():
        setattr(cls, f"__{name}__", _binary(cls, op))
        setattr(cls, f"__r{name}__", _binary(cls, op, reflected=True))
    for name, op in _COMPARISONS.items():
        setattr(cls, f"__{name}__", _binary(cls, op))
