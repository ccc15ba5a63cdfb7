"""Checkpoint.restore of TensorFlow 2.21-written checkpoints: tps.Variables, objects, Keras 3 models.

The object graph's edges are followed (as TensorFlow restores), so a Keras 3
model saved by TensorFlow as ``model/_functional/_operations/1/_kernel``
restores into the same architecture built here on JAX, under any replica
count. Expected values are TensorFlow's (the fixtures' expected.json).
"""

from __future__ import annotations

import json
import os

os.environ["KERAS_BACKEND"] = "jax"

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tpustrategy as tps  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "tf")


def _expected(name: str) -> dict:
    with open(os.path.join(FIXTURES, name, "expected.json")) as f:
        return json.load(f)


class _Obj:
    pass


def _dense(n_in: int, n_out: int) -> _Obj:
    layer = _Obj()
    layer.kernel = tps.Variable(np.zeros((n_in, n_out), np.float32))
    layer.bias = tps.Variable(np.zeros(n_out, np.float32))
    return layer


def _net() -> _Obj:
    net = _Obj()
    net.l1 = _dense(3, 4)
    net.l2 = _dense(4, 2)
    net.layers = [net.l1, _dense(2, 2)]
    net.step = tps.Variable(np.int32(0))
    return net


def _value(name: str, key: str) -> np.ndarray:
    want = _expected(name)["tensors"][key + "/.ATTRIBUTES/VARIABLE_VALUE"]
    return np.asarray(want["values"]).reshape(want["shape"])


def test_a_nested_object_graph_restores_into_tps_variables():
    net = _net()
    extra = {"lr": tps.Variable(np.float32(0))}
    ckpt = tps.train.Checkpoint(net=net, extra=extra)
    status = ckpt.restore(tps.train.latest_checkpoint(os.path.join(FIXTURES, "nested")))
    status.assert_consumed()
    np.testing.assert_allclose(net.l1.kernel.numpy(), _value("nested", "net/l1/kernel"))
    np.testing.assert_allclose(net.layers[1].kernel.numpy(), _value("nested", "net/layers/1/kernel"))
    assert net.step.numpy() == 5 and net.step.dtype == np.int32  # int64 narrowed (64-bit types off)
    assert float(extra["lr"].numpy()) == 0.125
    assert ckpt.save_counter == 1


def test_assert_consumed_and_existing_objects_matched_as_tensorflow():
    net = _Obj()
    net.l1 = _dense(3, 4)
    status = tps.train.Checkpoint(net=net).restore(os.path.join(FIXTURES, "nested", "ckpt-1"))
    status.assert_existing_objects_matched().assert_nontrivial_match()  # every object found its value
    with pytest.raises(AssertionError, match="Unresolved objects in checkpoint.*net/l2/kernel"):
        status.assert_consumed()  # the checkpoint holds more
    status.expect_partial()
    np.testing.assert_allclose(net.l1.bias.numpy(), [0, 1, 2, 3])

    net.l9 = _dense(1, 1)  # an object the checkpoint does not hold
    status = tps.train.Checkpoint(net=net).restore(os.path.join(FIXTURES, "nested", "ckpt-1"))
    with pytest.raises(AssertionError, match="Some objects had no value in checkpoint.*net/l9"):
        status.assert_existing_objects_matched()


def test_arrays_and_python_values_in_containers_are_replaced():
    holder = {"lr": np.zeros((), np.float32)}
    ckpt = tps.train.Checkpoint(extra=holder)
    ckpt.restore(os.path.join(FIXTURES, "nested", "ckpt-1")).expect_partial()
    assert float(holder["lr"]) == 0.125  # a writeable NumPy array: written in place
    values = {"lr": 0.0}
    tps.train.Checkpoint(extra=values).restore(os.path.join(FIXTURES, "nested", "ckpt-1")).expect_partial()
    assert values["lr"] == 0.125 and isinstance(values["lr"], float)


