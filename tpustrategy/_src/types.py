"""Named type aliases used across the package (each defined once, here)."""

from __future__ import annotations

from typing import Any, TypeAlias

# An array shape.
Shape: TypeAlias = tuple[int, ...]
# A nested structure of lists, tuples, dicts and leaves (JAX's pytrees; leaves are untyped).
PyTree: TypeAlias = Any
