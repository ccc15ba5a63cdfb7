"""``strategy.run``'s direct call: what it skips must never change what a call does.

A call whose function and argument kinds already have a program goes straight to it
(``ReplicaRunner.fast_call``); a call passing the very same argument objects as the last one
even skips the key (``FastCache.call``'s repeat of the last hit). The cases below change exactly what
those shortcuts do not look at — a list mutated in place, a variable assigned a value on
another placement, the context the call is made from — and check the results against
values worked out by hand. Counted and compared, not timed.
"""

from __future__ import annotations

import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
from tpustrategy._src import activity
from tpustrategy._src.context import stack
from tpustrategy._src.execution import signature
from tpustrategy._src.variables import frames

N = 4


@pytest.fixture
def strategy():
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(N)])


def _sum(x):
    return tps.get_replica_context().all_reduce("SUM", x)


def _components(value):
    return [np.asarray(c) for c in value.values]


@pytest.mark.devices(N)
def test_the_same_argument_objects_again_give_the_program_s_fresh_results(strategy):
    total = None
    with strategy.scope():
        total = tps.Variable(jnp.zeros(3))

    def step(x):
        total.assign_add(_sum(x))
        return total.read_value()

    x = tps.PerReplica([jnp.full((3,), float(i)) for i in range(N)])
    results = [strategy.run(step, (x,)) for _ in range(5)]
    # Each call adds 0+1+2+3 = 6 and returns the running total: 6, 12, ... 30 on every replica.
    for k, result in enumerate(results, start=1):
        for component in _components(result):
            np.testing.assert_allclose(component, np.full(3, 6.0 * k))
    np.testing.assert_allclose(np.asarray(total.read_value()), np.full(3, 30.0))


@pytest.mark.devices(N)
def test_a_list_argument_mutated_in_place_is_read_again(strategy, monkeypatch):
    values = [jnp.ones(2), jnp.ones(2)]

    def step(pair):
        return pair[0] + 2 * pair[1]

    args = (values,)
    strategy.run(step, args)
    first = strategy.run(step, args)  # a direct call now (its program is known)
    values[1] = jnp.full(2, 10.0)   # same list object, new content
    second = strategy.run(step, args)
    np.testing.assert_allclose(_components(first)[0], [3.0, 3.0])
    np.testing.assert_allclose(_components(second)[0], [21.0, 21.0])


@pytest.mark.devices(N)
def test_another_array_of_the_same_shape_is_a_new_input_not_the_last_one(strategy):
    def step(x):
        return _sum(x)

    # Committed to one device: each call must place them on every replica's device.
    a = jax.device_put(jnp.arange(3.0), jax.devices()[0])
    b = jax.device_put(jnp.arange(3.0) + 100, jax.devices()[1])
    strategy.run(step, (a,))
    ra = strategy.run(step, (a,))
    rb = strategy.run(step, (b,))
    ra2 = strategy.run(step, (a,))
    # A broadcast array: each of the 4 replicas adds its own copy.
    np.testing.assert_allclose(_components(ra)[0], 4 * np.arange(3.0))
    np.testing.assert_allclose(_components(rb)[0], 4 * (np.arange(3.0) + 100))
    np.testing.assert_allclose(_components(ra2)[0], 4 * np.arange(3.0))


@pytest.mark.devices(N)
def test_a_variable_assigned_on_another_placement_between_calls_is_placed_again(strategy):
    with strategy.scope():
        w = tps.Variable(jnp.ones(3))

    def step():
        w.assign(w.read_value() * 2)
        return w.read_value()

    strategy.run(step)
    strategy.run(step)                      # 4
    w.assign(np.full(3, 5.0, np.float32))   # a host value, placed by assign
    after = strategy.run(step)
    for component in _components(after):
        np.testing.assert_allclose(component, np.full(3, 10.0))
    # A value committed to one device only: the program still gets it on every replica.
    w.assign(jax.device_put(jnp.full(3, 7.0), jax.devices()[0]))
    again = strategy.run(step)
    for component in _components(again):
        np.testing.assert_allclose(component, np.full(3, 14.0))


@pytest.mark.devices(N)
def test_a_direct_call_inside_the_scope_matches_one_outside(strategy, monkeypatch):
    x = tps.PerReplica([jnp.full((2,), float(i)) for i in range(N)])
    strategy.run(_sum, (x,))  # stacks x (a host-built value has no fast key before)
    outside = strategy.run(_sum, (x,))
    calls = []
    original = signature.classify
    monkeypatch.setattr(signature, "classify", lambda *a, **k: calls.append(1) or original(*a, **k))
    with strategy.scope():
        inside = strategy.run(_sum, (x,))
    assert calls == []  # the scope of the same strategy keeps the direct call
    assert _components(inside)[0].tolist() == _components(outside)[0].tolist() == [6.0, 6.0]