def test_a_wrong_shape_or_dtype_names_the_key_and_changes_nothing():
    net = _net()
    net.l2 = _dense(4, 5)
    with pytest.raises(ValueError, match="'net/l2/kernel/.ATTRIBUTES/VARIABLE_VALUE' was saved with shape "
                                         r"\(4, 2\).*has shape \(4, 5\)"):
        tps.train.Checkpoint(net=net).restore(os.path.join(FIXTURES, "nested", "ckpt-1"))
    np.testing.assert_array_equal(net.l1.bias.numpy(), np.zeros(4))  # checked before anything changed
    net = _net()
    net.step = tps.Variable(np.float32(0))
    with pytest.raises(ValueError, match="saved with dtype int64.*has dtype float32"):
        tps.train.Checkpoint(net=net).restore(os.path.join(FIXTURES, "nested", "ckpt-1"))


@pytest.mark.parametrize("replicas", [1, pytest.param(8, marks=pytest.mark.devices(8))])
def test_mirrored_and_sync_on_read_variables_onto_any_replica_count(replicas):
    strategy = tps.MirroredStrategy([f"cpu:{i}" for i in range(replicas)]) if replicas > 1 else None
    scope = strategy.scope() if strategy else _null()
    with scope:
        w = tps.Variable(np.zeros((2, 2), np.float32))
        total = tps.Variable(np.float32(0), synchronization=tps.VariableSynchronization.ON_READ,
                             aggregation=tps.VariableAggregation.SUM)
    tps.train.Checkpoint(w=w, total=total).restore(os.path.join(FIXTURES, "mirrored", "mirrored")).assert_consumed()
    np.testing.assert_array_equal(w.numpy(), [[1, 2], [3, 4]])
    assert float(total.numpy()) == 3.0  # TensorFlow's 2 replicas each added 1.5; its sum is saved


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_every_dtype_restores_with_64_bit_types_narrowed():
    values = _expected("dtypes")["tensors"]
    holders = {}
    for name in ("f16", "bf16", "f32", "i8", "i16", "i32", "u8", "u16", "u32", "b", "c64"):
        want = values[f"{name}/.ATTRIBUTES/VARIABLE_VALUE"]
        dtype = np.float32 if name == "bf16" else None
        holders[name] = tps.Variable(np.zeros(want["shape"], dtype or _NP[want["dtype"]]))
    import ml_dtypes

    holders["bf16"] = tps.Variable(np.zeros(4, ml_dtypes.bfloat16))
    holders["f64"] = tps.Variable(np.zeros(2, np.float32))
    status = tps.train.Checkpoint(**holders).restore(os.path.join(FIXTURES, "dtypes", "dtypes"))
    status.assert_existing_objects_matched()
    assert holders["bf16"].dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(holders["u8"].numpy(), [0, 255, 17])
    np.testing.assert_array_equal(holders["c64"].numpy(), [1 + 2j, -0.5 - 4j])
    np.testing.assert_array_equal(holders["b"].numpy(), [True, False, True])
    np.testing.assert_array_equal(holders["f64"].numpy(), [np.float32(np.pi), -np.inf])  # float32 rounding


def test_an_int64_value_out_of_int32_range_is_refused_not_wrapped():
    with pytest.raises(ValueError, match=r"(?s)'i64/.ATTRIBUTES/VARIABLE_VALUE' holds int64 values outside "
                                         r"int32.*jax_enable_x64"):
        tps.train.Checkpoint(i64=tps.Variable(np.zeros(2, np.int32))).restore(
            os.path.join(FIXTURES, "dtypes", "dtypes"))


_NP = {"float16": np.float16, "float32": np.float32, "int8": np.int8, "int16": np.int16,
       "int32": np.int32, "uint8": np.uint8, "uint16": np.uint16, "uint32": np.uint32,
       "bool": np.bool_, "complex64": np.complex64}


# Keras 3 ---------------------------------------------------------------------------------------
def _keras_model():
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(2)])
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    return model, optimizer


