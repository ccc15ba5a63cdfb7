"""TensorFlow's ``tensorflow/python/kernel_tests/variables/resource_variable_ops_test.py``, ported.

The eager cases that concern a variable's own behaviour (reads, assigns, sparse reads and
scatters, copies, operators, the tape through a sparse read), with TensorFlow's inputs and
expected values (checked against TensorFlow 2.21 by ``tools/tf_resource_variable_reference.py``). Graph-mode cases (``initializer``, ``to_proto``, shared names,
resource handles, ``UnreadVariable``, saveable objects) have no meaning on JAX; string
variables cannot exist (JAX arrays hold numbers: README, "Where we differ").
"""

from __future__ import annotations

import copy

import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def test_create_read():                       # testCreateRead
    v = tps.Variable(1)
    assert int(v.numpy()) == 1 and v.dtype == jnp.int32


def test_assign_add_and_sub_methods():        # testAssignAddMethod / testAssignSubMethod
    v = tps.Variable(1.0)
    v.assign_add(1.0)
    assert float(v.numpy()) == 2.0
    w = tps.Variable(3.0)
    w.assign_sub(1.0)
    assert float(w.numpy()) == 2.0
    assert w.assign(5.0, read_value=False) is None and float(w.numpy()) == 5.0


def test_assign_of_a_different_shape_is_not_allowed():   # testAssignDifferentShapesEagerNotAllowed
    v = tps.Variable([1.0, 2.0])
    with pytest.raises(ValueError, match="shape"):
        v.assign([1.0, 2.0, 3.0])


def test_assign_of_a_float_to_an_int_variable_raises():  # testAssignIncompatibleDtype (eager)
    v = tps.Variable(1)
    with pytest.raises(TypeError, match="cannot convert a float32 value"):
        v.assign(1.5)


@pytest.mark.parametrize("op,start,update,expected", [
    ("scatter_add", [[1.0]], [[1.0]], [[2.0]]),          # testScatterAdd
    ("scatter_sub", [[1.0]], [[3.0]], [[-2.0]]),         # testScatterSub
    ("scatter_mul", [[1.0]], [[5.0]], [[5.0]]),          # testScatterMul
    ("scatter_div", [[6.0]], [[3.0]], [[2.0]]),          # testScatterDiv
    ("scatter_min", [[6.0]], [[3.0]], [[3.0]]),          # testScatterMin
    ("scatter_max", [[6.0]], [[3.0]], [[6.0]]),          # testScatterMax
    ("scatter_update", [[1.0]], [[3.0]], [[3.0]]),       # testScatterUpdate
])
def test_scatter_methods(op, start, update, expected):
    v = tps.Variable(start)
    getattr(v, op)(tps.IndexedSlices(jnp.asarray(update), jnp.asarray([0])))
    assert v.numpy().tolist() == expected


@pytest.mark.parametrize("op,start,expected", [
    ("scatter_add", 1.0, 2.0), ("scatter_sub", 1.0, 0.0), ("scatter_mul", 1.0, 2.0),
    ("scatter_div", 2.0, 1.0), ("scatter_min", 1.0, 1.0), ("scatter_max", 1.0, 2.0),
    ("scatter_update", 1.0, 2.0),
])
def test_scatter_methods_with_a_scalar_update(op, start, expected):   # testScatter*Scalar
    v = tps.Variable([[start]])
    update = 1.0 if op in ("scatter_add", "scatter_sub") else 2.0
    getattr(v, op)(tps.IndexedSlices(jnp.asarray(update), jnp.asarray([0])))
    assert v.numpy().tolist() == [[expected]]


