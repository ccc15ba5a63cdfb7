"""The TensorFlow guides ``autodiff``, ``advanced_autodiff``, ``variable`` and
``basic_training_loops`` (tensorflow/docs ``site/en/guide/*.ipynb``), ported: each
notebook cell that exercises the tape, variables or a training loop, with the numbers
the guide prints. ``tf.*`` math is written with ``jnp``; Keras-layer cells use a
``tps.Variable`` model; device-placement and SavedModel cells have no meaning here.
"""

from __future__ import annotations

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

# -- autodiff.ipynb ----------------------------------------------------------------------------


def test_autodiff_gradient_of_a_variable():
    x = tps.Variable(3.0)
    with tps.GradientTape() as tape:
        y = x ** 2
    assert float(tape.gradient(y, x)) == 6.0


def test_autodiff_gradients_with_respect_to_a_dict_of_variables():
    w = tps.Variable(np.random.default_rng(0).normal(size=(3, 2)).astype(np.float32), name="w")
    b = tps.Variable(jnp.zeros(2), name="b")
    x = jnp.asarray([[1.0, 2.0, 3.0]])
    with tps.GradientTape(persistent=True) as tape:
        y = x @ w + b
        loss = jnp.mean(y ** 2)
    dl_dw, dl_db = tape.gradient(loss, [w, b])
    assert dl_dw.shape == (3, 2) and dl_db.shape == (2,)
    grads = tape.gradient(loss, {"w": w, "b": b})
    np.testing.assert_allclose(grads["b"], dl_db)
    np.testing.assert_allclose(dl_db, np.asarray(y)[0], rtol=1e-6)        # d mean(y²)/db = y (2 outputs)


def test_autodiff_what_the_tape_watches():
    x0 = tps.Variable(3.0, name="x0")
    x1 = tps.Variable(3.0, name="x1", trainable=False)
    x2 = tps.Variable(2.0, name="x2") + 1.0          # a tensor, not a variable
    x3 = jnp.asarray(3.0)
    with tps.GradientTape() as tape:
        y = (x0 ** 2) + (x1 ** 2) + (x2 ** 2)
    grad = tape.gradient(y, [x0, x1, x2, x3])
    assert float(grad[0]) == 6.0 and grad[1:] == [None, None, None]
    assert [v.name for v in tape.watched_variables()] == ["x0:0"]


def test_autodiff_watch_a_tensor_and_watch_accessed_variables_false():
    x = jnp.asarray(3.0)
    with tps.GradientTape() as tape:
        tape.watch(x)
        y = x ** 2
    assert float(tape.gradient(y, x)) == 6.0
    x0, x1 = tps.Variable(0.0), tps.Variable(10.0)
    with tps.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x1)
        y = jax.nn.softplus(x1) + jnp.sin(x0)
    grad = tape.gradient(y, {"x0": x0, "x1": x1})
    assert grad["x0"] is None
    np.testing.assert_allclose(grad["x1"], 0.9999546, rtol=1e-6)


def test_autodiff_intermediate_results_and_persistent_tapes():
    x = jnp.asarray(3.0)
    with tps.GradientTape() as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    assert float(tape.gradient(z, y)) == 18.0              # dz/dy = 2y
    x = jnp.asarray([1.0, 3.0])
    with tps.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * y
    assert tape.gradient(z, x).tolist() == [4.0, 108.0] and tape.gradient(y, x).tolist() == [2.0, 6.0]
    del tape


def test_autodiff_gradients_of_non_scalar_targets():
    x = tps.Variable(2.0)
    with tps.GradientTape(persistent=True) as tape:
        y0 = x ** 2
        y1 = 1 / x
    assert float(tape.gradient(y0, x)) == 4.0 and float(tape.gradient(y1, x)) == -0.25
    assert float(tape.gradient({"y0": y0, "y1": y1}, x)) == 3.75
    with tps.GradientTape() as tape:
        y = x * jnp.asarray([3.0, 4.0])
    assert float(tape.gradient(y, x)) == 7.0
    xs = jnp.linspace(-10.0, 10.0, 201)
    with tps.GradientTape() as tape:
        tape.watch(xs)
        y = jax.nn.sigmoid(xs)
    np.testing.assert_allclose(tape.gradient(y, xs), jax.nn.sigmoid(xs) * (1 - jax.nn.sigmoid(xs)), rtol=1e-5)


