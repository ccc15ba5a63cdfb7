"""Distributed values as JAX pytrees: block_until_ready, jax.tree, and no silent array conversion."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def _strategy(n):
    return tps.MirroredStrategy(devices=jax.devices()[:n])


@pytest.mark.devices(4)
def test_block_until_ready_waits_for_a_distributed_value_and_returns_it():
    s = _strategy(4)
    out = s.run(lambda x: x @ x.T, (tps.PerReplica([jnp.ones((64, 64))] * 4),))
    assert out.block_until_ready() is out
    assert jax.block_until_ready(out) is not None
    assert jax.tree.leaves(out) and all(isinstance(v, jax.Array) for v in jax.tree.leaves(out))


@pytest.mark.devices(2)
def test_jax_tree_map_maps_every_component_and_keeps_the_kind():
    s = _strategy(2)
    per, mirrored = s.run(lambda x: (x + 1, tps.get_replica_context().all_reduce("SUM", x)),
                          (tps.PerReplica([np.ones(2), np.zeros(2)]),))
    doubled = jax.tree.map(lambda a: a * 2, {"p": per, "m": mirrored})
    assert isinstance(doubled["p"], tps.PerReplica) and isinstance(doubled["m"], tps.Mirrored)
    assert [np.asarray(v).tolist() for v in doubled["p"].values] == [[4.0, 4.0], [2.0, 2.0]]
    assert [np.asarray(v).tolist() for v in doubled["m"].values] == [[2.0, 2.0], [2.0, 2.0]]
    leaves = jax.tree.leaves({"p": per}, is_leaf=lambda v: isinstance(v, tps.DistributedValues))
    assert leaves == [per]


def test_np_asarray_of_a_per_replica_value_names_the_fix():
    value = tps.PerReplica([np.ones(2), np.zeros(2)])
    with pytest.raises(TypeError, match="experimental_local_results.*reduce"):
        np.asarray(value)


@pytest.mark.devices(4)
def test_a_host_built_per_replica_value_is_stacked_once_when_passed_again():
    s = _strategy(4)
    x = tps.PerReplica([np.full(3, float(i)) for i in range(4)])
    s.run(lambda v: v, (x,))
    first = x.stacked_array()
    s.run(lambda v: v * 2, (x,))
    assert x.stacked_array() is first