@pytest.mark.parametrize("op,updates,expected", [
    ("scatter_nd_add", [9.0, 10.0, 11.0, 12.0], [1, 13, 3, 14, 14, 6, 7, 20]),   # testScatterNdAddStateOps
    ("scatter_nd_sub", [9.0, 10.0, 11.0, 12.0], [1, -9, 3, -6, -4, 6, 7, -4]),   # testScatterNdSubStateOps
    ("scatter_nd_update", [9.0, 10.0, 11.0, 12.0], [1, 11, 3, 10, 9, 6, 7, 12]),  # testScatterNdUpdateStateOps
    ("scatter_nd_max", [9.0, 1.0, 11.0, 1.0], [1, 11, 3, 4, 9, 6, 7, 8]),          # testScatterNdMaxStateOps
    ("scatter_nd_min", [9.0, 1.0, 11.0, 1.0], [1, 2, 3, 1, 5, 6, 7, 1]),           # testScatterNdMinStateOps
])
def test_scatter_nd_state_ops(op, updates, expected):
    v = tps.Variable([1.0, 2, 3, 4, 5, 6, 7, 8])
    getattr(v, op)(jnp.asarray([[4], [3], [1], [7]]), jnp.asarray(updates))
    assert v.numpy().tolist() == [float(e) for e in expected]


def test_scatter_update_of_a_row():
    v = tps.Variable(np.zeros((2, 3), np.float32))
    v.scatter_update(tps.IndexedSlices([[1.0, 2.0, 3.0]], [1]))
    assert v.numpy().tolist() == [[0.0, 0.0, 0.0], [1.0, 2.0, 3.0]]


def test_scatter_bool():                      # testScatterBool
    v = tps.Variable([True, False])
    v.scatter_update(tps.IndexedSlices([True], [1]))
    assert v.numpy().tolist() == [True, True]


def test_scatter_out_of_range_raises_invalid_argument():   # testScatterOutOfRange (eager)
    v = tps.Variable([1.0, 2.0])
    with pytest.raises(tps.errors.InvalidArgumentError, match=r"indices\[0\] = 5 is not in \[0, 2\)"):
        v.scatter_add(tps.IndexedSlices([1.0], [5]))


def test_sparse_read():                       # testSparseRead
    init = np.reshape(np.arange(200.0, dtype=np.float32), [10, 20])
    v = tps.Variable(init)
    np.testing.assert_array_equal(v.sparse_read([0, 3, 1, 2]), init[[0, 3, 1, 2]])


def test_gather_nd():                         # testGatherNd
    v = tps.Variable([[1, 2], [3, 4]])
    assert v.gather_nd([[0, 1], [1, 0]]).tolist() == [2, 3]
    assert v.gather_nd([[1]]).tolist() == [[3, 4]]


def test_gradient_of_gather_nd_and_sparse_read():   # testGradientGatherNd / testGradientGatherNdIndexedSlices
    v = tps.Variable([[1.0, 2.0], [3.0, 4.0]])
    with tps.GradientTape() as tape:
        loss = jnp.sum(v.gather_nd([[1, 1]]))
    assert np.asarray(tape.gradient(loss, v)).tolist() == [[0.0, 0.0], [0.0, 1.0]]
    with tps.GradientTape() as tape:
        loss = jnp.sum(v.sparse_read([1]))
    assert np.asarray(tape.gradient(loss, v)).tolist() == [[0.0, 0.0], [1.0, 1.0]]


def test_deepcopy_is_independent():           # testDeepCopy (eager)
    v = tps.Variable(1.0)
    c = copy.deepcopy(v)
    v.assign(2.0)
    assert float(c.numpy()) == 1.0 and float(v.numpy()) == 2.0


def test_operators():                         # testEagerArithmetic / operator overloads
    v = tps.Variable(2.0)
    assert float(v ** 3) == 8.0 and float(3 ** v) == 9.0 and float(-v) == -2.0
    assert float(abs(tps.Variable(-2.0))) == 2.0
    assert len(list(tps.Variable([1, 2, 3]))) == 3


def test_shape_dtype_and_name():              # testShape / testDtype / testName (eager)
    v = tps.Variable(np.zeros((2, 3), np.float32), name="var0")
    assert v.shape == (2, 3) == v.get_shape() and v.dtype == jnp.float32 and v.name == "var0:0"


def test_variable_as_a_dict_key_via_ref():    # testRef / testDeref
    v = tps.Variable(1.0)
    table = {v.ref(): "a"}
    assert table[v.ref()] == "a" and v.ref().deref() is v


def test_initial_value_is_the_creation_value():   # testInitialValue (eager: available here)
    v = tps.Variable(lambda: jnp.ones((2,)) * 3.0)
    v.assign([0.0, 0.0])
    assert v.initial_value.tolist() == [3.0, 3.0]
