"""A written variable's old value is donated to the program that overwrites it, only when nothing
else holds it: a value the user kept from an earlier read stays valid, and results are exact."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import tpustrategy as tps
from tpustrategy._src.execution import program as program_module


@pytest.fixture
def donated_calls(monkeypatch):
    """Counts the calls that ran a donating program (the generated call picks it per call)."""
    calls = [0]
    real = program_module.Program._donating

    def counting(self):
        found = real(self)
        if found is None:
            return None
        jitted, donate = found

        def donating(*args):
            calls[0] += 1
            return jitted(*args)

        return donating, donate

    monkeypatch.setattr(program_module.Program, "_donating", counting)
    return calls


def _replicated(strategy, x):
    """``x`` where the strategy's programs take a broadcast input (no copy per call)."""
    return jax.device_put(x, NamedSharding(strategy.mesh, P()))


def _variables(strategy, n):
    with strategy.scope():
        return [tps.Variable(np.zeros(4, np.float32)) for _ in range(n)]


@pytest.mark.parametrize("n", [2, 40], ids=["few", "many"])
def test_steps_donate_when_only_the_variables_hold_their_values(donated_calls, n):
    strategy = tps.MirroredStrategy()
    variables = _variables(strategy, n)
    x = _replicated(strategy, jnp.arange(4.0))

    def step(x):
        for v in variables:
            v.assign_add(x)
        return jnp.sum(x)

    for _ in range(6):
        strategy.run(step, (x,))
    assert donated_calls[0] >= 4  # every call after the first ones, which build and specialise
    for v in variables:
        np.testing.assert_array_equal(np.asarray(v.read_value()), 6 * np.arange(4.0))


@pytest.mark.parametrize("n", [2, 40], ids=["few", "many"])
def test_a_value_the_user_kept_is_never_donated_and_stays_valid(donated_calls, n):
    strategy = tps.MirroredStrategy()
    variables = _variables(strategy, n)
    x = _replicated(strategy, jnp.ones(4))

    def step(x):
        for v in variables:
            v.assign_add(x)
        return jnp.sum(x)

    for _ in range(4):
        strategy.run(step, (x,))
    before = donated_calls[0]
    kept = variables[-1].read_value()  # the user keeps the old value ...
    for _ in range(3):
        strategy.run(step, (x,))
    assert donated_calls[0] == before + 2  # ... the next call keeps every buffer, later ones donate
    assert not kept.is_deleted()
    np.testing.assert_array_equal(np.asarray(kept), np.full(4, 4.0))
    np.testing.assert_array_equal(np.asarray(variables[-1].read_value()), np.full(4, 7.0))


def test_a_tps_function_donates_too_and_its_results_match_plain_jax(donated_calls):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        w = tps.Variable(jnp.ones((3, 2)))
        b = tps.Variable(jnp.zeros(2))
    x = _replicated(strategy, jnp.arange(6.0).reshape(2, 3))

    def replica_step(x):
        loss, (gw, gb) = jax.value_and_grad(lambda p: jnp.sum((x @ p[0] + p[1]) ** 2))((w.read_value(), b.read_value()))
        ctx = tps.get_replica_context()
        w.assign_sub(0.01 * ctx.all_reduce("MEAN", gw))
        b.assign_sub(0.01 * ctx.all_reduce("MEAN", gb))
        return loss

    @tps.function
    def train(x):
        return strategy.run(replica_step, (x,))

    hand = [jnp.ones((3, 2)), jnp.zeros(2)]
    for _ in range(8):
        train(x)
        gw, gb = jax.grad(lambda p: jnp.sum((x @ p[0] + p[1]) ** 2))(tuple(hand))
        hand = [hand[0] - 0.01 * gw, hand[1] - 0.01 * gb]
    assert donated_calls[0] >= 5  # every call after the first ones, which build and specialise
    np.testing.assert_allclose(np.asarray(w.read_value()), np.asarray(hand[0]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(b.read_value()), np.asarray(hand[1]), rtol=1e-6)


def test_a_step_that_only_writes_keeps_one_value_for_the_in_flight_bound():
    strategy = tps.MirroredStrategy()
    a, b = _variables(strategy, 2)

    def step():
        a.assign_add(jnp.ones(4))
        b.assign_add(2 * jnp.ones(4))

    for _ in range(30):  # more than the in-flight bound: the kept value is waited on, never deleted
        strategy.run(step)
    np.testing.assert_array_equal(np.asarray(a.read_value()), np.full(4, 30.0))
    np.testing.assert_array_equal(np.asarray(b.read_value()), np.full(4, 60.0))


def test_a_value_passed_as_an_argument_too_is_not_donated(donated_calls):
    strategy = tps.MirroredStrategy()
    (v,) = _variables(strategy, 1)

    def step(x):
        v.assign(x + 1)
        return x

    for _ in range(4):
        out = strategy.run(step, (v.read_value(),))  # the value is the variable's and an argument
    assert donated_calls[0] == 0
    np.testing.assert_array_equal(np.asarray(v.read_value()), np.full(4, 4.0))
    assert not jax.tree_util.tree_leaves(out)[0].is_deleted()
