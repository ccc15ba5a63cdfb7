"""A program's variables' values kept as one list (``variables.store``): every read, write, copy
and layout change outside the program is seen, and programs over the same variables agree.

Each case runs a loop of steps through the generated call and checks the variables against
values worked out by hand after something else touched them between two steps.
"""

from __future__ import annotations

import copy
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import tpustrategy as tps
from tpustrategy._src.execution import program as program_module
from tpustrategy._src.variables import store as store_module


def _setup(n=8):
    strategy = tps.MirroredStrategy()
    with strategy.scope():
        variables = [tps.Variable(np.full(4, float(i), np.float32)) for i in range(n)]
    x = jax.device_put(jnp.ones(4), NamedSharding(strategy.mesh, P()))

    def step(x):
        for v in variables:
            v.assign_add(x)
        return jnp.sum(x)

    return strategy, variables, x, step


def _values(variables):
    return [np.asarray(v.read_value()) for v in variables]


@pytest.fixture
def general_calls(monkeypatch):
    """How often programs ran their general call (the generated call's exits)."""
    calls = [0]
    real = program_module.Program.__call__

    def counting(self, arrays, extra=()):
        calls[0] += 1
        return real(self, arrays, extra)

    monkeypatch.setattr(program_module.Program, "__call__", counting)
    return calls


def test_a_loop_keeps_its_variables_in_one_list_and_reads_outside_see_each_step(general_calls):
    strategy, variables, x, step = _setup()
    for i in range(6):
        strategy.run(step, (x,))
        # Each read between steps sees that step's write.
        assert [float(a[0]) for a in _values(variables)] == [j + i + 1.0 for j in range(len(variables))]
    before = general_calls[0]
    for _ in range(4):
        strategy.run(step, (x,))
    assert general_calls[0] == before  # the generated call, no exit
    held = {id(v._store) for v in variables}
    assert len(held) == 1 and None not in {v._store for v in variables}
    assert [float(a[0]) for a in _values(variables)] == [j + 10.0 for j in range(len(variables))]


def test_an_assign_between_steps_is_seen_by_the_next_step():
    strategy, variables, x, step = _setup()
    for _ in range(4):
        strategy.run(step, (x,))
    variables[3].assign(np.full(4, 100.0, np.float32))
    variables[5].assign_sub(np.full(4, 2.0, np.float32))
    strategy.run(step, (x,))
    got = [float(a[0]) for a in _values(variables)]
    want = [j + 5.0 for j in range(8)]
    want[3], want[5] = 101.0, 5 + 5.0 - 2.0
    assert got == want
    for _ in range(3):  # back on the generated call: still exact
        strategy.run(step, (x,))
    assert [float(a[0]) for a in _values(variables)] == [w + 3.0 for w in want]


def test_a_value_placed_elsewhere_between_steps_is_placed_again_by_the_next_step():
    strategy, variables, x, step = _setup(3)
    for _ in range(3):
        strategy.run(step, (x,))
    # As a restore from another layout may leave it: the value on one device only.
    variables[1]._value = jax.device_put(np.full(4, 50.0, np.float32), jax.devices()[0])
    strategy.run(step, (x,))
    assert [float(a[0]) for a in _values(variables)] == [4.0, 51.0, 6.0]
    assert variables[1].read_value().sharding.is_equivalent_to(NamedSharding(strategy.mesh, P()), 1)


def test_a_step_and_a_tps_function_over_the_same_variables_share_one_list(general_calls):
    strategy, variables, x, step = _setup()

    @tps.function
    def function_step(x):
        return strategy.run(step, (x,))

    for _ in range(3):
        strategy.run(step, (x,))
        function_step(x)
    before = general_calls[0]
    for _ in range(5):  # in turn, each call through its generated call
        strategy.run(step, (x,))
        function_step(x)
    assert general_calls[0] == before
    assert [float(a[0]) for a in _values(variables)] == [j + 16.0 for j in range(8)]


