"""TensorFlow's ``tensorflow/python/distribute/tf_function_test.py``, ported.

``ops.device("cpu:0")`` scopes do not exist on JAX (XLA places a program's work by its
inputs' shardings), so the two default-device cases check what the device test stands
for: inside ``tps.function`` a value is traced and has no device (TensorFlow: ``""``), and
with ``tps.config.run_functions_eagerly(True)`` it is concrete, on the default device
(TensorFlow: ``cpu:0``); nested functions alike. ``testReadVariableInsideFunction`` writes
each copy of a mirrored variable to a different value (which we refuse: README, "Where we
differ") and reads it under each device's scope; the port writes each replica's component
of a sync-on-read variable (ONLY_FIRST_REPLICA) and reads them in each replica, inside a
``tps.function``. ``testRetraceOnSaving`` needs SavedModel's save context (README, "Where
we differ").
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

STRATEGIES = {
    "default": lambda: tps.get_strategy(),
    "one_device": lambda: tps.OneDeviceStrategy(jax.devices()[0]),
    "mirrored_2": lambda: tps.MirroredStrategy(devices=jax.devices()[:2]),
    "tpu": lambda: tps.TPUStrategy(),
    "multi_worker_1x2": lambda: tps.MultiWorkerMirroredStrategy(),
}
NAMES = sorted(STRATEGIES)


@pytest.fixture(autouse=True)
def _functions_compiled_again_after():
    yield
    tps.config.run_functions_eagerly(False)


def _device_of(x):
    return getattr(x, "device", "")  # a traced value has none (TensorFlow: "")


@pytest.mark.parametrize("eagerly", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_default_device_inside_function_with_scope(name, eagerly):
    tps.config.run_functions_eagerly(eagerly)
    strategy = STRATEGIES[name]()
    seen = []
    with strategy.scope():
        @tps.function
        def add():
            one = jnp.ones([])
            seen.append(_device_of(one))
            return one + 1

        assert float(add()) == 2.0
    assert seen == ([jax.devices()[0]] if eagerly else [""])


@pytest.mark.parametrize("eagerly", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_default_device_inside_nested_function_with_scope(name, eagerly):
    tps.config.run_functions_eagerly(eagerly)
    strategy = STRATEGIES[name]()
    seen = []
    with strategy.scope():
        @tps.function
        def foo():
            @tps.function
            def bar():
                one = jnp.ones([])
                seen.append(_device_of(one))
                return one + 1

            return bar()

        assert float(foo()) == 2.0
    assert seen == ([jax.devices()[0]] if eagerly else [""])


@pytest.mark.parametrize("eagerly", [True, False])
@pytest.mark.parametrize("name", NAMES)
def test_read_variable_inside_function(name, eagerly):
    tps.config.run_functions_eagerly(eagerly)
    strategy = STRATEGIES[name]()
    with strategy.scope():
        v = tps.Variable(0.0, synchronization=tps.VariableSynchronization.ON_READ,
                         aggregation=tps.VariableAggregation.ONLY_FIRST_REPLICA)
    components = v.values if v.strategy is not None else (v,)   # the default strategy: a plain variable
    for i, component in enumerate(components):
        component.assign(float(i))           # each replica's copy its own value

    @tps.function
    def read():
        return strategy.run(v.read_value)

    out = read()
    assert [float(x) for x in strategy.experimental_local_results(out)] == [float(i) for i in range(len(components))]


@pytest.mark.devices(2)
def test_writing_one_copy_of_a_mirrored_variable_is_refused():
    strategy = tps.MirroredStrategy(devices=jax.devices()[:2])
    with strategy.scope():
        v = tps.Variable(0.0)
    with pytest.raises(ValueError, match="would make the replicas' copies diverge"):
        v.values[1].assign(1.0)
    np.testing.assert_allclose([c.numpy() for c in v.values], [0.0, 0.0])


@pytest.mark.parametrize("name", NAMES)
def test_a_function_run_by_the_strategy_traces_once_per_input_signature(name):
    # testRetraceOnSaving's first half: calling the function again does not trace again.
    strategy = STRATEGIES[name]()
    with strategy.scope():
        v = tps.Variable(0.0)
    tracing_count = [0]

    @tps.function
    def func():
        tracing_count[0] += 1
        return v + 1.0

    strategy.run(func)
    assert float(func()) == 1.0
    after = tracing_count[0]
    func()
    assert tracing_count[0] == after