def test_autodiff_control_flow():
    x = jnp.asarray(1.0)
    v0, v1 = tps.Variable(2.0), tps.Variable(2.0)
    with tps.GradientTape(persistent=True) as tape:
        tape.watch(x)
        result = v0 if x > 0.0 else v1 ** 2
        result = jnp.asarray(result)
    dv0, dv1 = tape.gradient(result, [v0, v1])
    assert float(dv0) == 1.0 and dv1 is None
    assert tape.gradient(result, x) is None


def test_autodiff_cases_that_give_none():
    x, y = tps.Variable(2.0), tps.Variable(3.0)
    with tps.GradientTape() as tape:
        z = y * y
    assert tape.gradient(z, x) is None
    x = tps.Variable(2.0)
    seen = []
    for _ in range(2):                                   # a variable replaced by a tensor
        with tps.GradientTape() as tape:
            y = x + 1
        seen.append(tape.gradient(y, x))
        x = x + 1
    assert float(seen[0]) == 1.0 and seen[1] is None
    x = tps.Variable([[1.0, 2.0], [3.0, 4.0]])
    with tps.GradientTape() as tape:
        x2 = x ** 2
        y = np.asarray(x2).mean(axis=0)                  # computed outside JAX (np.mean(x2) would call
                                                         # the array's own mean, which JAX records)
        y = jnp.mean(jnp.asarray(y), axis=0)
    assert tape.gradient(y, x) is None
    x = jnp.asarray(10)
    with tps.GradientTape() as g:
        g.watch(x)
        y = x * x
    assert g.gradient(y, x) is None                       # integers have no gradient
    x0, x1 = tps.Variable(3.0), tps.Variable(0.0)
    with tps.GradientTape() as tape:
        x1.assign_add(x0)                                # a stateful update is not differentiated
        y = x1 ** 2
    assert tape.gradient(y, x0) is None and float(x1.numpy()) == 3.0


def test_autodiff_zeros_instead_of_none():
    x = tps.Variable([2.0, 2.0])
    y = tps.Variable(3.0)
    with tps.GradientTape() as tape:
        z = y ** 2
    assert tape.gradient(z, x, unconnected_gradients=tps.UnconnectedGradients.ZERO).tolist() == [0.0, 0.0]


# -- advanced_autodiff.ipynb --------------------------------------------------------------------

@pytest.mark.parametrize("reset", [True, False])
def test_advanced_stop_recording_and_reset(reset):
    x, y = tps.Variable(2.0), tps.Variable(3.0)
    with tps.GradientTape() as t:
        x_sq = x * x
        with t.stop_recording():
            y_sq = y * y
        z = x_sq + y_sq
    grad = t.gradient(z, {"x": x, "y": y})
    assert float(grad["x"]) == 4.0 and grad["y"] is None
    with tps.GradientTape() as t:
        y_sq = y * y
        if reset:
            t.reset()
        z = x * x + y_sq
    grad = t.gradient(z, {"x": x, "y": y})
    assert float(grad["x"]) == 4.0
    assert grad["y"] is None if reset else float(grad["y"]) == 6.0


def test_advanced_higher_order_gradients():
    x = tps.Variable(1.0)
    with tps.GradientTape() as t2:
        with tps.GradientTape() as t1:
            y = x * x * x
        dy_dx = t1.gradient(y, x)
    d2y_dx2 = t2.gradient(dy_dx, x)
    assert float(dy_dx) == 3.0 and float(d2y_dx2) == 6.0


