"""Every constructor of a distributed value sets every slot.

Every constructor goes through ``from_parts`` (the one place that sets the slots; the generated
result builders call it directly); a slot added to ``DistributedValues`` and forgotten there
would surface as an ``AttributeError`` far from its cause. Each constructor's value is read
back through the public API too.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.values.distributed import DistributedValues, Mirrored, PerReplica
from tpustrategy._src.values.leaf import LeafKind, LeafSpec

_SLOTS = [s for s in DistributedValues.__slots__ if s != "__weakref__"]


def _unset_slots(value):
    missing = []
    for name in _SLOTS:
        try:
            getattr(value, name)
        except AttributeError:
            missing.append(name)
    return missing


def _replicated(n):
    strategy = tps.MirroredStrategy()
    mesh = strategy.mesh
    assert mesh.devices.size == n
    return jax.device_put(np.arange(4, dtype=np.float32),
                          jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))


@pytest.mark.parametrize("make", [
    lambda: Mirrored.from_replicated(_replicated(8), 8),
    lambda: Mirrored.from_replicated(_replicated(8), 8, ("key",)),
    lambda: PerReplica.from_output(np.arange(16, dtype=np.float32).reshape(8, 2), 8),
    lambda: PerReplica.from_stacked(np.zeros((8, 3), np.float32)),
    lambda: Mirrored.from_parts(8),
    lambda: PerReplica([np.float32(i) for i in range(8)]),
], ids=["from_replicated", "from_replicated_keyed", "from_output", "from_stacked", "blank", "init"])
def test_every_constructor_sets_every_slot(make):
    assert _unset_slots(make()) == []


def test_fast_constructors_read_back_through_the_public_api():
    spec = LeafSpec(LeafKind.MIRRORED, (4,), np.dtype(np.int32), False, None, 8)
    m = Mirrored.from_replicated(_replicated(8), 8, spec)
    assert m.num_replicas == 8
    assert len(m.values) == 8
    for component in m.values:
        np.testing.assert_array_equal(np.asarray(component), [0, 1, 2, 3])
    assert m.leaf(None)[0] is spec

    stacked = np.arange(16, dtype=np.float32).reshape(8, 2)
    p = PerReplica.from_output(stacked, 8)
    assert p.num_replicas == 8
    for i, component in enumerate(p.values):
        np.testing.assert_array_equal(np.asarray(component), stacked[i])
