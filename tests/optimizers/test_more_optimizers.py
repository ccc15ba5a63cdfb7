"""RMSprop, Adagrad, Adadelta, Adamax, Nadam, Ftrl, Lion, Adafactor take the steps Keras takes
on one device (Keras 3 on JAX as the reference), with Keras's defaults and with options."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import tpustrategy as tps  # noqa: E402

keras = pytest.importorskip("keras")

# (name, keyword arguments, tolerance on the weights after the steps)
CASES = [
    ("RMSprop", {}, 1e-6),
    ("RMSprop", {"learning_rate": 0.01, "momentum": 0.9, "centered": True}, 1e-6),
    ("Adagrad", {}, 1e-6),
    ("Adagrad", {"learning_rate": 0.1, "initial_accumulator_value": 0.5}, 1e-6),
    ("Adadelta", {}, 1e-6),
    ("Adadelta", {"learning_rate": 1.0, "rho": 0.9}, 1e-6),
    ("Lion", {}, 1e-6),
    ("Lion", {"learning_rate": 0.01, "beta_1": 0.8, "weight_decay": 0.1}, 1e-6),
    ("Ftrl", {}, 1e-6),
    ("Ftrl", {"learning_rate": 0.1, "l1_regularization_strength": 0.01,
              "l2_regularization_strength": 0.02, "l2_shrinkage_regularization_strength": 0.01,
              "beta": 0.5}, 1e-6),
    ("Adafactor", {}, 1e-6),
    ("Adafactor", {"learning_rate": 0.01, "relative_step": False, "clip_threshold": 0.5}, 1e-6),
    ("Adamax", {}, 1e-5),  # optax puts epsilon inside the max
    ("Nadam", {}, 1e-6),
    ("Nadam", {"learning_rate": 0.01, "beta_1": 0.8, "weight_decay": 0.05}, 1e-6),
]


def _steps(seed=0, n=5):
    rng = np.random.default_rng(seed)
    start = [rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)]
    grads = [[rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(4,)).astype(np.float32)]
             for _ in range(n)]
    return start, grads


def _keras_weights(name, kwargs, start, grads):
    variables = [keras.Variable(v) for v in start]
    opt = getattr(keras.optimizers, name)(**kwargs)
    for g in grads:
        opt.apply_gradients(zip(g, variables))
    return [np.asarray(v.numpy()) for v in variables]


def _tps_weights(name, kwargs, start, grads, strategy=None):
    def build():
        return [tps.Variable(v) for v in start], getattr(tps.optimizers, name)(**kwargs)

    if strategy is None:
        variables, opt = build()
    else:
        with strategy.scope():
            variables, opt = build()
    for g in grads:
        opt.apply_gradients(zip(g, variables))
    return [np.asarray(v.numpy()) for v in variables]


@pytest.mark.parametrize("name,kwargs,tol", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_optimizer_takes_kerass_steps(name, kwargs, tol):
    start, grads = _steps()
    expected = _keras_weights(name, kwargs, start, grads)
    got = _tps_weights(name, kwargs, start, grads)
    for e, g, s in zip(expected, got, start):
        assert not np.allclose(e, s)  # the steps moved the weights
        np.testing.assert_allclose(g, e, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["RMSprop", "Ftrl", "Adafactor"])
def test_under_a_strategy_the_update_is_the_single_device_one(name):
    start, grads = _steps(seed=1, n=3)
    alone = _tps_weights(name, {}, start, grads)
    mirrored = _tps_weights(name, {}, start, grads, strategy=tps.MirroredStrategy())
    for a, m in zip(alone, mirrored):
        np.testing.assert_allclose(m, a, rtol=1e-6, atol=1e-7)


def test_keras_defaults_are_the_defaults():
    assert (tps.optimizers.RMSprop().rho, tps.optimizers.RMSprop().epsilon) == (0.9, 1e-7)
    assert tps.optimizers.Adagrad().initial_accumulator_value == 0.1
    assert tps.optimizers.Adadelta().rho == 0.95
    assert (tps.optimizers.Lion().beta_1, tps.optimizers.Lion().beta_2) == (0.9, 0.99)
    assert tps.optimizers.Ftrl().learning_rate_power == -0.5
    assert tps.optimizers.Adafactor().beta_2_decay == -0.8
    assert all(getattr(tps.optimizers, n)().learning_rate == 0.001 for n in
               ("RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl", "Lion", "Adafactor"))


@pytest.mark.parametrize("call,match", [
    (lambda: tps.optimizers.RMSprop(rho=1.5), r"RMSprop: `rho` must be in \[0, 1\]. Received: rho=1.5"),
    (lambda: tps.optimizers.Ftrl(learning_rate_power=0.5), r"Ftrl: `learning_rate_power` must be a float <= 0"),
    (lambda: tps.optimizers.Ftrl(l1_regularization_strength=-1), r"`l1_regularization_strength` must be a float >= 0"),
    (lambda: tps.optimizers.Adafactor(beta_2_decay=0.5), r"Adafactor: `beta_2_decay` must be a float < 0"),
    (lambda: tps.optimizers.Lion(beta_1=0.0), r"Lion: `beta_1` must be in \(0, 1\]"),
    (lambda: tps.optimizers.Adamax(beta_2=1.0), r"Adamax: `beta_2` must be in \[0, 1\)"),
])
def test_bad_hyper_parameters_name_the_argument_and_value(call, match):
    with pytest.raises(ValueError, match=match):
        call()
