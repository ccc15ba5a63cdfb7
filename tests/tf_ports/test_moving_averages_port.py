"""TensorFlow's ``tensorflow/python/distribute/moving_averages_test.py``, ported.

TensorFlow's ``moving_averages.assign_moving_average`` and ``ExponentialMovingAverage`` are
not part of the ``tf.distribute`` surface we mirror, so this file writes them (``_assign_
moving_average``, ``_EMA``) with TensorFlow's algorithm on our public names: in a replica
function the value is averaged over the replicas in ``merge_call`` and applied with
``strategy.extended.update``; zero-debiasing keeps a ``biased`` and a ``local_step`` variable;
an EMA's shadow is ``copy.deepcopy`` of the variable. What is tested is TensorFlow's: the
inputs and asserted numbers of every case, on TensorFlow's list of strategies (default,
one device, mirrored, central storage, TPU, one-process multi-worker), eagerly and in
``tps.function``. The graph-mode cases run as the same programs; ``call_for_each_replica``
is ``strategy.run``. TensorFlow's replica functions count their calls in a Python list to
give each replica its own value (``[1 + r, 2 - r]``); a traced replica function runs its
Python once per trace, not per replica, so the port takes ``r`` from
``replica_id_in_sync_group`` (the same values, and TensorFlow's asserted formula).
"""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

STRATEGIES = {
    "default": lambda: tps.get_strategy(),
    "one_device": lambda: tps.OneDeviceStrategy(jax.devices()[0]),
    "mirrored_2": lambda: tps.MirroredStrategy(devices=jax.devices()[:2]),
    "central_storage_2": lambda: tps.experimental.CentralStorageStrategy(compute_devices=jax.devices()[:2]),
    "tpu": lambda: tps.TPUStrategy(),
    "multi_worker_1x2": lambda: tps.MultiWorkerMirroredStrategy(),
}
NAMES = sorted(STRATEGIES)


def _in_replica() -> bool:
    return not tps.in_cross_replica_context()


def _assign_moving_average(var, value, decay, zero_debias=True):
    """TensorFlow's ``assign_moving_average``: ``var -= (var - mean(value)) * (1 - decay)``."""

    state = _debias_state(var) if zero_debias else None

    def update(v, value):
        value = jnp.asarray(value.read_value() if isinstance(value, tps.Variable) else value, v.dtype)
        if state is not None:
            biased, step = state
            biased.assign_sub((biased.read_value() - value) * (1.0 - decay))
            step.assign_add(1.0)
            return v.assign(biased.read_value() / (1.0 - decay ** step.read_value()))
        return v.assign_sub((v.read_value() - value) * (1.0 - decay))

    if _in_replica():
        def merge_fn(strategy, v, value):
            mean = strategy.extended.reduce_to(tps.ReduceOp.MEAN, value, v)
            return strategy.extended.update(v, update, args=(mean,))
        return tps.get_replica_context().merge_call(merge_fn, args=(var, value))
    return update(var, value)


_DEBIAS: dict = {}


def _debias_state(v):
    if v.ref() not in _DEBIAS:
        with v.strategy.scope() if v.strategy is not None else _null():
            _DEBIAS[v.ref()] = (tps.Variable(jnp.zeros(v.shape, v.dtype), trainable=False),
                                tps.Variable(0.0, trainable=False))
    return _DEBIAS[v.ref()]


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


class _EMA:
    """TensorFlow's ``ExponentialMovingAverage(decay)``: shadows made by ``apply``, no debiasing."""

    def __init__(self, decay):
        self.decay = decay
        self.shadows: dict = {}

    def apply(self, variables):
        for v in variables:
            if v.ref() not in self.shadows:
                self.shadows[v.ref()] = copy.deepcopy(v)   # the first apply, before any replica function
            _assign_moving_average(self.shadows[v.ref()], v, self.decay, zero_debias=False)

    def average(self, v):
        return self.shadows[v.ref()]


@pytest.fixture(autouse=True)
def _fresh_debias_state():
    _DEBIAS.clear()
    yield
    _DEBIAS.clear()


def _local(strategy, x):
    return np.asarray(strategy.experimental_local_results(x)[0])


