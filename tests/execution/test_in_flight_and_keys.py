"""The in-flight bound's waits, and the fast-path keys kept with distributed values.

Counted, not timed. The bound (``execution/dispatch.py``) lets at most ``limit`` programs be
outstanding and, once over it, waits once on the newest of the oldest half (so a loop asks
about readiness once every ``limit // 2`` calls); a donated output is never waited on. A
distributed value keeps its fast-path key once made (a program's ``Mirrored`` results too):
equal keys for equal kinds, shapes and dtypes, another key for another shape.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src.execution import dispatch, leaves
from tpustrategy._src.values.leaf import LeafKind, LeafSpec


class _Token:
    """Stands for a program's output array: records waits, may be donated."""

    def __init__(self, name, deleted=False):
        self.name, self.deleted, self.waited = name, deleted, 0

    def is_deleted(self):
        return self.deleted

    def block_until_ready(self):
        self.waited += 1


@pytest.fixture
def bound(monkeypatch):
    """The bound over fake tokens, with a limit of 4 (waits every 2 calls)."""
    monkeypatch.setattr(dispatch, "_pending", __import__("collections").deque())
    monkeypatch.setattr(dispatch, "_limit", 4)
    monkeypatch.setattr(dispatch, "_ArrayImpl", _Token)
    return dispatch


def test_the_bound_waits_once_every_half_limit_on_the_newest_of_the_oldest_half(bound):
    tokens = [_Token(i) for i in range(12)]
    waited_after = {}
    for i, t in enumerate(tokens):
        bound.track_array(t)
        waited_after[i] = [u.name for u in tokens if u.waited]
        assert len(bound._pending) <= 4  # never more than the limit outstanding after a call
    # Call 4 (the 5th) goes over the limit: 0 and 1 are let go, 1 (the newer) is waited on.
    assert waited_after[3] == []
    assert waited_after[4] == [1]
    assert waited_after[5] == [1]  # 5 outstanding again only at call 6
    assert waited_after[6] == [1, 3]
    assert [t.name for t in tokens if t.waited] == [1, 3, 5, 7]  # at calls 4, 6, 8 and 10
    assert all(t.waited <= 1 for t in tokens)


def test_donated_outputs_are_not_waited_on_a_live_later_one_is(bound):
    tokens = [_Token(i, deleted=(i < 3)) for i in range(5)]  # 0..2 donated to later programs
    for t in tokens:
        bound.track_array(t)
    # Over the limit at token 4: 0 and 1 let go, both donated: the oldest alive (3) is waited on.
    assert [t.name for t in tokens if t.waited] == [3]
    assert not any(t.waited for t in tokens[:3])


def test_limit_one_waits_on_every_previous_program(bound, monkeypatch):
    monkeypatch.setattr(dispatch, "_limit", 1)
    tokens = [_Token(i) for i in range(4)]
    for t in tokens:
        bound.track_array(t)
    assert [t.waited for t in tokens] == [1, 1, 1, 0]


def test_many_real_programs_in_a_row_finish_with_the_default_bound():
    strategy = tps.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    x = tps.PerReplica([jnp.full((4,), float(i)) for i in range(n)])

    def step(v):
        return tps.get_replica_context().all_reduce("SUM", v)

    outs = [strategy.run(step, (x,)) for _ in range(200)]  # none waited on by the caller
    last = strategy.experimental_local_results(outs[-1])  # one replica: a plain array, as in TensorFlow
    assert len(last) == n
    np.testing.assert_allclose(np.asarray(last[0]), np.full(4, sum(range(n))))


@pytest.mark.devices(4)
def test_a_program_stands_in_the_bound_by_its_smallest_output(monkeypatch):
    # A kept output keeps its buffers alive: the bound keeps the smallest one (here the 1-float
    # count, not the 4096-float weights), through the general call and the generated one alike.
    strategy = tps.MirroredStrategy([f"/cpu:{i}" for i in range(4)])
    with strategy.scope():
        w = tps.Variable(jnp.zeros((64, 64)))
    x = tps.PerReplica([jnp.full((64, 64), float(i)) for i in range(4)])

    def step(v):
        total = tps.get_replica_context().all_reduce("SUM", v)
        w.assign(total)
        return total, jnp.sum(total[:1, :1])

    recorded = []
    monkeypatch.setattr(dispatch, "_pending", __import__("collections").deque())
    for _ in range(4):
        big, small = strategy.run(step, (x,))
        recorded.append(dispatch._pending[-1])
        np.testing.assert_allclose(np.asarray(small.values[0]), 6.0)  # (0+1+2+3) at [0, 0]
    assert all(t.nbytes == 4 and t.shape == () for t in recorded)


@pytest.mark.devices(4)
def test_a_program_s_mirrored_results_carry_their_leaf_spec():
    strategy = tps.MirroredStrategy([f"/cpu:{i}" for i in range(4)])
    x = tps.PerReplica([jnp.full((3,), float(i)) for i in range(4)])

    def step(v):
        return tps.get_replica_context().all_reduce("SUM", v), v

    split = strategy.run(step, (x,))[0]
    total, per_replica = strategy.run(step, (x,))
    key, arrays = leaves.call_key((total, per_replica), {}, None)
    # The spec a Mirrored carries is the one made from its array: kind, shape, dtype, weak type, replicas.
    rep = total.replicated_array
    assert LeafSpec(LeafKind.MIRRORED, rep.shape, rep.dtype, rep.weak_type, None, 4) in key
    assert arrays[0] is rep
    assert leaves.call_key((split, per_replica), {}, None)[0] == key
    # Another shape is another key.
    y = tps.PerReplica([jnp.full((5,), float(i)) for i in range(4)])
    other = strategy.run(step, (y,))
    assert leaves.call_key(other, {}, None)[0] != key


@pytest.mark.devices(4)
def test_a_per_replica_value_keeps_its_leaf_spec_until_its_global_shapes_change():
    strategy = tps.MirroredStrategy([f"/cpu:{i}" for i in range(4)])
    x = tps.PerReplica([np.full((3,), float(i), np.float32) for i in range(4)])
    strategy.run(lambda v: v, (x,))  # the classifying path stacks it
    split = jax.sharding.NamedSharding(strategy.mesh, jax.sharding.PartitionSpec("replica"))
    first = x.leaf(split)
    assert first is not None and first[0] == LeafSpec(LeafKind.PER_REPLICA, (4, 3), np.dtype(np.float32))
    assert x.leaf(split)[0] is first[0]  # kept
    x.set_global_shapes([(3,), (3,), (2,), (3,)])
    assert x.leaf(split)[0].shapes == ((3,), (3,), (2,), (3,))
    assert tps.PerReplica([1.0, 2.0]).leaf(split) is None  # not stacked yet
