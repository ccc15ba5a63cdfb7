"""The primitives JAX's own modules define, by module: the execution core's invariance tables.

Whether a traced value is equal on every replica is decided per primitive
(``execution/jaxpr_tools``): the primitives of JAX's pure-function modules
(lax, slicing, control flow, random, ...) are pure; those of its collectives
module communicate. JAX 0.10 has no public list of either, so the tables are
read off the modules that define them, ``jax._src.*``; this is the one place
that imports them. A module JAX moved gives no primitives (they count as
unknown, hence varying: a safe answer), and ``check()`` names it so that
``tests/jax_shims/test_primitives.py`` fails.
"""

from __future__ import annotations

import functools
import importlib

from jax.extend import core as jcore

from tpustrategy._src.jax_shims import supported

# JAX modules whose primitives are pure functions of their operands.
PURE_MODULES = (
    "jax._src.lax.lax", "jax._src.lax.slicing", "jax._src.lax.control_flow.loops",
    "jax._src.lax.control_flow.conditionals", "jax._src.lax.control_flow.solves",
    "jax._src.lax.convolution", "jax._src.lax.linalg", "jax._src.lax.fft", "jax._src.lax.special",
    "jax._src.lax.windowed_reductions", "jax._src.lax.ann", "jax._src.random.prng",
    "jax._src.random.threefry2x32", "jax._src.ad_util", "jax._src.pjit",
    "jax._src.custom_derivatives", "jax._src.ad_checkpoint", "jax._src.interpreters.ad",
    "jax._src.dispatch", "jax._src.state.primitives", "jax._src.debugging", "jax._src.core",
)
# The module defining the collectives.
PARALLEL_MODULE = "jax._src.lax.parallel"


@functools.cache
def defined_in(module_name: str) -> frozenset[str] | None:
    """The names of the primitives ``module_name`` defines, or None when JAX has no such module."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return frozenset(v.name for v in vars(module).values() if isinstance(v, jcore.Primitive))


def pure() -> frozenset[str]:
    """The primitives of every pure-function module JAX still has."""
    return frozenset().union(*(defined_in(m) or frozenset() for m in PURE_MODULES))


def parallel() -> frozenset[str]:
    """The primitives of JAX's collectives module (empty if it moved)."""
    return defined_in(PARALLEL_MODULE) or frozenset()


def check() -> None:
    """Raises ``RuntimeError`` naming every module that is gone or defines no primitive."""
    gone = [m for m in (*PURE_MODULES, PARALLEL_MODULE) if not defined_in(m)]
    if gone:
        raise RuntimeError(f"tpustrategy: JAX modules the invariance rules read moved or define no "
                           f"primitives in this JAX version: {gone}.\n" + supported.FIX)
