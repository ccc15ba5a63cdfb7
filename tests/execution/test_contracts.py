"""The public contracts between packages (context.contracts) hold for the real classes."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.context import contracts


def test_strategies_implement_the_strategy_contract():
    strategy = tps.MirroredStrategy(jax.devices()[:4])
    assert isinstance(strategy, contracts.StrategyContract)
    assert isinstance(tps.get_strategy(), contracts.StrategyContract)
    assert strategy.is_default is False and tps.get_strategy().is_default is True
    assert strategy.replica_devices == tuple(jax.devices()[:4])
    assert strategy.worker_devices == tuple(jax.devices()[:4]) and strategy.first_local_replica == 0
    assert contracts.is_default(tps.get_strategy()) and not contracts.is_default(strategy)
    assert not contracts.is_default(object())


@pytest.mark.devices(2)
def test_replica_contexts_implement_their_contracts():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    assert isinstance(tps.get_replica_context(), contracts.ReplicaContextContract)
    assert tps.get_replica_context().is_default is True
    seen = []

    def step():
        ctx = tps.get_replica_context()
        seen.append((isinstance(ctx, contracts.EagerReplicaContract), ctx.is_default, ctx.local_replica_id,
                     ctx.device))
        return 0

    tps.config.run_functions_eagerly(True)
    try:
        strategy.run(step)
    finally:
        tps.config.run_functions_eagerly(False)
    assert sorted(seen, key=lambda s: s[2]) == [(True, False, 0, jax.devices()[0]), (True, False, 1, jax.devices()[1])]


@pytest.mark.devices(2)
def test_variables_implement_the_distributed_variable_contract():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with strategy.scope():
        mirrored = tps.Variable(jnp.arange(3.0))
        on_read = tps.Variable(1.0, synchronization=tps.VariableSynchronization.ON_READ,
                               aggregation=tps.VariableAggregation.SUM)
    plain = tps.Variable(2.0)
    assert isinstance(mirrored, contracts.DistributedVariableContract)
    assert (mirrored.kind, on_read.kind, plain.kind) == ("mirrored", "sync_on_read", "plain")
    assert contracts.is_distributed_variable(mirrored) and not contracts.is_distributed_variable(plain)
    assert not contracts.is_distributed_variable(jnp.ones(2))
    assert mirrored.strategy is strategy and mirrored.core_spec is None
    assert mirrored.global_shape == (3,) and on_read.global_shape == (2,)
    parts = mirrored.local_components()
    assert len(parts) == 2 and all(np.array_equal(np.asarray(p), [0.0, 1.0, 2.0]) for p in parts)


@pytest.mark.devices(2)
def test_distributed_iterators_are_pullable():
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    iterator = iter(strategy.experimental_distribute_dataset(tpsd.Dataset.range(4).batch(2)))
    assert isinstance(iterator, contracts.PullableIterator) and contracts.is_pullable(iterator)
    assert not contracts.is_pullable([1, 2])
    first = iterator.tps_pull()
    assert [int(np.asarray(v)[0]) for v in strategy.experimental_local_results(first)] == [0, 1]