@pytest.mark.devices(N)
def test_a_compiled_function_called_from_a_replica_function_still_raises_tensorflow_s_error(strategy):
    x = tps.PerReplica([jnp.full((2,), float(i)) for i in range(N)])
    strategy.run(_sum, (x,))  # a program now exists for (_sum, this key)
    seen = []

    def replica_fn(v):
        if float(v.sum()) >= 0:   # a Python branch on a replica value: the eager path, one thread each
            seen.append(1)
            strategy.run(_sum, (x,))
        return v

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="cross-replica context"):
            strategy.run(replica_fn, (x,))
    assert seen  # the replica function ran eagerly, and its nested run was refused


@pytest.mark.devices(N)
def test_another_strategy_s_scope_is_refused_even_with_a_program(strategy):
    other = tps.MirroredStrategy([f"/cpu:{i}" for i in range(N)])
    x = tps.PerReplica([jnp.full((2,), float(i)) for i in range(N)])
    strategy.run(_sum, (x,))
    with other.scope():
        with pytest.raises(RuntimeError, match="Mixing different tf.distribute.Strategy"):
            strategy.run(_sum, (x,))


@pytest.mark.devices(N)
def test_no_entry_or_frame_is_left_counted_after_calls_and_errors(strategy):
    x = tps.PerReplica([jnp.full((2,), float(i)) for i in range(N)])

    def failing(v):
        raise KeyError("inside")

    strategy.run(_sum, (x,))
    with pytest.raises(KeyError):
        strategy.run(failing, (x,))

    @tps.function
    def f(v):
        return strategy.run(_sum, (v,))

    f(x)
    done = []
    thread = threading.Thread(target=lambda: done.append(strategy.run(_sum, (x,))))
    thread.start()
    thread.join(60)
    assert done and _components(done[0])[0].tolist() == [6.0, 6.0]
    assert activity.ANY == []
    assert stack.current_entry() is None and frames.current() is None


@pytest.mark.devices(N)
def test_warnings_point_at_the_user_s_line(strategy):
    x = tps.PerReplica([jnp.full((2,), float(i)) for i in range(N)])

    def python_branch(v):
        return v if float(v.sum()) > 0 else -v

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        strategy.run(python_branch, (x,))
        for _ in range(6):
            strategy.run(lambda v: v + 1, (x,))
    files = {w.filename for w in caught if "strategy.run" in str(w.message)}
    assert files == {__file__}, files


@pytest.mark.devices(N)
@pytest.mark.parametrize("dtype, first", [
    (np.float32, [-0.0, np.nan, np.inf, -np.inf, 1e-45]),  # signed zero, NaN, infinities, a subnormal
    (np.int32, [np.iinfo(np.int32).max, np.iinfo(np.int32).min, 0, -1, 7]),
    (np.bool_, [True, False, True, True, False]),
])
def test_an_only_first_replica_write_takes_replica_0_s_value_bit_for_bit(strategy, dtype, first):
    """Replica 0's value reaches the variable unchanged in every bit (an all-reduce over a filler
    would not: XLA flushes subnormals, and its sum starts from +0.0)."""
    first = np.asarray(first, dtype)
    with strategy.scope():
        v = tps.Variable(np.zeros(5, dtype), aggregation=tps.VariableAggregation.ONLY_FIRST_REPLICA)
    others = [np.asarray(np.arange(5) + 10 * r, dtype) for r in range(1, N)]
    x = tps.PerReplica([jnp.asarray(first)] + [jnp.asarray(o) for o in others])

    def step(value):
        v.assign(value)

    strategy.run(step, (x,))
    got = np.asarray(v.read_value())
    assert got.tobytes() == first.tobytes(), (got, first)


