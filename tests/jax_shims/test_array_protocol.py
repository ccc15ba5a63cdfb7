"""The shim that lets jax.lax take variables: fails loudly when JAX moves the names it uses."""

from __future__ import annotations

import jax
import numpy as np


def test_the_private_jax_names_the_array_shim_uses_still_exist():
    from jax._src import core, dtypes

    assert callable(dtypes.register_canonicalize_value_handler)
    assert callable(dtypes.canonicalize_value)
    assert isinstance(core.pytype_aval_mappings, dict)


def test_a_registered_type_enters_lax_primitives_as_its_array():
    from tpustrategy._src.jax_shims import array_protocol

    class Box:
        def __init__(self, value):
            self.value = value

    array_protocol.register(Box, lambda b: b.value)
    box = Box(np.arange(3.0, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(jax.lax.add(box, box)), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda b: b * 3)(box)), [0.0, 3.0, 6.0])
