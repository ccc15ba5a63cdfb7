"""The per-call fast path: a call with the kinds and shapes of a cached program goes straight to it.

Counted, not timed: once a program exists for a call's fast key, the call neither
classifies its inputs (``signature.classify``) nor traces; results, variable writes and
retraces on a new shape are the same as on the classifying path.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.execution import leaves, signature


@pytest.fixture
def strategy():
    return tps.MirroredStrategy([f"/cpu:{i}" for i in range(4)])


@pytest.fixture
def classify_calls(monkeypatch):
    calls = []
    original = signature.classify

    def counting(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(signature, "classify", counting)
    return calls


def _per_replica(n, offset=0.0, width=2):
    return tps.PerReplica([jnp.full((width,), float(i) + offset) for i in range(n)])


@pytest.mark.devices(4)
def test_a_repeated_run_call_skips_classification_and_writes_the_variable_every_call(strategy, classify_calls):
    n = strategy.num_replicas_in_sync
    with strategy.scope():
        total = tps.Variable(jnp.zeros(2))

    def step(x):
        s = tps.get_replica_context().all_reduce("SUM", x)
        total.assign_add(s)
        return s

    x = _per_replica(n)
    for _ in range(2):  # the first call classifies and builds; the second fills the fast cache
        strategy.run(step, (x,))
    before = len(classify_calls)
    for _ in range(3):
        out = strategy.run(step, (x,))
    assert len(classify_calls) == before  # straight to the program
    want = sum(range(n))  # hand-computed: 0 + 1 + 2 + 3 per element
    for component in strategy.experimental_local_results(out):
        np.testing.assert_allclose(np.asarray(component), [want, want])
    np.testing.assert_allclose(np.asarray(total.read_value()), [5 * want] * 2)  # 5 calls, 5 writes


@pytest.mark.devices(4)
def test_new_values_of_the_same_kinds_and_shapes_take_the_fast_path_with_their_own_results(strategy, classify_calls):
    n = strategy.num_replicas_in_sync

    def shift(x, k):
        return x + k  # a stacked PerReplica result: a new object each call, same shape

    def step(x, scale):
        return tps.get_replica_context().all_reduce("SUM", x) * scale

    x = _per_replica(n)
    counts = []
    for k in range(5):
        value = strategy.run(shift, (x, jnp.float32(k)))
        y = strategy.run(step, (value, 2.0))
        counts.append(len(classify_calls))
        want = 2.0 * sum(i + k for i in range(n))  # hand-computed
        np.testing.assert_allclose(np.asarray(strategy.experimental_local_results(y)[0]), [want, want])
    assert counts[2] == counts[3] == counts[4]  # from the third step on, no classification


@pytest.mark.devices(4)
def test_another_shape_or_static_value_builds_its_own_program(strategy):
    n = strategy.num_replicas_in_sync

    def step(x, k):
        return tps.get_replica_context().all_reduce("SUM", x) * k

    a = strategy.run(step, (_per_replica(n, width=2), 1))
    b = strategy.run(step, (_per_replica(n, width=3), 1))
    c = strategy.run(step, (_per_replica(n, width=3), 10))
    assert strategy.experimental_local_results(a)[0].shape == (2,)
    assert strategy.experimental_local_results(b)[0].shape == (3,)
    np.testing.assert_allclose(np.asarray(strategy.experimental_local_results(c)[0]), [10.0 * sum(range(n))] * 3)


@pytest.mark.devices(4)
def test_a_function_marked_eager_leaves_the_fast_path(strategy):
    n = strategy.num_replicas_in_sync
    seen = []

    def step(x, flag):
        if flag:  # a Python value: fine; concretising x below is not
            seen.append(int(tps.get_replica_context().replica_id_in_sync_group))
        return x * 2

    x = _per_replica(n)
    strategy.run(step, (x, False))
    strategy.run(step, (x, False))
    with pytest.warns(UserWarning, match="cannot be compiled into one program"):
        strategy.run(step, (x, True))
    out = strategy.run(step, (x, False))  # same fast key as before, but the function now runs eagerly
    assert sorted(seen) == list(range(n))
    np.testing.assert_allclose(np.asarray(strategy.experimental_local_results(out)[1]), [2.0, 2.0])


@pytest.mark.devices(4)
def test_tps_function_repeated_calls_skip_classification(strategy, classify_calls):
    n = strategy.num_replicas_in_sync
    with strategy.scope():
        count = tps.Variable(0.0)

    @tps.function
    def f(x):
        count.assign_add(1.0)
        return strategy.run(lambda v: tps.get_replica_context().all_reduce("MEAN", v), (x,))

    x = _per_replica(n)
    for _ in range(3):  # build; stack the host-built argument once; fill the fast cache
        f(x)
    before = len(classify_calls)
    for _ in range(3):
        out = f(x)
    assert len(classify_calls) == before
    assert float(count.numpy()) == 6.0
    np.testing.assert_allclose(np.asarray(out.values[0]), [np.mean(range(n))] * 2)


@pytest.mark.devices(4)
def test_tps_function_pulling_from_an_iterator_never_takes_the_fast_path(strategy):
    data = tpsd.Dataset.range(32).map(lambda i: np.float32(i)).batch(8)
    iterator = iter(strategy.experimental_distribute_dataset(data))

    @tps.function
    def f(scale):
        batch = next(iterator)
        return strategy.reduce("SUM", strategy.run(lambda b: jnp.sum(b) * scale, (batch,)), axis=None)

    sums = [float(f(1.0)) for _ in range(4)]
    assert sums == [28.0, 92.0, 156.0, 220.0]  # every call pulls the next global batch of 8


def test_call_keys_name_kinds_shapes_and_static_values():
    a = jnp.zeros((2, 3))
    key_a, arrays = leaves.call_key((a, 1, {"y": np.ones(2)}), {}, None)
    assert arrays[0] is a and len(arrays) == 2
    assert leaves.call_key((jnp.zeros((2, 3)), 1, {"y": np.ones(2)}), {}, None)[0] == key_a
    assert leaves.call_key((jnp.zeros((2, 4)), 1, {"y": np.ones(2)}), {}, None)[0] != key_a
    assert leaves.call_key((a, 2, {"y": np.ones(2)}), {}, None)[0] != key_a
    assert leaves.call_key((a, 1, {"y": np.ones(2, np.int32)}), {}, None)[0] != key_a
    assert leaves.call_key((a.astype(jnp.int32), 1, {"y": np.ones(2)}), {}, None)[0] != key_a
    import collections

    pair = collections.namedtuple("pair", "a b")
    key_p = leaves.call_key((pair(a, 1),), {}, None)[0]
    assert key_p != leaves.call_key(((a, 1),), {}, None)[0]  # a namedtuple is its own structure
    assert leaves.call_key((pair(jnp.ones((2, 3)), 1),), {}, None)[0] == key_p
    assert leaves.call_key((object(),), {}, None) is None  # objects: the classifying path
    assert leaves.call_key((tps.PerReplica([1.0, 2.0]),), {}, None) is None  # not stacked yet


@pytest.mark.devices(4)
def test_inside_a_users_jax_jit_a_variable_writing_step_still_names_the_fix(strategy):
    n = strategy.num_replicas_in_sync
    with strategy.scope():
        v = tps.Variable(jnp.zeros(2))

    def step(x):
        v.assign(tps.get_replica_context().all_reduce("SUM", x))
        return x

    x = _per_replica(n)
    strategy.run(step, (x,))
    strategy.run(step, (x,))
    with pytest.raises(TypeError, match="inside a JAX transformation"):
        jax.jit(lambda: strategy.run(step, (x,)).values[0])()
