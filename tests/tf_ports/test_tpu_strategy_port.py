"""TensorFlow's ``tensorflow/python/distribute/tpu_strategy_test.py``: the cases about how
``TPUStrategy.run`` takes its arguments, where its results live, strategies over a subset of
the cores, and a value-dependent shape inside a step.

TensorFlow's coordinates ``[0, 0, 0, 1]`` name a chip's second core; the topology of the
CPU devices these tests run on has one core per device along x, so the second device is
``[1, 0, 0, 0]`` (``topology.device_coordinates``).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

pytestmark = pytest.mark.devices(2)


def _strategy():
    return tps.TPUStrategy()


# test_tpu_run_arg_parsing -------------------------------------------------------------------
def only_star_args(*args):
    del args


def pos_and_star_args(first_arg, *args):
    del first_arg, args


def named_args(first_arg, second_arg):
    del first_arg, second_arg


def star_args_and_kw_only(*args, kw):
    del args, kw


@pytest.mark.parametrize("in_function", [False, True])
def test_tpu_run_arg_parsing(in_function):
    strategy = _strategy()
    with strategy.scope():
        tpu_vars = [tps.Variable(1)]
    wrap = tps.function if in_function else (lambda f: f)

    wrap(lambda: strategy.run(only_star_args, args=(2,)))()
    wrap(lambda: strategy.run(named_args, kwargs={"first_arg": 2, "second_arg": 3}))()
    with pytest.raises(TypeError, match=r"got multiple values for argument"):
        wrap(lambda: strategy.run(named_args, args=(1,), kwargs={"first_arg": 2, "second_arg": 3}))()
    with pytest.raises(ValueError, match=r"cannot handle Variables passed to \*args"):
        wrap(lambda: strategy.run(only_star_args, args=(2, tpu_vars)))()
    wrap(lambda: strategy.run(pos_and_star_args, args=(2, 3, 4)))()
    wrap(lambda: strategy.run(star_args_and_kw_only, args=(2, 3), kwargs={"kw": tpu_vars}))()
    with pytest.raises(ValueError, match=r"mix of positional args and \*args"):
        wrap(lambda: strategy.run(pos_and_star_args, args=(tpu_vars, 3, 4)))()
    with pytest.raises(ValueError, match=r"^Too many positional arguments passed to call to TPUStrategy\.run\(\)\.\n") as info:
        wrap(lambda: strategy.run(named_args, args=(2, 3, 4)))()
    assert "Fix:" in str(info.value)

    class DummyClass:
        def method(self, arg_1):
            del arg_1

        def step(self):
            strategy.run(self.method, args=(tpu_vars,))

    DummyClass().step()


def test_other_strategies_keep_pythons_errors():
    # The refusals are TPUStrategy.run's (TensorFlow's MirroredStrategy binds arguments as Python does).
    strategy = tps.MirroredStrategy(jax.devices()[:2])
    with pytest.raises(TypeError, match=r"takes 2 positional arguments but 3 were given"):
        strategy.run(named_args, args=(2, 3, 4))


def test_tpu_variable_run_argument():
    # A distributed variable passed to run stays a variable inside the replica function.
    strategy = _strategy()
    with strategy.scope():
        tpu_variable = tps.Variable(1)
    seen = []

    def replica_step(first_arg, variable):
        del first_arg
        seen.append(isinstance(variable, tps.Variable))

    tps.function(lambda: strategy.run(replica_step, args=(2, tpu_variable)))()
    assert seen and all(seen)


# test_sequential_runs / test_run_output_on_device ---------------------------------------------
def test_sequential_runs():
    topology = tps.tpu.experimental.initialize_tpu_system()
    strategy = tps.TPUStrategy(experimental_device_assignment=tps.tpu.experimental.DeviceAssignment.build(
        topology, num_replicas=2))
    strategy2 = tps.TPUStrategy(experimental_device_assignment=tps.tpu.experimental.DeviceAssignment.build(
        topology, num_replicas=1))

    def computation(x):
        return jnp.square(jnp.asarray(x))

    @tps.function
    def train_step():
        outputs = strategy.experimental_local_results(strategy.run(computation, args=([2.0, 2.0],)))
        return strategy2.run(computation, args=([outputs[0]],))

    np.testing.assert_array_equal(np.asarray(train_step()), [[16.0, 16.0]])


def test_run_output_on_device():
    strategy = _strategy()
    results = strategy.experimental_local_results(strategy.run(jnp.square, args=(2.0,)))
    assert [float(r) for r in results] == [4.0] * strategy.num_replicas_in_sync
    for i, r in enumerate(results):
        assert r.devices() == {strategy.extended.worker_devices[i]}


def test_run_output_of_local_results_made_inside_a_function_is_on_every_device():
    # Where we differ: one program, one placement per output; the values are TensorFlow's.
    strategy = _strategy()

    @tps.function
    def train_step():
        return strategy.experimental_local_results(strategy.run(jnp.square, args=(2.0,)))

    results = train_step()
    assert [float(r) for r in results] == [4.0] * strategy.num_replicas_in_sync
    for i, r in enumerate(results):
        assert strategy.extended.worker_devices[i] in r.devices()


# test_computation_on_subset_cores / test_worker_devices_on_subset_cores -----------------------
def _subset_strategies():
    topology = tps.tpu.experimental.initialize_tpu_system()
    first = tps.TPUStrategy(experimental_device_assignment=tps.tpu.experimental.DeviceAssignment.build(
        topology, num_replicas=1))
    second_coordinates = [int(c) for c in np.asarray(topology.device_coordinates)[0, 1]]
    second = tps.TPUStrategy(experimental_device_assignment=tps.tpu.experimental.DeviceAssignment(
        topology, [[second_coordinates]]))
    return first, second


def test_worker_devices_on_subset_cores():
    first, second = _subset_strategies()
    assert first.extended.worker_devices == (jax.devices()[0],)
    assert second.extended.worker_devices == (jax.devices()[1],)


def test_computation_on_subset_cores_runs_each_strategy_on_its_core():
    all_core = _strategy()
    with all_core.scope():
        v = tps.Variable(0.0, aggregation=tps.VariableAggregation.MEAN)
    first, second = _subset_strategies()

    def step_fn():
        return v + 1.0

    all_core.run(step_fn)
    r1, r2 = first.run(step_fn), second.run(step_fn)
    assert (float(r1), float(r2)) == (1.0, 1.0)
    assert r1.devices() == {jax.devices()[0]} and r2.devices() == {jax.devices()[1]}
    # TensorFlow's `r1 + r2` copies one value to the other's core; a JAX array stays on its
    # device: combine them after moving one (README, "Where we differ").
    assert float(r1 + jax.device_put(r2, next(iter(r1.devices())))) == 2.0


def test_combining_results_of_strategies_on_different_cores_in_a_function_names_the_fix():
    all_core = _strategy()
    with all_core.scope():
        v = tps.Variable(0.0, aggregation=tps.VariableAggregation.MEAN)
    first, second = _subset_strategies()

    @tps.function
    def train_step():
        def step_fn():
            return v + 1.0
        all_core.run(step_fn)
        return first.run(step_fn) + second.run(step_fn)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # strategies over different devices: the body runs as Python
        with pytest.raises(ValueError, match=r"(?s)incompatible devices.*Fix: move one value first"):
            train_step()


# test_cluster_conditional_with_dynamic_shape ------------------------------------------------
def test_cluster_conditional_with_dynamic_shape_names_the_static_shape_fix():
    strategy = _strategy()

    def step_fn(condition):
        where = jnp.argwhere(jnp.asarray(condition))
        if where.shape[0] > 0:
            where = jnp.reshape(where, where.shape)
        return where

    with pytest.raises(ValueError, match=r"(?s)gives a result whose shape depends on the values.*Fix: give the size"):
        tps.function(lambda: strategy.run(step_fn, args=([True, False, True],)))()
    # The fix the error names gives TensorFlow's rows, padded to the static size.
    out = strategy.experimental_local_results(tps.function(lambda: strategy.run(
        lambda c: jnp.argwhere(jnp.asarray(c), size=3, fill_value=-1), args=([True, False, True],)))())
    assert np.asarray(out[0]).tolist() == [[0], [2], [-1]]


# DeviceAssignmentTest.test_variables_mismatched_device_assignment -----------------------------
def test_variables_mismatched_device_assignment():
    topology = tps.tpu.experimental.initialize_tpu_system()
    coordinates = np.asarray(topology.device_coordinates)[0]
    strategy0 = tps.TPUStrategy(experimental_device_assignment=tps.tpu.experimental.DeviceAssignment(
        topology, [[coordinates[0].tolist()], [coordinates[1].tolist()]]))
    assert strategy0.extended.worker_devices == tuple(jax.devices()[:2])
    with strategy0.scope():
        v = tps.Variable(1.0)
    # TensorFlow writes 42 into the second copy alone (the copies then differ); writing one copy
    # of a mirrored variable is refused here, naming the fix (README, "Where we differ").
    with pytest.raises(ValueError, match=r"(?s)writing one copy would make the replicas' copies diverge.*Fix"):
        strategy0.experimental_local_results(v)[1].assign(42.0)
    v.assign(42.0)
    # The second strategy has the devices reversed; each replica reads the variable on its device.
    strategy1 = tps.TPUStrategy(experimental_device_assignment=tps.tpu.experimental.DeviceAssignment(
        topology, [[coordinates[1].tolist()], [coordinates[0].tolist()]]))
    assert strategy1.extended.worker_devices == (jax.devices()[1], jax.devices()[0])
    v_read = strategy1.run(v.read_value)
    results = strategy1.experimental_local_results(v_read)
    assert [float(r) for r in results] == [42.0, 42.0]
    assert [r.devices() for r in results] == [{jax.devices()[1]}, {jax.devices()[0]}]
