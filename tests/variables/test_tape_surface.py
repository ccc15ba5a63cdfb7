"""tps.GradientTape's whole surface in eager code, strategy.run and tps.function.

Expected numbers are TensorFlow 2.21's (tools/tf_tape_reference.py prints them).
"""

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps


def _modes():
    """Runs a function eagerly, inside tps.function, and in each replica of strategy.run."""
    strategy = tps.MirroredStrategy(devices=jax.devices()[:2])

    def eager(fn, *args):
        return fn(*args)

    def function(fn, *args):
        return tps.function(fn)(*args)

    def run(fn, *args):
        out = strategy.run(fn, args)
        # The last replica's result: replica 1 of two, or the only one on a one-device machine.
        return jax.tree.map(lambda v: strategy.experimental_local_results(v)[-1], out,
                            is_leaf=lambda v: isinstance(v, tps.DistributedValues))

    return {"eager": eager, "function": function, "run": run}


MODES = ["eager", "function", "run"]


@pytest.mark.parametrize("mode", MODES)
def test_gradient_inside_the_block_of_a_non_persistent_tape_stops_recording(mode):
    def fn(x):
        with tps.GradientTape() as t:
            t.watch(x)
            y = x * x
            g = t.gradient(y, x)       # TensorFlow: returns the gradient and stops recording
            z = y * x
        return g, z

    g, z = _modes()[mode](fn, jnp.asarray(3.0))
    assert float(g) == 6.0 and float(z) == 27.0


@pytest.mark.parametrize("mode", MODES)
def test_persistent_gradient_inside_the_block_logs_tensorflows_warning_and_records(mode, caplog):
    def fn(x):
        with tps.GradientTape(persistent=True) as t:
            t.watch(x)
            y = x * x
            g = t.gradient(y, x)
            z = g * x                    # the gradient ops are recorded: d(2x·x)/dx = 4x
        return g, t.gradient(z, x)

    with caplog.at_level(logging.WARNING, logger="tpustrategy"):
        g, gz = _modes()[mode](fn, jnp.asarray(3.0))
    assert float(g) == 6.0 and float(gz) == 12.0
    assert "Calling GradientTape.gradient on a persistent tape inside its context" in caplog.text


def test_a_second_gradient_after_one_inside_the_block_raises():
    x = jnp.asarray(3.0)
    with tps.GradientTape() as t:
        t.watch(x)
        y = x * x
        t.gradient(y, x)
    with pytest.raises(RuntimeError, match="A non-persistent GradientTape can only be used to compute one set"):
        t.gradient(y, x)


@pytest.mark.parametrize("mode", MODES)
def test_nested_tapes_give_second_derivatives(mode):
    def fn(x):
        with tps.GradientTape() as t1:
            with tps.GradientTape() as t2:
                t1.watch(x)
                t2.watch(x)
                y = x ** 3
            dy = t2.gradient(y, x)
        return dy, t1.gradient(dy, x)

    dy, d2y = _modes()[mode](fn, jnp.asarray(3.0))
    assert float(dy) == 27.0 and float(d2y) == 18.0          # TensorFlow: 27, 18


@pytest.mark.parametrize("mode", MODES)
def test_stop_recording_and_reset_cut_what_was_recorded(mode):
    def fn(x):
        with tps.GradientTape(persistent=True) as t:
            t.watch(x)
            y = x * x
            with t.stop_recording():
                z = y * x
            w = y * 2.0
        g_stopped, g_w = t.gradient(z, x), t.gradient(w, x)
        with tps.GradientTape(persistent=True) as r:
            r.watch(x)
            before = x * x
            r.reset()
            after = x * 5.0
        return g_stopped, g_w, r.gradient(before, x), r.gradient(after, x)

    g_stopped, g_w, g_before, g_after = _modes()[mode](fn, jnp.asarray(3.0))
    assert g_stopped is None and float(g_w) == 12.0
    assert g_before is None and g_after is None                 # TensorFlow: reset also unwatches x


def test_stop_recording_outside_the_block_raises():
    t = tps.GradientTape()
    with pytest.raises(ValueError, match="Tape must be recording"):
        with t.stop_recording():
            pass


def test_computations_before_the_tape_are_not_recorded():
    def fn(x):
        y = x * x                            # before the tape: a constant to it
        with tps.GradientTape() as t:
            t.watch(x)
            z = y * x
        return t.gradient(z, x)

    for mode in MODES[:2]:
        assert float(_modes()[mode](fn, jnp.asarray(3.0))) == 9.0


@pytest.mark.parametrize("mode", MODES)
def test_jacobian_and_batch_jacobian_match_tensorflow(mode):
    def fn(xs):
        with tps.GradientTape(persistent=True) as t:
            t.watch(xs)
            y = xs * xs
            ys = jnp.sum(xs * xs, axis=1)
        return (t.jacobian(ys, xs), t.batch_jacobian(y, xs, experimental_use_pfor=False),
                t.jacobian(ys, [xs, xs], parallel_iterations=2, experimental_use_pfor=True))

    jac, bjac, pair = _modes()[mode](fn, jnp.asarray([[1.0, 2.0], [3.0, 4.0]]))
    assert jac.tolist() == [[[2.0, 4.0], [0.0, 0.0]], [[0.0, 0.0], [6.0, 8.0]]]
    assert bjac.tolist() == [[[2.0, 0.0], [0.0, 4.0]], [[6.0, 0.0], [0.0, 8.0]]]
    assert [p.shape for p in pair] == [(2, 2, 2), (2, 2, 2)]


