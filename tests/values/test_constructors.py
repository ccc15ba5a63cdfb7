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


def _n():
    """The replica count of a strategy over every device (8 by default, 1 with ``--devices 1``)."""
    return len(jax.devices())


def _replicated(n):
    strategy = tps.MirroredStrategy()
    mesh = strategy.mesh
    assert mesh.devices.size == n
    return jax.device_put(np.arange(4, dtype=np.float32),
                          jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))


@pytest.mark.parametrize("make", [
    lambda: Mirrored.from_replicated(_replicated(_n()), _n()),
    lambda: Mirrored.from_replicated(_replicated(_n()), _n(), ("key",)),
    lambda: PerReplica.from_output(np.arange(2 * _n(), dtype=np.float32).reshape(_n(), 2), _n()),
    lambda: PerReplica.from_stacked(np.zeros((_n(), 3), np.float32)),
    lambda: Mirrored.from_parts(_n()),
    lambda: PerReplica([np.float32(i) for i in range(_n())]),
], ids=["from_replicated", "from_replicated_keyed", "from_output", "from_stacked", "blank", "init"])
def test_every_constructor_sets_every_slot(make):
    assert _unset_slots(make()) == []


def test_fast_constructors_read_back_through_the_public_api():
    n = _n()
    spec = LeafSpec(LeafKind.MIRRORED, (4,), np.dtype(np.int32), False, None, n)
    m = Mirrored.from_replicated(_replicated(n), n, spec)
    assert m.num_replicas == n
    assert len(m.values) == n
    for component in m.values:
        np.testing.assert_array_equal(np.asarray(component), [0, 1, 2, 3])
    assert m.leaf(None)[0] is spec

    stacked = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    p = PerReplica.from_output(stacked, n)
    assert p.num_replicas == n
    for i, component in enumerate(p.values):
        np.testing.assert_array_equal(np.asarray(component), stacked[i])