@pytest.mark.devices(N)
def test_the_eager_switch_is_honoured_after_programs_were_cached(strategy):
    """``run_functions_eagerly(True)`` marks ``activity.ANY``: cached programs are not taken."""
    x = tps.PerReplica([jnp.full((2,), float(i)) for i in range(N)])
    traced_or_eager = []

    def step(v):
        traced_or_eager.append(isinstance(v, jax.core.Tracer))
        return v * 2.0

    @tps.function
    def f(v):
        traced_or_eager.append("function body")
        return strategy.run(step, (v,))

    strategy.run(step, (x,))
    f(x)
    traced_or_eager.clear()
    strategy.run(step, (x,))
    f(x)
    assert traced_or_eager == []  # both cached: nothing of the Python ran
    tps.config.run_functions_eagerly(True)
    try:
        assert activity.ANY
        out = strategy.run(step, (x,))
        assert traced_or_eager == [False] * N  # one eager call per replica, concrete values
        traced_or_eager.clear()
        f(x)
        assert traced_or_eager[0] == "function body" and traced_or_eager[1:] == [False] * N
    finally:
        tps.config.run_functions_eagerly(False)
    assert activity.ANY == []
    assert [c.tolist() for c in _components(out)] == [[2.0 * i] * 2 for i in range(N)]


@pytest.mark.devices(N)
def test_a_mirrored_result_carries_the_leaf_spec_its_next_call_would_compute(strategy):
    """Functional state passed back: the program's Mirrored results keep their leaf spec."""
    from tpustrategy._src.values.distributed import Mirrored

    x = tps.PerReplica([jnp.full((3,), float(i)) for i in range(N)])

    def step(w, v):
        return w + tps.get_replica_context().all_reduce("SUM", v), v

    w = jnp.zeros(3)
    for expected in (6.0, 12.0, 18.0):
        w, _ = strategy.run(step, (w, x))
        assert isinstance(w, Mirrored)
        assert w._leaf is not None   # set by the program, not computed on the next call
        kept = w.leaf(None)
        assert kept[1] is w.replicated_array
        assert kept[0] == Mirrored.spec_of(w.replicated_array, N)
        assert [c.tolist() for c in _components(w)] == [[expected] * 3] * N


@pytest.mark.devices(N)
def test_calls_alternating_between_two_structures_build_two_programs_and_stay_right(strategy):
    # ``FastCache.call`` only repeats the last hit; a call of the other structure misses there
    # and is found by its key on the full path, so nothing is traced again.
    traces = []

    def step(x):
        traces.append(x.shape)
        return _sum(x) * 2.0

    a = tps.PerReplica([jnp.full((2,), float(i)) for i in range(N)])       # sum 0+1+2+3 = 6
    b = tps.PerReplica([jnp.full((3,), float(i + 1)) for i in range(N)])   # sum 1+2+3+4 = 10
    for _ in range(4):
        for value, want in ((a, np.full(2, 12.0)), (b, np.full(3, 20.0))):
            result = strategy.run(step, (value,))
            for component in _components(result):
                np.testing.assert_allclose(component, want)
    assert sorted(traces) == [(2,), (3,)]


def test_the_cache_s_direct_call_repeats_only_what_a_lookup_found():
    from tpustrategy._src.execution import entry, leaves

    class Program:
        def __init__(self):
            self.calls = []

        def fast(self, arrays):
            self.calls.append(arrays)
            return "ran"

    cache, owner, program = entry.FastCache(8), object(), Program()
    x = jax.numpy.ones(3)
    key = leaves.call_key((x,), None, None)[0]
    cache.put(owner, key, program)
    # A key in the cache but never looked up: the direct call computes nothing and misses.
    assert cache.call(owner, (x,)) is entry.MISS
    assert program.calls == []
    hit = cache.lookup(owner, (x,), None, None)
    assert hit[0] is program
    assert cache.call(owner, (x,)) == "ran"                       # the guard: the same objects
    assert cache.call(owner, (jax.numpy.zeros(3),)) == "ran"      # the guard: same structure
    assert cache.call(owner, (jax.numpy.zeros(4),)) is entry.MISS  # another shape
    assert cache.call(object(), (x,)) is entry.MISS                # another owner
    assert len(program.calls) == 2


@pytest.mark.devices(N)
def test_the_direct_call_asks_the_gate_while_something_is_active(strategy, monkeypatch):
    from tpustrategy._src.execution import entry, leaves

    asked = []
    cache = entry.FastCache(8, gate=lambda: asked.append(1) or False)
    owner, x = object(), jax.numpy.ones(3)
    cache.put(owner, leaves.call_key((x,), None, None)[0], type("P", (), {"fast": lambda self, a: "ran"})())
    cache.lookup(owner, (x,), None, None)
    assert cache.call(owner, (x,)) == "ran" and asked == []   # nothing active: the gate is not asked
    monkeypatch.setattr(activity, "ANY", [None])
    monkeypatch.setattr(entry, "ANY", activity.ANY)
    assert cache.call(owner, (x,)) is entry.MISS and asked == [1]
