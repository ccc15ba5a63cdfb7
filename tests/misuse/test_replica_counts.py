"""A distributed value with the wrong number of components is a clear error on every path."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import tpustrategy as tps

FIX = "give one component per replica (strategy.num_replicas_in_sync = 1)"


def _strategy():
    return tps.MirroredStrategy(devices=jax.devices()[:1])


@pytest.mark.parametrize("eager", [False, True], ids=["compiled", "eager"])
def test_run_names_the_argument_and_both_counts(eager):
    s = _strategy()
    x = tps.PerReplica([np.float32(i) for i in range(4)])
    tps.config.run_functions_eagerly(eager)
    try:
        with pytest.raises(ValueError) as info:
            s.run(lambda v: v + 1, (x,))
    finally:
        tps.config.run_functions_eagerly(False)
    message = str(info.value)
    assert "argument args[0] has 4 components, but the strategy has 1 replicas" in message
    assert FIX in message


def test_a_per_replica_passed_through_a_tps_function_is_checked_inside_it():
    s = _strategy()

    @tps.function
    def step(v):
        return s.run(lambda w: w + 1, (v,))

    with pytest.raises(ValueError, match=r"has 4 components, but the strategy has 1 replicas"):
        step(tps.PerReplica([np.ones((2, 3), np.float32)] * 4))


def test_a_sync_on_read_assign_names_the_variable_and_both_counts():
    s = _strategy()
    with s.scope():
        total = tps.Variable(0.0, synchronization=tps.VariableSynchronization.ON_READ,
                             aggregation=tps.VariableAggregation.SUM)
    with pytest.raises(ValueError) as info:
        total.assign(tps.PerReplica([np.float32(i) for i in range(8)]))
    message = str(info.value)
    assert f"{total.name!r} is a sync-on-read variable with one value per replica (1 replicas)" in message
    assert "the PerReplica has 8 components" in message and FIX in message
