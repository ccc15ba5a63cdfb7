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
    """Counts the calls that ran the donating executable (on the values, or on copies of them)."""
    calls = [0]
    real = program_module.Program._donating

    def counting(self):
        found = real(self)
        if found is None or getattr(found[0], "counted", False):
            return found
        jitted, donate = found

        def donating(*args):
            calls[0] += 1
            return jitted(*args)

        donating.counted = True
        self._donate = (donating, donate)  # the program's one donating executable, counted
        return self._donate

    monkeypatch.setattr(program_module.Program, "_donating", counting)
    return calls


@pytest.fixture
def copies(monkeypatch):
    """Counts the old values copied because something else held them (the copy is donated)."""
    made = [0]
    real = program_module._copy

    def counting(x):
        made[0] += 1
        return real(x)

    monkeypatch.setattr(program_module, "_copy", counting)
    return made


@pytest.fixture
def compiles():
    """Counts XLA compilations (JAX's public monitoring events) while the test runs."""
    return _COMPILES.counting()


class _CompileCounter:
    def __init__(self):
        self.count = None
        jax.monitoring.register_event_duration_secs_listener(self._event)

    def _event(self, name, duration, **kwargs):
        if self.count is not None and name.endswith("backend_compile_duration"):
            self.count[0] += 1

    def counting(self):
        self.count = [0]
        return self.count


_COMPILES = _CompileCounter()


def _replicated(strategy, x):
    """``x`` where the strategy's programs take a broadcast input (no copy per call)."""
    return jax.device_put(x, NamedSharding(strategy.mesh, P()))


def _variables(strategy, n):
    with strategy.scope():
        return [tps.Variable(np.zeros(4, np.float32)) for _ in range(n)]


@pytest.mark.parametrize("n", [2, 40], ids=["few", "many"])
def test_steps_donate_when_only_the_variables_hold_their_values(donated_calls, copies, n):
    strategy = tps.MirroredStrategy()
    variables = _variables(strategy, n)
    x = _replicated(strategy, jnp.arange(4.0))

    def step(x):
        for v in variables:
            v.assign_add(x)
        return jnp.sum(x)

    for _ in range(6):
        strategy.run(step, (x,))
    assert donated_calls[0] == 6  # every call, the first one too
    assert copies[0] == 0
    for v in variables:
        np.testing.assert_array_equal(np.asarray(v.read_value()), 6 * np.arange(4.0))


@pytest.mark.parametrize("n", [2, 40], ids=["few", "many"])
def test_a_value_the_user_kept_is_never_donated_and_stays_valid(donated_calls, copies, n):
    strategy = tps.MirroredStrategy()
    variables = _variables(strategy, n)
    x = _replicated(strategy, jnp.ones(4))

    def step(x):
        for v in variables:
            v.assign_add(x)
        return jnp.sum(x)

    for _ in range(4):
        strategy.run(step, (x,))
    assert copies[0] == 0
    kept = variables[-1].read_value()  # the user keeps the old value ...
    strategy.run(step, (x,))
    assert copies[0] >= 1  # ... the next call donates a copy of it
    made = copies[0]
    for _ in range(2):
        strategy.run(step, (x,))
    assert copies[0] == made  # later calls donate the values themselves
    assert donated_calls[0] == 7
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
    assert donated_calls[0] == 8  # every call, the first one too
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


@pytest.mark.parametrize("wrap", ["run", "function"])
def test_a_step_compiles_once(compiles, wrap):
    """The first call runs the donating executable the later calls run: one compilation."""
    strategy = tps.MirroredStrategy()
    a, b = _variables(strategy, 2)
    x = _replicated(strategy, jnp.ones(4))

    def step(x):
        a.assign_add(x)
        b.assign_add(2 * x)
        return jnp.sum(x)

    call = (lambda x: strategy.run(step, (x,))) if wrap == "run" else tps.function(lambda x: strategy.run(step, (x,)))
    call(x)
    assert compiles[0] == 1
    for _ in range(7):
        call(x)
    assert compiles[0] == 1
    np.testing.assert_array_equal(np.asarray(b.read_value()), np.full(4, 16.0))


def test_a_value_kept_before_the_first_call_stays_valid_and_later_calls_donate(donated_calls, copies):
    """Held elsewhere at the first call: that call keeps every buffer (the non-donating
    executable); later calls donate once nothing else holds the values."""
    strategy = tps.MirroredStrategy()
    (v,) = _variables(strategy, 1)
    x = _replicated(strategy, jnp.ones(4))
    kept = v.read_value()

    def step(x):
        v.assign_add(x)
        return jnp.sum(x)

    strategy.run(step, (x,))
    assert donated_calls[0] == 0 and copies[0] == 0
    np.testing.assert_array_equal(np.asarray(kept), np.zeros(4))
    del kept
    for _ in range(4):
        strategy.run(step, (x,))
    assert donated_calls[0] >= 3
    np.testing.assert_array_equal(np.asarray(v.read_value()), np.full(4, 5.0))


def test_a_general_call_copies_only_the_values_held_elsewhere(donated_calls, copies):
    """An input that needs placing sends the call down the general path every time: a value only
    its variable holds is donated there as it is."""
    strategy = tps.MirroredStrategy()
    a, b = _variables(strategy, 2)

    def step(x):
        a.assign_add(x)
        b.assign_add(x)
        return jnp.sum(x)

    for _ in range(4):
        strategy.run(step, (np.ones(4, np.float32),))  # a host array: placed at every call
    assert copies[0] == 0
    kept = b.read_value()
    strategy.run(step, (np.ones(4, np.float32),))
    assert copies[0] == 1  # b's old value only
    assert donated_calls[0] == 5
    np.testing.assert_array_equal(np.asarray(kept), np.full(4, 4.0))
    np.testing.assert_array_equal(np.asarray(a.read_value()), np.full(4, 5.0))


def test_a_step_that_writes_a_variable_it_never_reads_and_returns_nothing():
    """No results and a written variable that is not an input: the in-flight token is picked at
    the first call's end; the read-and-written one is donated."""
    strategy = tps.MirroredStrategy()
    a, b = _variables(strategy, 2)

    def step():
        a.assign(jnp.full(4, 3.0))  # written, never read
        b.assign_add(jnp.ones(4))

    for _ in range(12):
        strategy.run(step)
    np.testing.assert_array_equal(np.asarray(a.read_value()), np.full(4, 3.0))
    np.testing.assert_array_equal(np.asarray(b.read_value()), np.full(4, 12.0))
