"""TensorFlow's ``tensorflow/python/eager/backprop_test.py`` (tape cases), ported.

The ``tf.GradientTape`` cases with meaning on JAX — persistent and nested tapes, watching,
``stop_recording``, ``reset``, ``watched_variables``, unconnected gradients, output
gradients, variables, ``jacobian`` / ``batch_jacobian`` (``JacobianTest``,
``BatchJacobianTest``) — with TensorFlow's inputs and expected values, eagerly and inside
``tps.function``. Cases about TensorFlow's internals (``imperative_grad``,
``implicit_grad``, op-level gradient registration, ``IndexedSlices`` aggregation of
gathers, graph mode, tensors on GPU, memory-leak and op-count checks) have no meaning here.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

WAYS = ["eager", "function"]


def _call(way, fn, *args):
    return fn(*args) if way == "eager" else tps.function(fn)(*args)


@pytest.mark.parametrize("way", WAYS)
def test_persistent_tape(way):                               # testPersistentTape
    def fn(x):
        with tps.GradientTape(persistent=True) as g:
            g.watch(x)
            y = x * x
            z = y * y
        return g.gradient(z, x), g.gradient(y, x)

    dz, dy = _call(way, fn, jnp.asarray(3.0))
    assert float(dz) == 108.0 and float(dy) == 6.0


@pytest.mark.parametrize("way", WAYS)
def test_tape_stop_recording(way):                          # testTapeStopRecording
    def fn(x):
        with tps.GradientTape() as t:
            t.watch(x)
            with t.stop_recording():
                y = x * x
        return t.gradient(y, x)

    assert _call(way, fn, jnp.asarray(3.0)) is None


@pytest.mark.parametrize("way", WAYS)
def test_tape_reset(way):                                   # testTapeReset
    def fn(x):
        with tps.GradientTape() as t:
            t.watch(x)
            y = x * x
            t.reset()
            t.watch(x)
            z = x * x * x
        return t.gradient(z, x), y

    g, _ = _call(way, fn, jnp.asarray(3.0))
    assert float(g) == 27.0


def test_tape_reset_then_gradient_of_earlier_target_is_none():
    x = jnp.asarray(3.0)
    with tps.GradientTape(persistent=True) as t:
        t.watch(x)
        y = x * x
        t.reset()
    assert t.gradient(y, x) is None


@pytest.mark.parametrize("way", WAYS)
def test_nested_tapes_second_derivative(way):               # testSecondDerivative / testNestedGradients
    def fn(x):
        with tps.GradientTape() as t1:
            t1.watch(x)
            with tps.GradientTape() as t2:
                t2.watch(x)
                y = jnp.sin(x)
            dy = t2.gradient(y, x)
        return dy, t1.gradient(dy, x)

    dy, d2y = _call(way, fn, jnp.asarray(1.0))
    np.testing.assert_allclose([float(dy), float(d2y)], [np.cos(1.0), -np.sin(1.0)], rtol=1e-6)


@pytest.mark.parametrize("way", WAYS)
def test_third_order_gradient_with_persistent_tapes(way):   # testHigherOrderGradient
    def fn(x):
        with tps.GradientTape(persistent=True) as t:
            t.watch(x)
            y = x ** 3
            d1 = t.gradient(y, x)
            d2 = t.gradient(d1, x)
        return d1, d2, t.gradient(d2, x)

    d1, d2, d3 = _call(way, fn, jnp.asarray(2.0))
    assert (float(d1), float(d2), float(d3)) == (12.0, 12.0, 6.0)


@pytest.mark.parametrize("way", WAYS)
def test_tape_no_op_gradient(way):                          # testTapeNoOpGradient
    def fn(x):
        with tps.GradientTape() as t:
            t.watch(x)
            y = x
        return t.gradient(y, x)

    assert float(_call(way, fn, jnp.asarray(3.0))) == 1.0


@pytest.mark.parametrize("way", WAYS)
def test_unwatched_and_unconnected_gradients(way):          # testGradientNone / testUnconnectedGradientsZero
    def fn(x, z):
        with tps.GradientTape(persistent=True) as t:
            y = x * 2.0                 # x not watched
            t.watch(z)
            w = z * 2.0
        return (t.gradient(y, x), t.gradient(w, x), t.gradient(w, x, unconnected_gradients="zero"),
                t.gradient(w, x, unconnected_gradients=tps.UnconnectedGradients.ZERO))

    none, unconnected, zero, zero_enum = _call(way, fn, jnp.ones((2, 3)), jnp.asarray(1.0))
    assert none is None and unconnected is None
    assert zero.shape == (2, 3) and zero_enum.tolist() == [[0.0] * 3] * 2


@pytest.mark.parametrize("way", WAYS)
def test_output_gradients(way):                             # testOutputGradUsedInComputation
    def fn(x):
        with tps.GradientTape() as t:
            t.watch(x)
            y = x * 3.0
        return t.gradient(y, x, output_gradients=jnp.asarray([2.0, 5.0]))

    assert _call(way, fn, jnp.asarray([1.0, 1.0])).tolist() == [6.0, 15.0]


@pytest.mark.parametrize("way", WAYS)
def test_gradient_tape_variable(way):                       # testGradientTapeVariable
    v = tps.Variable(1.0, name="v")

    def fn():
        with tps.GradientTape() as t:
            result = v * v
        return t.gradient(result, v)

    assert float(_call(way, fn)) == 2.0


@pytest.mark.parametrize("way", WAYS)
def test_variable_watched_and_repeated_reads(way):          # testGradientTapeRepeatedSource
    v = tps.Variable(2.0)

    def fn():
        with tps.GradientTape() as t:
            y = v.read_value() * v.read_value() + v
        return t.gradient(y, [v, v])

    g1, g2 = _call(way, fn)
    assert float(g1) == 5.0 and float(g2) == 5.0


def test_watched_variables():                               # testWatchedVariables*
    v1, v2 = tps.Variable(1.0), tps.Variable(2.0)
    not_trainable = tps.Variable(3.0, trainable=False)
    with tps.GradientTape(persistent=True) as t:
        v1 * v2 + not_trainable
    assert t.watched_variables() == (v1, v2)
    t.reset()
    assert t.watched_variables() == ()                      # testWatchedVariablesRespectReset
    with tps.GradientTape(watch_accessed_variables=False) as t:
        t.watch(v2)
        v1 * v2
    assert t.watched_variables() == (v2,)
    with tps.GradientTape() as t:
        t.watch(not_trainable)
    assert t.watched_variables() == (not_trainable,)


def test_watched_variables_after_a_non_persistent_gradient_call():
    v = tps.Variable(1.0)
    with tps.GradientTape() as t:
        y = v * 2.0
    t.gradient(y, v)
    assert t.watched_variables() == (v,)


def test_non_persistent_tape_second_call_raises():          # testGradientTapeCalledTwice (non-persistent)
    x = jnp.asarray(3.0)
    with tps.GradientTape() as t:
        t.watch(x)
        y = x * x
    t.gradient(y, x)
    with pytest.raises(RuntimeError, match="non-persistent GradientTape can only be used to compute one set"):
        t.gradient(y, x)


@pytest.mark.parametrize("pfor", [True, False])
@pytest.mark.parametrize("way", WAYS)
def test_jacobian(way, pfor):                               # JacobianTest.testPfor / testWhileLoop
    def fn(x):
        with tps.GradientTape(persistent=True) as g:
            g.watch(x)
            y = x * x
            z = jnp.sin(x)
        return (g.jacobian(y, x, experimental_use_pfor=pfor),
                g.jacobian(z, x, parallel_iterations=1, experimental_use_pfor=pfor))

    x = jnp.asarray([1.0, 2.0, 3.0])
    jy, jz = _call(way, fn, x)
    np.testing.assert_allclose(jy, np.diag([2.0, 4.0, 6.0]))
    np.testing.assert_allclose(jz, np.diag(np.cos([1.0, 2.0, 3.0])), rtol=1e-6)


@pytest.mark.parametrize("way", WAYS)
def test_jacobian_unconnected(way):                         # JacobianTest.testJacobianUnconnected
    def fn(x, y):
        with tps.GradientTape(persistent=True) as g:
            g.watch([x, y])
            z = y * 2.0
        return g.jacobian(z, x), g.jacobian(z, x, unconnected_gradients="zero")

    none, zero = _call(way, fn, jnp.asarray(2.0), jnp.asarray([1.0, 2.0]))
    assert none is None and zero.tolist() == [0.0, 0.0]


@pytest.mark.parametrize("pfor", [True, False])
@pytest.mark.parametrize("way", WAYS)
def test_batch_jacobian(way, pfor):                          # BatchJacobianTest.testPfor / testWhileLoop
    def fn(x, w):
        with tps.GradientTape(persistent=True) as g:
            g.watch(x)
            y = x @ w
        return g.batch_jacobian(y, x, experimental_use_pfor=pfor)

    x = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    w = jnp.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    jac = _call(way, fn, x, w)
    np.testing.assert_allclose(jac, np.stack([w.T, w.T]))   # d(x_i @ w)/d x_i = w^T for each row


def test_batch_jacobian_bad_shapes_raise():                  # BatchJacobianTest.testBadShape / testBadInputRank / testBadOutputRank
    x = jnp.ones((2, 3))
    with tps.GradientTape(persistent=True) as g:
        g.watch(x)
        y = jnp.concatenate([x, x], 0)
        flat = jnp.sum(x, axis=1)
    with pytest.raises(ValueError, match="Need first dimension of target shape"):
        g.batch_jacobian(y, x)
    with pytest.raises(ValueError, match="must have rank at least 2"):
        g.batch_jacobian(flat, x)
    with pytest.raises(ValueError, match="must have rank at least 2"):
        g.batch_jacobian(y, jnp.ones(2))


def test_gradient_through_lax_control_flow():               # testWhileLoopGradients / testCondGradients
    x = jnp.asarray(2.0)
    with tps.GradientTape(persistent=True) as t:
        t.watch(x)
        y = jax.lax.fori_loop(0, 3, lambda i, a: a * x, jnp.asarray(1.0))    # x**3
        z = jax.lax.cond(x > 1.0, lambda v: v * v, lambda v: v, x)
    assert float(t.gradient(y, x)) == 12.0 and float(t.gradient(z, x)) == 4.0


def test_gradient_through_a_jitted_function_and_custom_jvp():   # testGradientOfFunction
    x = jnp.asarray([-1.0, 2.0])

    @jax.jit
    def f(v):
        return jax.nn.relu(v) * 3.0

    with tps.GradientTape() as t:
        t.watch(x)
        y = jnp.sum(f(x) + jax.nn.softplus(x))
    np.testing.assert_allclose(t.gradient(y, x), [jax.nn.sigmoid(-1.0), 3.0 + jax.nn.sigmoid(2.0)], rtol=1e-6)
