"""TensorFlow's ``tensorflow/python/distribute/distributed_variable_test.py``: ``testDeepCopy``.

A variable copied with ``copy.deepcopy`` under the strategy's scope and outside it is a
new variable of the same type, aggregation and strategy, whose components sit on the same
devices, are other objects, and hold the same values; the check runs inside
``strategy.run`` (MirroredStrategy in TensorFlow: each replica looks at every component).
TensorFlow's TPU combinations skip that check; ours run it too. The check converts the
components to NumPy inside the replica function, so the step runs on the eager path (one
warning), as TensorFlow's MirroredStrategy runs it.
"""

from __future__ import annotations

import copy
import warnings

import jax
import numpy as np
import pytest

import tpustrategy as tps

pytestmark = pytest.mark.devices(2)

SYNC = [tps.VariableSynchronization.ON_READ, tps.VariableSynchronization.ON_WRITE]
AGG = [tps.VariableAggregation.MEAN, tps.VariableAggregation.SUM, tps.VariableAggregation.ONLY_FIRST_REPLICA]


def _assert_is_deep_copy(v1, v2):
    assert isinstance(v2, type(v1)) and v2.kind == v1.kind
    assert v1.aggregation == v2.aggregation
    assert v1.distribute_strategy is v2.distribute_strategy
    assert len(v1.values) == len(v2.values)
    for a, b in zip(v1.values, v2.values):
        assert a.device == b.device and a.device is not None
        assert id(a) != id(b)
        np.testing.assert_array_equal(np.asarray(v1.values), np.asarray(v2.values))


@pytest.mark.parametrize("aggregation", AGG, ids=lambda a: a.name)
@pytest.mark.parametrize("synchronization", SYNC, ids=lambda s: s.name)
def test_deep_copy(synchronization, aggregation):           # testDeepCopy (MirroredStrategy)
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with strategy.scope():
        v = tps.Variable(0.0, synchronization=synchronization, aggregation=aggregation)
        in_dist_copy = copy.deepcopy(v)
    out_dist_copy = copy.deepcopy(v)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # np.asarray of a replica's value: the eager path, one warning
        strategy.run(_assert_is_deep_copy, args=(v, in_dist_copy))
        strategy.run(_assert_is_deep_copy, args=(v, out_dist_copy))


@pytest.mark.parametrize("aggregation", AGG, ids=lambda a: a.name)
def test_deep_copy_on_tpu_strategy(aggregation):          # testDeepCopy (TPU: no check in run)
    strategy = tps.TPUStrategy()
    with strategy.scope():
        v = tps.Variable(0.0, synchronization=tps.VariableSynchronization.ON_READ, aggregation=aggregation)
        in_dist_copy = copy.deepcopy(v)
    out_dist_copy = copy.deepcopy(v)
    _assert_is_deep_copy(v, in_dist_copy)
    _assert_is_deep_copy(v, out_dist_copy)


def test_components_read_in_a_step_are_current_not_the_values_at_trace_time():
    # v.values[i] inside a compiled step reads the variable as the step runs (TensorFlow reads the
    # component variable); it once gave the value from the first trace on every later call.
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with strategy.scope():
        m = tps.Variable(1.0)
        r = tps.Variable(1.0, synchronization=tps.VariableSynchronization.ON_READ,
                         aggregation=tps.VariableAggregation.SUM)

    def step():
        return m.values[1].read_value() + 0.0, r.values[1].read_value() + 0.0, r.values[0].device

    @tps.function
    def cross():
        return m.values[0].read_value() + 0.0, r.values[1].read_value() + 0.0

    seen = []
    for new_m, new_r in [(5.0, 8.0), (7.0, 2.0)]:
        got_m, got_r, device = strategy.run(step)
        seen.append(([float(x) for x in strategy.experimental_local_results(got_m)],
                     [float(x) for x in strategy.experimental_local_results(got_r)]))
        assert device == jax.devices()[0]
        cm, cr = cross()
        assert (float(cm), float(cr)) == (seen[-1][0][0], seen[-1][1][0])
        m.assign(new_m)
        r.assign(new_r)          # SUM in cross-replica context: each component gets new_r / 2
    got_m, got_r, _ = strategy.run(step)
    seen.append(([float(x) for x in strategy.experimental_local_results(got_m)],
                 [float(x) for x in strategy.experimental_local_results(got_r)]))
    assert seen == [([1.0, 1.0], [1.0, 1.0]), ([5.0, 5.0], [4.0, 4.0]), ([7.0, 7.0], [1.0, 1.0])]


def test_one_replicas_sync_on_read_component_read_by_every_replica():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with strategy.scope():
        r = tps.Variable(0.0, synchronization=tps.VariableSynchronization.ON_READ,
                         aggregation=tps.VariableAggregation.SUM)

    def write():
        ctx = tps.get_replica_context()
        r.assign(jax.numpy.float32(ctx.replica_id_in_sync_group) + 3.0)

    def read():
        return r.values[0].read_value() * 10.0 + r.values[1].read_value()

    strategy.run(write)
    out = strategy.run(read)
    assert [float(x) for x in strategy.experimental_local_results(out)] == [34.0, 34.0]