def test_jacobian_of_an_unconnected_source_is_none_or_zeros_and_shapes_are_checked():
    a = tps.Variable(2.0)
    xs = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    with tps.GradientTape(persistent=True) as t:
        t.watch(xs)
        ys = jnp.sum(xs * xs, axis=1)
    assert t.jacobian(ys, a) is None
    assert t.jacobian(ys, a, unconnected_gradients=tps.UnconnectedGradients.ZERO).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match=r"Shape \(2,\) must have rank at least 2"):
        t.batch_jacobian(ys, xs)
    with pytest.raises(ValueError, match="Need first dimension of target shape"):
        t.batch_jacobian(jnp.ones((1, 1)), xs)
    with pytest.raises(ValueError, match="`unconnected_gradients` must be 'none' or 'zero'"):
        t.gradient(ys, xs, unconnected_gradients="nan")


@pytest.mark.parametrize("mode", MODES)
def test_watch_accessed_variables_false_and_watched_variables(mode):
    strategy = tps.MirroredStrategy(devices=jax.devices()[:2])
    scope = strategy.scope() if mode == "run" else tps.MirroredStrategy(devices=jax.devices()[:1]).scope()
    with scope:
        a = tps.Variable(2.0)
        b = tps.Variable(3.0)
        frozen = tps.Variable(1.0, trainable=False)

    def fn(x):
        with tps.GradientTape(watch_accessed_variables=False) as t:
            t.watch(a)
            y = a * b
        with tps.GradientTape() as u:
            z = a * b + frozen + x
        names = (len(t.watched_variables()), len(u.watched_variables()))
        ga, gb = t.gradient(y, [a, b])
        return ga, gb is None, u.gradient(z, [a, b, frozen]), names

    if mode == "run":
        out = strategy.run(fn, (jnp.asarray(1.0),))
        ga = strategy.experimental_local_results(out[0])[0]
        gb_none, (g_a, g_b, g_frozen), names = out[1], out[2], out[3]
        g_a, g_b = strategy.experimental_local_results(g_a)[0], strategy.experimental_local_results(g_b)[0]
    else:
        ga, gb_none, (g_a, g_b, g_frozen), names = _modes()[mode](fn, jnp.asarray(1.0))
    assert float(ga) == 3.0 and gb_none                          # TensorFlow: [3.0, None]
    assert float(g_a) == 3.0 and float(g_b) == 2.0 and g_frozen is None
    assert names == (1, 2)                                       # the trainable variables read


def test_eager_tape_values_stay_usable_after_the_block():
    w = tps.Variable(jnp.ones((3,)))
    with tps.GradientTape() as t:
        loss = jnp.sum(jax.nn.relu(w * 2.0) ** 2)
        assert float(loss) == 12.0 and np.asarray(loss).shape == ()
    assert float(loss + 1.0) == 13.0 and f"{loss:.1f}" == "12.0"
    np.testing.assert_allclose(t.gradient(loss, w), [8.0, 8.0, 8.0])
    w.assign_sub(jnp.ones(3))                                   # writes store plain arrays
    assert isinstance(w.read_value(), jax.Array) and w.numpy().tolist() == [0.0, 0.0, 0.0]


@pytest.mark.devices(2)
def test_backward_function_device_placement_gives_one_gradient_per_replica():
    # mirrored_strategy_test.testBackwardFunctionDevicePlacement: [1.0], [1.0]
    strategy = tps.MirroredStrategy(devices=jax.devices()[:2])
    with strategy.scope():
        w = tps.Variable([1.5], name="a")
        b = tps.Variable([0.5], name="b")

    @tps.function
    def forward(x, w, b):
        return x * w + b

    def step():
        x = jnp.asarray([1.0])
        with tps.GradientTape() as t:
            loss = forward(x, w, b) - jnp.asarray([1.0])
            return t.gradient(loss, [w, b])     # inside the block, as the TensorFlow test does

    gw, gb = strategy.run(step)
    assert [g.tolist() for g in strategy.experimental_local_results(gb)] == [[1.0], [1.0]]
    assert [g.tolist() for g in strategy.experimental_local_results(gw)] == [[1.0], [1.0]]


def test_output_gradients_weight_the_targets():
    x = jnp.asarray([1.0, 2.0])
    with tps.GradientTape() as t:
        t.watch(x)
        y = x * x
    assert t.gradient(y, x, output_gradients=jnp.asarray([1.0, 10.0])).tolist() == [2.0, 40.0]


def test_an_eager_tape_applies_custom_vjp_and_custom_jvp_rules():
    @jax.custom_vjp
    def clip_gradient(x):
        return x

    clip_gradient.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))

    @jax.custom_jvp
    def steep_sin(x):
        return jnp.sin(x)

    steep_sin.defjvp(lambda p, t: (jnp.sin(p[0]), 100.0 * t[0]))
    x = jnp.asarray(3.0)
    with tps.GradientTape(persistent=True) as t:
        t.watch(x)
        y = clip_gradient(x) * 10.0
        z = steep_sin(x)
    assert float(t.gradient(y, x)) == 1.0 and float(t.gradient(z, x)) == 100.0
    with tps.GradientTape() as outer:
        outer.watch(x)
        with tps.GradientTape() as inner:
            inner.watch(x)
            s = jax.nn.softplus(x)
        ds = inner.gradient(s, x)
    np.testing.assert_allclose(outer.gradient(ds, x), jax.nn.sigmoid(3.0) * (1 - jax.nn.sigmoid(3.0)), rtol=1e-5)
