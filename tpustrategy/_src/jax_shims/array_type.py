"""The concrete type of a JAX array, for ``type(x) is ARRAY_IMPL`` checks on the per-call path.

``isinstance(x, jax.Array)`` asks an abstract base class (a few hundred nanoseconds, and a
tracer is one too); the execution core's fast key (``execution.entry.fast_key``) reads
the concrete type instead. Importing it does not start a backend.

Public alternative: ``isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer)``.
When the private name moves, ``ARRAY_IMPL`` is ``jax.Array`` (no array's exact type), so the
fast path silently steps aside and calls classify as before; ``tests/jax_shims`` fails loudly.
"""

from __future__ import annotations

from typing import Any

import jax


def _array_impl() -> type:
    try:
        from jaxlib._jax import ArrayImpl  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - the name moved; see the module docstring
        return jax.Array
    return ArrayImpl  # type: ignore[no-any-return]


# Typed Any: jaxlib's ArrayImpl is untyped (a ``type`` would narrow ``x`` to ``object`` after ``type(x) is``).
ARRAY_IMPL: Any = _array_impl()
