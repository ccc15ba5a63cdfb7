"""JAX's array types: letting primitives take an object that stands for an array, and the concrete array type.

**``register``: an object that stands for an array.**

JAX 0.10 refuses ``__jax_array__`` during abstractification. JAX's public answer
(its array-extensibility rule) is pytree registration, but a ``tps.Variable`` must stay
a leaf of ``jax.tree`` (as of ``tf.nest``: ``jax.tree.map(lambda v: v.assign(u), ...)``
over variables) and ``jax.grad`` of it must give an array, not a variable. So JAX is
taught the type at the two places every operand passes through: ``Primitive.bind``
(``jax.lax`` primitives, and ``jit``/``grad``/``vmap``, which bind a primitive with their
flattened arguments) first canonicalises each operand through ``jax._src.dtypes.canonicalize_value`` (a C++
table on jaxlib ≥ 464), keyed by type; a few wrappers first ask for its type
(``jax._src.core.pytype_aval_mappings``). Registering a handler there turns the object into its array at the
moment a primitive is bound — in the current context, so inside a trace the
variable's functionalised read is used, never a baked-in constant.

Public alternative: none (``jnp.asarray(x)`` before calling ``jax.lax``). When the
private name moves, ``register`` raises and ``tests/jax_shims`` fails loudly.

**``ARRAY_IMPL``: the concrete type of a JAX array**, for ``type(x) is ARRAY_IMPL`` checks on
the per-call path. ``isinstance(x, jax.Array)`` asks an abstract base class (a few hundred
nanoseconds, and a tracer is one too); the execution core's fast key
(``execution.leaves.call_key``) reads the concrete type instead. Importing it does not start
a backend. Public alternative: ``isinstance(x, jax.Array) and not isinstance(x,
jax.core.Tracer)``. When the private name moves, ``ARRAY_IMPL`` is ``jax.Array`` (no array's
exact type), so the fast path silently steps aside and calls classify as before;
``tests/jax_shims`` fails loudly.

**``single_device_arrays``: an array's per-device buffers**, as the single-device arrays its
``addressable_shards`` would hold, in the same order. ``experimental_local_results`` of a loss
is asked for every step; ``addressable_shards`` builds a ``Shard`` (with its device's
sharding and index) per device, in Python, where ``ArrayImpl._arrays`` is the list the array
already keeps (a tenth of the cost). Public alternative: ``[s.data for s in x.addressable_shards]``,
used when the private name moves (then ``tests/jax_shims`` fails loudly).

**``SHARDING_ATTRIBUTE``: the name of a concrete array's own sharding slot** (``_sharding``), for
generated per-call code (``execution.specialised``) that checks each input's sharding by
identity: ``ArrayImpl.sharding`` is a Python property returning that slot, a Python frame per
read. Public alternative: ``"sharding"``, the name used when the slot moves (then
``tests/jax_shims`` fails loudly).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax


def register(cls: type, to_array: Callable[[Any], Any]) -> None:
    """Makes ``jax.lax`` primitives accept instances of ``cls`` as ``to_array(instance)``."""
    from jax._src import core, dtypes

    add = getattr(dtypes, "register_canonicalize_value_handler", None)
    canonicalize = getattr(dtypes, "canonicalize_value", None)
    if add is None or canonicalize is None:  # pragma: no cover - only when JAX changes
        raise RuntimeError(
            "tpustrategy: jax._src.dtypes.register_canonicalize_value_handler / canonicalize_value "
            "moved in this JAX version; tps.Variable cannot be passed to jax.lax primitives.\n"
            "Fix: use the JAX range tpustrategy pins (pyproject.toml), or pass jnp.asarray(variable)."
        )
    add(cls, lambda x: canonicalize(to_array(x)))
    # Some ``jax.lax`` wrappers ask for the operand's type before binding (``broadcast``).
    avals = getattr(core, "pytype_aval_mappings", None)
    if not isinstance(avals, dict):  # pragma: no cover - only when JAX changes
        raise RuntimeError(
            "tpustrategy: jax._src.core.pytype_aval_mappings moved in this JAX version.\n"
            "Fix: use the JAX range tpustrategy pins (pyproject.toml)."
        )
    avals[cls] = lambda x: core.typeof(to_array(x))


def _array_impl() -> type:
    try:
        from jaxlib._jax import ArrayImpl  # type: ignore[import-not-found]
    except ImportError:  # pragma: no cover - the name moved; see the module docstring
        return jax.Array
    return ArrayImpl  # type: ignore[no-any-return]


# Typed Any: jaxlib's ArrayImpl is untyped (a ``type`` would narrow ``x`` to ``object`` after ``type(x) is``).
ARRAY_IMPL: Any = _array_impl()


def single_device_arrays(x: Any) -> list[Any]:
    """The single-device arrays of a concrete array's addressable shards, in ``addressable_shards``
    order (``shards[i].data is single_device_arrays(x)[i]``)."""
    if type(x) is ARRAY_IMPL:
        found = getattr(x, "_arrays", None)
        if found is not None:
            return found  # type: ignore[no-any-return]
    return [s.data for s in x.addressable_shards]


def has_single_device_arrays() -> bool:
    """Whether ``single_device_arrays`` reads the arrays' own list (for ``tests/jax_shims``)."""
    return ARRAY_IMPL is not jax.Array and hasattr(ARRAY_IMPL, "_arrays")


def _sharding_attribute() -> str:
    slot = getattr(ARRAY_IMPL, "_sharding", None) if ARRAY_IMPL is not jax.Array else None
    return "_sharding" if slot is not None else "sharding"


SHARDING_ATTRIBUTE: str = _sharding_attribute()