def test_advanced_jacobians():
    x = jnp.linspace(-10.0, 10.0, 200 + 1)
    delta = jnp.linspace(-3.0, 3.0, 200 + 1)
    with tps.GradientTape() as tape:
        tape.watch(delta)
        y = jax.nn.sigmoid(x + delta)
    dy_dx = tape.jacobian(y, delta)
    assert dy_dx.shape == (201, 201)
    np.testing.assert_allclose(np.diag(dy_dx), jax.nn.sigmoid(x + delta) * (1 - jax.nn.sigmoid(x + delta)), rtol=1e-5)
    w = tps.Variable(np.random.default_rng(1).normal(size=(10, 5)).astype(np.float32))
    xb = jnp.asarray(np.random.default_rng(2).normal(size=(7, 10)).astype(np.float32))
    with tps.GradientTape(persistent=True) as tape:
        y = jax.nn.relu(xb @ w)
    j = tape.jacobian(y, w)
    assert j.shape == (7, 5, 10, 5)
    with tps.GradientTape(persistent=True) as tape:
        tape.watch(xb)
        y = jnp.tanh(xb @ w)
    full = tape.jacobian(y, xb)
    batch = tape.batch_jacobian(y, xb)
    assert full.shape == (7, 5, 7, 10) and batch.shape == (7, 5, 10)
    np.testing.assert_allclose(batch, np.einsum("bxby->bxy", np.asarray(full)), rtol=1e-6)


# -- variable.ipynb -------------------------------------------------------------------------------

def test_variable_guide_create_read_and_assign():
    my_variable = tps.Variable([[1.0, 2.0], [3.0, 4.0]])
    bool_variable = tps.Variable([False, False, False, True])
    assert my_variable.shape == (2, 2) and my_variable.dtype == jnp.float32
    assert bool_variable.numpy().tolist() == [False, False, False, True]
    assert np.asarray(jnp.argmax(my_variable)).item() == 3
    assert jnp.reshape(my_variable, (1, 4)).tolist() == [[1.0, 2.0, 3.0, 4.0]]
    a = tps.Variable([2.0, 3.0])
    a.assign([1, 2])
    with pytest.raises(ValueError):
        a.assign([1.0, 2.0, 3.0])
    b = tps.Variable(a)                 # a new variable from a's value
    a.assign([5, 6])
    assert a.numpy().tolist() == [5.0, 6.0] and b.numpy().tolist() == [1.0, 2.0]
    assert a.assign_add([2, 3]).numpy().tolist() == [7.0, 9.0]
    assert a.assign_sub([7, 9]).numpy().tolist() == [0.0, 0.0]


def test_variable_guide_names_and_trainable():
    my_tensor = jnp.asarray([[1.0, 2.0], [3.0, 4.0]])
    a = tps.Variable(my_tensor, name="Mark")
    b = tps.Variable(my_tensor + 1, name="Mark")
    assert a.name == b.name == "Mark:0"
    assert not bool(jnp.all(a.numpy() == b.numpy()))     # same name, different variables
    step_counter = tps.Variable(1, trainable=False)
    assert not step_counter.trainable
    c = copy.deepcopy(a)
    assert c.name == "Mark:0" and c is not a


# -- basic_training_loops.ipynb -----------------------------------------------------------------

def test_basic_training_loop_fits_the_line():
    true_w, true_b, n = 3.0, 2.0, 201
    rng = np.random.default_rng(0)
    x = jnp.linspace(-2, 2, n)
    y = x * true_w + true_b + jnp.asarray(rng.normal(size=n), jnp.float32)

    class MyModel:
        def __init__(self):
            self.w = tps.Variable(5.0)
            self.b = tps.Variable(0.0)

        def __call__(self, x):
            return self.w * x + self.b

    def loss(target_y, predicted_y):
        return jnp.mean(jnp.square(target_y - predicted_y))

    model = MyModel()
    initial = float(loss(y, model(x)))

    def train(model, x, y, learning_rate):
        with tps.GradientTape() as t:
            current_loss = loss(y, model(x))
        dw, db = t.gradient(current_loss, [model.w, model.b])
        model.w.assign_sub(learning_rate * dw)
        model.b.assign_sub(learning_rate * db)

    losses = []
    for _ in range(10):
        train(model, x, y, learning_rate=0.1)
        losses.append(float(loss(y, model(x))))
    assert losses[-1] < initial and all(a > b for a, b in zip(losses, losses[1:]))
    # The same loop compiled: the tape inside tps.function gives the same steps.
    model2 = MyModel()
    step = tps.function(lambda: train(model2, x, y, 0.1))
    for _ in range(10):
        step()
    np.testing.assert_allclose([model2.w.numpy(), model2.b.numpy()], [model.w.numpy(), model.b.numpy()], rtol=1e-5)
    assert abs(float(model.w.numpy()) - true_w) < 0.5 and abs(float(model.b.numpy()) - true_b) < 0.5