@pytest.mark.parametrize("replicas", [0, 1, pytest.param(8, marks=pytest.mark.devices(8))])
def test_a_keras_3_model_and_its_adam_state(replicas):
    pytest.importorskip("keras")
    expected = _expected("keras3")
    if replicas:
        with tps.MirroredStrategy([f"cpu:{i}" for i in range(replicas)]).scope():
            model, optimizer = _keras_model()
    else:
        model, optimizer = _keras_model()
    status = tps.train.Checkpoint(model=model, optimizer=optimizer).restore(
        os.path.join(FIXTURES, "keras3", "ckpt-1"))
    status.assert_consumed()
    for got, want in zip(model.weights, expected["weights"]):
        np.testing.assert_array_equal(np.asarray(got), want)
    for got, (path, want) in zip(optimizer.variables, expected["optimizer_variables"]):
        tail = lambda p: p.replace("/", "_").rsplit("_", 1)[-1]  # noqa: E731 (auto-generated names differ)
        assert tail(got.path) == tail(path)
        np.testing.assert_array_equal(np.asarray(got), want)
    assert int(np.asarray(optimizer.iterations)) == expected["iterations"] == 4
    x = np.asarray(expected["x"], np.float32)
    np.testing.assert_allclose(model.predict(x, verbose=0), expected["predictions"], rtol=1e-6, atol=1e-6)


def test_a_keras_model_alone_is_a_partial_restore():
    pytest.importorskip("keras")
    model, _ = _keras_model()
    status = tps.train.Checkpoint(model=model).restore(os.path.join(FIXTURES, "keras3", "ckpt-1"))
    status.assert_existing_objects_matched()
    with pytest.raises(AssertionError, match="optimizer/_variables"):
        status.assert_consumed()
    np.testing.assert_array_equal(np.asarray(model.weights[0]), _expected("keras3")["weights"][0])


def test_a_different_keras_architecture_is_refused():
    pytest.importorskip("keras")
    import keras

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(5), keras.layers.Dense(2)])
    with pytest.raises(ValueError, match=r"was saved with shape \(3, 4\).*has shape \(3, 5\)"):
        tps.train.Checkpoint(model=model).restore(os.path.join(FIXTURES, "keras3", "ckpt-1"))


def test_a_keras_adam_state_restores_into_tps_optimizers_adam():
    pytest.importorskip("optax")
    expected = _expected("keras3")
    shapes = [np.asarray(w).shape for w in expected["weights"]]
    variables = [tps.Variable(np.zeros(s, np.float32)) for s in shapes]
    optimizer = tps.optimizers.Adam(0.01)
    optimizer.build(variables)
    status = tps.train.Checkpoint(optimizer=optimizer).restore(os.path.join(FIXTURES, "keras3", "ckpt-1"))
    status.assert_existing_objects_matched()
    for var, want in zip(variables, expected["weights"]):  # Keras's _trainable_variables/i
        np.testing.assert_array_equal(var.numpy(), want)
    saved = {path.rsplit("/", 1)[-1]: np.asarray(v) for path, v in expected["optimizer_variables"]}
    names = ["sequential_dense_kernel", "sequential_dense_bias", "sequential_dense_1_kernel",
             "sequential_dense_1_bias"]
    slots = [(str(v.name), v) for v in optimizer.variables[1:]]
    mus = [v for n, v in slots if "/mu/" in n]
    nus = [v for n, v in slots if "/nu/" in n]
    assert len(mus) == len(nus) == 4
    for name, mu, nu in zip(names, mus, nus):
        np.testing.assert_array_equal(mu.numpy(), saved[name + "_momentum"])
        np.testing.assert_array_equal(nu.numpy(), saved[name + "_velocity"])
    assert int(optimizer.iterations.numpy()) == expected["iterations"]
    count = [v for n, v in slots if n.split(":")[0].endswith("/count")]
    assert [int(c.numpy()) for c in count] == [expected["iterations"]]
