"""Plausible wrong calls a ported TensorFlow program makes: each gets a clear error, none a wrong result.

Every case lists the call, the exception type, and fragments its message must
contain (the API or argument, what was received, and the fix).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd


def _s(n=4):
    return tps.MirroredStrategy(devices=jax.devices()[:n])


def _variable(value, strategy=None, **kwargs):
    with (strategy or _s()).scope():
        return tps.Variable(value, **kwargs)


def _in_run(update, value, initial):
    s = _s()
    v = _variable(initial, s, aggregation=tps.VariableAggregation.SUM)
    return s.run(lambda: getattr(v, update)(value))


def _jit_around_run():
    s = _s()
    v = _variable(0.0, s, aggregation=tps.VariableAggregation.SUM)
    return jax.jit(lambda x: s.run(lambda y: v.assign_add(y), (x,)))(jnp.float32(1))


def _ragged():
    return tps.PerReplica([np.ones(i + 1, np.float32) for i in range(4)])


def _range_of_array():
    # A computed count (a scalar array *argument* becomes static with a warning instead).
    @tps.function
    def count(x):
        total = 0
        for _ in range(jnp.sum(x)):
            total += 1
        return total

    return count(jnp.ones(3, jnp.int32))


CASES = {
    "assign of the wrong shape names the variable and both shapes": (
        lambda: _variable(jnp.zeros(3)).assign(jnp.ones(4)), ValueError, ["Variable.assign", "(3,)", "(4,)", "Fix"]),
    "assign_add of the wrong shape in a replica function": (
        lambda: _in_run("assign_add", jnp.ones(2), jnp.zeros(3)), ValueError, ["assign_add", "(3,)", "(2,)"]),
    "a float assigned to an int32 variable is refused": (
        lambda: _variable(jnp.int32(1)).assign(1.5), TypeError, ["float32", "int32", "Fix"]),
    "a float added to an int32 variable is refused": (
        lambda: _variable(jnp.int32(1)).assign_add(0.5), TypeError, ["assign_add", "int32"]),
    "all_reduce of values of different shapes names the shapes": (
        lambda: _s().run(lambda v: tps.get_replica_context().all_reduce("SUM", v), (_ragged(),)),
        ValueError, ["all_reduce", "replica 0: [1]", "replica 3: [4]", "Fix"]),
    "reduce(axis=None) of ragged values names the shapes and axis=0": (
        lambda: _s().reduce("SUM", _ragged(), axis=None), ValueError, ["axis=None", "replica 1: [2]", "axis=0"]),
    "gather along an axis the values do not have": (
        lambda: _s().gather(tps.PerReplica([np.ones(2)] * 4), 3), ValueError, ["gather", "`axis`=3", "rank 1"]),
    "gather of scalars": (
        lambda: _s().gather(tps.PerReplica([np.float32(1)] * 4), 0), ValueError, ["gather", "scalars", "Fix"]),
    "np.asarray of a PerReplica names experimental_local_results and reduce": (
        lambda: np.asarray(tps.PerReplica([np.ones(2)] * 4)), TypeError,
        ["PerReplica", "experimental_local_results", "reduce"]),
    "TPUStrategy given an address string instead of a resolver": (
        lambda: tps.TPUStrategy("grpc://10.0.0.1:8470"), TypeError,
        ["tpu_cluster_resolver", "grpc://10.0.0.1:8470", "TPUClusterResolver"]),
    "TPUStrategy given a remote TPU resolver on a machine without TPUs": (
        lambda: tps.TPUStrategy(tps.cluster_resolver.TPUClusterResolver("grpc://10.0.0.1:8470")), ValueError,
        ["10.0.0.1:8470", "no TPU devices", "experimental_connect_to_cluster"]),
    "range() of a computed array inside tps.function": (
        _range_of_array, TypeError, ["tps.function", "range(n)", "fori_loop"]),
    "a map function that returns None names the function": (
        lambda: list(tpsd.Dataset.range(3).map(lambda x: None)), TypeError, ["Dataset.map", "returned None", "Fix"]),
    "compute_average_loss with a zero global batch size": (
        lambda: tps.nn.compute_average_loss(jnp.ones(2), global_batch_size=0), ValueError,
        ["global_batch_size", "positive", "Received: global_batch_size=0"]),
    "run with options that are not RunOptions": (
        lambda: _s().run(lambda: 1, options={"x": 1}), TypeError, ["strategy.run", "tps.RunOptions"]),
    "MirroredStrategy with a cross_device_ops that is not one": (
        lambda: tps.MirroredStrategy(cross_device_ops="nccl"), TypeError,
        ["cross_device_ops", "tps.NcclAllReduce()", "'nccl'"]),
    "CommunicationOptions with an unknown implementation": (
        lambda: tps.experimental.CommunicationOptions(implementation="MPI"), ValueError,
        ["implementation", "AUTO, RING or NCCL", "'MPI'"]),
    "reduce_to without destinations": (
        lambda: _s().extended.reduce_to("SUM", tps.PerReplica([np.ones(2)] * 4), None), ValueError,
        ["reduce_to", "destinations"]),
    "jax.jit around a run that writes variables names tps.function": (
        _jit_around_run, TypeError, ["jax.jit", "tps.function"]),
    "set_logical_device_configuration after JAX started with another count": (
        lambda: (jax.devices(), tps.config.set_logical_device_configuration(
            tps.config.list_physical_devices("CPU")[0], [tps.config.LogicalDeviceConfiguration()] * 3)),
        RuntimeError, ["cannot be modified after being initialized", "3 were asked for"]),
    "list_physical_devices of an unknown type": (
        lambda: tps.config.list_physical_devices("QPU"), ValueError, ["device_type", "'QPU'"]),
}


# Cases whose error is about several replicas' values (four of them): run where four devices exist.
SEVERAL_REPLICAS = {"all_reduce of values of different shapes names the shapes"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.devices(4)) if n in SEVERAL_REPLICAS else n
                                  for n in sorted(CASES)])
def test_wrong_call_gets_a_clear_error(name):
    call, error, fragments = CASES[name]
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    missing = [f for f in fragments if f not in message]
    assert not missing, f"{name}: message lacks {missing}: {message}"


@pytest.mark.devices(4)
def test_a_variable_made_outside_scope_and_updated_in_run_follows_tensorflow_and_warns():
    s = _s()
    v = tps.Variable(0.0)
    with pytest.warns(UserWarning, match="outside any strategy.scope"):
        s.run(lambda: v.assign_add(1.0))
    assert float(v.read_value()) == 4.0  # TensorFlow's MirroredStrategy: every replica's update


def test_a_new_lambda_per_run_call_warns_once_about_recompiling():
    s = _s(2)
    with pytest.warns(UserWarning, match="new function .* every call") as record:
        for i in range(8):
            s.run(lambda x: x + 1, (jnp.float32(i),))
    assert sum("every call" in str(w.message) for w in record) == 1


def test_compute_average_loss_of_an_empty_batch_is_zero():
    assert float(tps.nn.compute_average_loss(jnp.zeros((0,)))) == 0.0
