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


def test_single_device_arrays_are_the_shards_own_arrays_in_shard_order():
    # Fails when jaxlib moves ArrayImpl._arrays: the shim then falls back to addressable_shards.
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from tpustrategy._src.jax_shims.array_protocol import (
        has_single_device_arrays,
        single_device_arrays,
    )

    assert has_single_device_arrays()
    mesh = Mesh(np.array(jax.devices()), ("r",))
    for spec in (P("r"), P()):
        x = jax.device_put(np.arange(2.0 * len(jax.devices())), NamedSharding(mesh, spec))
        got = single_device_arrays(x)
        shards = x.addressable_shards
        assert len(got) == len(shards)
        for arr, shard in zip(got, shards):
            assert arr is shard.data
            assert arr.devices() == {shard.device}
    # A single-device array: its one buffer.
    assert single_device_arrays(jnp.ones(3))[0].shape == (3,)


def test_the_sharding_attribute_is_the_arrays_own_sharding_slot():
    # Fails when jaxlib moves ArrayImpl._sharding: the shim then reads the public property.
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    from tpustrategy._src.jax_shims.array_protocol import SHARDING_ATTRIBUTE

    assert SHARDING_ATTRIBUTE == "_sharding"
    mesh = Mesh(np.array(jax.devices()), ("r",))
    x = jax.device_put(np.arange(2.0 * len(jax.devices())), NamedSharding(mesh, P("r")))
    assert getattr(x, SHARDING_ATTRIBUTE) is x.sharding
    assert getattr(jnp.ones(3), SHARDING_ATTRIBUTE) is jnp.ones(3).sharding