def test_two_steps_over_overlapping_variables_called_in_turn_stay_exact():
    strategy, variables, x, _ = _setup(6)
    first, second = variables[:4], variables[2:]

    def step_a(x):
        for v in first:
            v.assign_add(x)
        return jnp.sum(x)

    def step_b(x):
        for v in second:
            v.assign_add(2 * x)
        return jnp.sum(x)

    for _ in range(12):  # each call takes the shared variables out of the other's list
        strategy.run(step_a, (x,))
        strategy.run(step_b, (x,))
    want = [j + 12.0 * (1 if j < 2 else 3 if j < 4 else 2) for j in range(6)]
    assert [float(a[0]) for a in _values(variables)] == want


def test_a_deep_copy_of_a_variable_in_a_list_is_independent():
    strategy, variables, x, step = _setup(2)
    for _ in range(3):
        strategy.run(step, (x,))
    deep = copy.deepcopy(variables[0])
    assert copy.copy(variables[1]) is variables[1]  # TensorFlow: copy.copy shares the state
    assert getattr(deep, "_store", None) is None
    strategy.run(step, (x,))
    assert float(np.asarray(deep.read_value())[0]) == 3.0  # the value when copied
    deep.assign(np.zeros(4, np.float32))
    assert float(np.asarray(deep.read_value())[0]) == 0.0
    assert [float(a[0]) for a in _values(variables)] == [4.0, 5.0]
    strategy.run(step, (x,))
    assert [float(a[0]) for a in _values(variables)] == [5.0, 6.0]


def test_a_variable_in_a_list_pickles_its_value_not_the_list():
    strategy, variables, x, step = _setup(2)
    for _ in range(3):
        strategy.run(step, (x,))
    assert variables[0]._store is not None
    state = variables[0].__getstate__()
    assert "_store" not in state and "_index" not in state
    np.testing.assert_array_equal(np.asarray(state["_own"]), np.full(4, 3.0))
    pickle.dumps(state["_own"])  # the value itself, nothing of the program's list


def test_a_claimed_variable_leaves_no_buffer_in_the_old_list():
    strategy, variables, x, step = _setup(3)
    for _ in range(3):
        strategy.run(step, (x,))
    old = variables[0]._store

    def other(x):
        variables[0].assign_add(x)
        return jnp.sum(x)

    for _ in range(3):
        strategy.run(other, (x,))
    assert variables[0]._store is not old
    assert old.values[old.variables.index(variables[0])] is None and not old.ok
    strategy.run(step, (x,))
    assert [float(a[0]) for a in _values(variables)] == [7.0, 5.0, 6.0]
    assert isinstance(variables[0]._store, store_module.Store)


def test_values_read_before_or_between_steps_stay_valid_and_unread_ones_are_donated(monkeypatch):
    strategy, variables, x, step = _setup(4)
    donated = [0]
    real = program_module.Program._donating

    def counting(self):
        found = real(self)
        if found is None:
            return None

        def donating(*args):
            donated[0] += 1
            return found[0](*args)

        return donating, found[1]

    monkeypatch.setattr(program_module.Program, "_donating", counting)
    before_any = variables[2].read_value()  # read before the program holds the values
    for _ in range(4):
        strategy.run(step, (x,))
    assert not before_any.is_deleted()
    np.testing.assert_array_equal(np.asarray(before_any), np.full(4, 2.0))
    start = donated[0]
    for _ in range(3):  # nothing read since: every call donates
        strategy.run(step, (x,))
    assert donated[0] == start + 3
    between = variables[0].read_value()
    strategy.run(step, (x,))
    assert donated[0] == start + 3  # the value read is kept ...
    strategy.run(step, (x,))
    assert donated[0] == start + 4  # ... and the next call donates again
    assert not between.is_deleted()
    np.testing.assert_array_equal(np.asarray(between), np.full(4, 7.0))
    assert [float(a[0]) for a in _values(variables)] == [j + 9.0 for j in range(4)]
