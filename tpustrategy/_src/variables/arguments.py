"""What ``tps.Variable``'s constructor accepts: its argument checks, and the global array it makes."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def put_global(host: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
    """A global array from a host value every process holds.

    Built shard by shard (no cross-process equality check), so it also works
    while a step is being traced on a multi-host job.
    """
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


# tf.Variable arguments that have no effect here (graph-mode and resource options).
ACCEPTED = {"validate_shape", "caching_device", "import_scope", "experimental_enable_variable_lifting",
            "use_resource", "collections", "expected_shape", "variable_def"}


def check_unused(unused: dict[str, Any], base: str) -> None:
    unknown = sorted(set(unused) - ACCEPTED)
    if unknown:
        raise TypeError(
            f"tps.Variable {base!r}: unexpected keyword argument(s) {', '.join(unknown)}. Accepted: "
            "initial_value, trainable, name, dtype, synchronization, aggregation, shape, constraint "
            f"(and, ignored, TensorFlow's {', '.join(sorted(ACCEPTED))})."
        )


def check_initial_value(value: Any, base: str) -> None:
    if value is None:
        raise ValueError(
            f"tps.Variable {base!r}: initial_value must be specified. Received: initial_value=None.\n"
            "Fix: pass an array, a number, or a callable returning one (e.g. lambda: jnp.zeros(shape))."
        )
    if isinstance(value, (str, bytes)) or (isinstance(value, np.ndarray) and value.dtype.kind in "OUS"):
        raise TypeError(
            f"tps.Variable {base!r}: initial_value must be numeric (JAX arrays hold no strings). "
            f"Received: initial_value={value!r:.60}.\nFix: keep strings on the host (a Python value "
            "or a tps.lookup table mapping them to ids), and make the variable from numbers."
        )


def check_constraint(constraint: Any, base: str) -> None:
    if constraint is not None and not callable(constraint):
        raise ValueError(
            f"The `constraint` argument must be a callable. Received: constraint={constraint!r} "
            f"(tps.Variable {base!r}).\nFix: pass a function of the new value, e.g. "
            "constraint=lambda w: jnp.clip(w, 0.0, 1.0), or None."
        )