@pytest.mark.parametrize("name", NAMES)
def test_replica_mode_without_zero_debias(name):
    strategy = STRATEGIES[name]()
    made = []

    def replica_fn():
        if not made:
            made.append(tps.Variable([10.0, 11.0]))
        var = made[0]
        rid = jnp.asarray(tps.get_replica_context().replica_id_in_sync_group, jnp.float32)
        _assign_moving_average(var, jnp.stack([1.0 + rid, 2.0 - rid]), 0.25, zero_debias=False)
        return var.read_value()

    with strategy.scope():
        strategy.run(replica_fn)
    n = strategy.num_replicas_in_sync
    average_val = [1.0 + 0.5 * (n - 1), 2.0 - 0.5 * (n - 1)]   # the mean of val over the replicas
    np.testing.assert_allclose(made[0].numpy(), [10.0 * 0.25 + average_val[0] * 0.75,
                                                11.0 * 0.25 + average_val[1] * 0.75], rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_replica_mode_with_zero_debias_gives_the_average_after_one_step(name):
    strategy = STRATEGIES[name]()
    with strategy.scope():
        var = tps.Variable([0.0, 0.0])
        _debias_state(var)               # TensorFlow makes these in merge_call; here before the trace

    def replica_fn():
        rid = jnp.asarray(tps.get_replica_context().replica_id_in_sync_group, jnp.float32)
        _assign_moving_average(var, jnp.stack([1.0 + rid, 2.0 - rid]), 0.25)

    strategy.run(replica_fn)
    n = strategy.num_replicas_in_sync
    average_val = [1.0 + 0.5 * (n - 1), 2.0 - 0.5 * (n - 1)]   # the mean over the replicas
    np.testing.assert_allclose(var.numpy(), average_val, rtol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_cross_device_without_zero_debias(name):
    strategy = STRATEGIES[name]()
    with strategy.scope():
        var = tps.Variable([10.0, 11.0])
        val = jnp.asarray([1.0, 2.0])
        _assign_moving_average(var, val, 0.25, zero_debias=False)
        np.testing.assert_allclose(var.numpy(), [10.0 * 0.25 + 1.0 * 0.75, 11.0 * 0.25 + 2.0 * 0.75])
        _assign_moving_average(var, val, 0.25, zero_debias=False)      # TensorFlow's `assign.op` again
        orig = 0.25 * 0.25
        np.testing.assert_allclose(var.numpy(), [10.0 * orig + 1.0 * (1 - orig), 11.0 * orig + 2.0 * (1 - orig)])


@pytest.mark.parametrize("name", NAMES)
def test_cross_device_with_a_variable_value(name):
    strategy = STRATEGIES[name]()
    with strategy.scope():
        var = tps.Variable([0.0, 0.0])
        val = tps.Variable([1.0, 2.0])
        _assign_moving_average(var, val, 0.25)
    np.testing.assert_allclose(var.numpy(), [1.0, 2.0], rtol=1e-6)


@pytest.mark.parametrize("use_function", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_update_context(name, use_function):
    strategy = STRATEGIES[name]()
    with strategy.scope():
        var1, var2, var3 = (tps.Variable([0.0, 0.0]) for _ in range(3))
        _debias_state(var2)

    def update_fn(v, value):
        v.assign_add(value)
        _assign_moving_average(var2, [2.0, 4.0], decay=0.25)
        _assign_moving_average(var3, [2.0, 4.0], decay=0.25, zero_debias=False)

    def go():
        strategy.extended.update(var1, update_fn, (jnp.asarray([1.0, 1.0]),))

    with strategy.scope():
        tps.function(go)() if use_function else go()
    np.testing.assert_allclose(var2.numpy(), [2.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(var3.numpy(), [1.5, 3.0])
    np.testing.assert_allclose(var1.numpy(), [1.0, 1.0])


@pytest.mark.parametrize("name", NAMES)
def test_assign_variable_in_a_replica_function(name):
    strategy = STRATEGIES[name]()
    made = []

    def replica_fn():
        if not made:
            made.append((tps.Variable([10.0, 11.0]), tps.Variable([1.0, 2.0])))
        var, val = made[0]
        _assign_moving_average(var, val, 0.25, zero_debias=False)

    with strategy.scope():
        strategy.run(replica_fn)
    np.testing.assert_allclose(made[0][0].numpy(), [10 * 0.25 + 1.0 * 0.75, 11 * 0.25 + 2.0 * 0.75])


@pytest.mark.parametrize("use_function", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_ema_in_replica_context(name, use_function):
    strategy = STRATEGIES[name]()
    with strategy.scope():
        w = tps.Variable([1.0], name="w", aggregation=tps.VariableAggregation.MEAN)
        ema = _EMA(0.8)
        ema.apply([w])                   # makes the shadow (cross-replica), then w = 1 -> shadow 1

        def replica_fn():
            w.assign_sub([0.5])
            ema.apply([w])
            return ema.average(w).read_value()

        def fn():
            return strategy.run(replica_fn)

        ema_w = tps.function(fn)() if use_function else fn()
    np.testing.assert_allclose(_local(strategy, ema_w), [0.89999998], rtol=1e-6)


@pytest.mark.parametrize("use_function", [False, True])
@pytest.mark.parametrize("name", NAMES)
def test_ema_in_cross_replica_context(name, use_function):
    strategy = STRATEGIES[name]()
    with strategy.scope():
        w = tps.Variable([1.0], name="w", aggregation=tps.VariableAggregation.MEAN)
        ema = _EMA(0.8)
        ema.apply([w])

        def fn():
            w.assign_sub([0.5])
            ema.apply([w])
            return ema.average(w).read_value()

        avg = tps.function(fn)() if use_function else fn()
    np.testing.assert_allclose(np.asarray(avg), [0.89999998], rtol=1e-6)
    shadow = ema.average(w)
    assert shadow.strategy is w.strategy and shadow.aggregation == w.aggregation
