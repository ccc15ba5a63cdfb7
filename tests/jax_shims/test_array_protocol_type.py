"""The concrete array type the per-call fast key checks with ``type(x) is``."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.jax_shims.array_protocol import ARRAY_IMPL


def test_the_concrete_type_is_every_jax_arrays_exact_type():
    # Fails when jaxlib moves ArrayImpl: ARRAY_IMPL then falls back to jax.Array (no exact match).
    assert ARRAY_IMPL is not jax.Array
    assert type(jnp.zeros(3)) is ARRAY_IMPL
    assert type(jax.device_put(np.ones(2))) is ARRAY_IMPL
    assert type(np.ones(2)) is not ARRAY_IMPL
