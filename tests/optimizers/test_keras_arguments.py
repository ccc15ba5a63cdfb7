"""Keras's optimizer arguments: names, defaults, clipping and weight decay computed by hand.

The expected values follow Keras 2's update rules written out in NumPy
(``var -= lr * wd * var`` before the step; ``clipnorm`` per variable, else
``global_clipnorm``, else ``clipvalue``), independently of optax.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tpustrategy as tps

G1 = np.asarray([3.0, 4.0], np.float32)  # norm 5
G2 = np.asarray([[0.0, 12.0]], np.float32)  # norm 12; global norm 13
V1 = np.asarray([1.0, -2.0], np.float32)
V2 = np.asarray([[0.5, 1.0]], np.float32)


def _steps(optimizer, n=3, strategy=None):
    scope = strategy.scope() if strategy is not None else None
    if scope is not None:
        with scope:
            a, b = tps.Variable(V1), tps.Variable(V2)
            opt = optimizer()
    else:
        a, b, opt = tps.Variable(V1), tps.Variable(V2), optimizer()
    # Each replica holds its share of the gradient: their sum is G (8 replicas, or 1 on --devices 1).
    share = 1.0 / strategy.num_replicas_in_sync if strategy is not None else 1.0
    for _ in range(n):
        if strategy is not None:
            strategy.run(lambda: opt.apply_gradients([(G1 * share, a), (G2 * share, b)]))
        else:
            opt.apply_gradients([(G1, a), (G2, b)])
    return np.asarray(a.read_value()), np.asarray(b.read_value())


def _keras_sgd(lr, momentum=0.0, nesterov=False, wd=None, clip=lambda gs: gs, n=3):
    vs, vel = [V1.astype(np.float64), V2.astype(np.float64)], [np.zeros(2), np.zeros((1, 2))]
    for _ in range(n):
        gs = clip([G1.astype(np.float64), G2.astype(np.float64)])
        for i, g in enumerate(gs):
            if wd:
                vs[i] = vs[i] - vs[i] * wd * lr
            if momentum:
                vel[i] = momentum * vel[i] - lr * g
                vs[i] = vs[i] + (momentum * vel[i] - lr * g if nesterov else vel[i])
            else:
                vs[i] = vs[i] - lr * g
    return vs


@pytest.mark.parametrize("distributed", [False, True], ids=["no_strategy", "all_replicas"])
@pytest.mark.parametrize("kwargs,clip", [
    ({"clipnorm": 2.0}, lambda gs: [g * 2.0 / max(np.linalg.norm(g), 2.0) for g in gs]),
    ({"global_clipnorm": 6.5}, lambda gs: [g * 6.5 / 13.0 for g in gs]),
    ({"clipvalue": 3.5}, lambda gs: [np.clip(g, -3.5, 3.5) for g in gs]),
    ({"clipnorm": 100.0}, lambda gs: gs),
], ids=["clipnorm", "global_clipnorm", "clipvalue", "clipnorm_not_reached"])
def test_gradient_clipping_follows_keras(kwargs, clip, distributed):
    strategy = tps.MirroredStrategy() if distributed else None
    got = _steps(lambda: tps.optimizers.SGD(0.1, momentum=0.5, **kwargs), strategy=strategy)
    for g, e in zip(got, _keras_sgd(0.1, momentum=0.5, clip=clip)):
        np.testing.assert_allclose(g, e, rtol=1e-5)


def test_clipnorm_takes_precedence_over_clipvalue_as_in_keras():
    got = _steps(lambda: tps.optimizers.SGD(0.1, clipnorm=2.0, clipvalue=0.01))
    clip = lambda gs: [g * 2.0 / max(np.linalg.norm(g), 2.0) for g in gs]  # noqa: E731
    for g, e in zip(got, _keras_sgd(0.1, clip=clip)):
        np.testing.assert_allclose(g, e, rtol=1e-5)


@pytest.mark.parametrize("momentum,nesterov", [(0.0, False), (0.9, False), (0.9, True)])
def test_sgd_weight_decay_is_decoupled_from_momentum_as_in_keras(momentum, nesterov):
    got = _steps(lambda: tps.optimizers.SGD(0.1, momentum=momentum, nesterov=nesterov, weight_decay=0.3))
    for g, e in zip(got, _keras_sgd(0.1, momentum, nesterov, wd=0.3)):
        np.testing.assert_allclose(g, e, rtol=1e-5)


def test_sgd_momentum_matches_keras_velocity_form():
    got = _steps(lambda: tps.optimizers.SGD(0.05, momentum=0.8), n=5)
    for g, e in zip(got, _keras_sgd(0.05, 0.8, n=5)):
        np.testing.assert_allclose(g, e, rtol=1e-5)


def test_adam_with_weight_decay_is_adamw():
    adam = _steps(lambda: tps.optimizers.Adam(0.1, weight_decay=0.2))
    adamw = _steps(lambda: tps.optimizers.AdamW(0.1, weight_decay=0.2))
    for a, w in zip(adam, adamw):
        np.testing.assert_array_equal(a, w)


def test_argument_names_and_defaults_are_keras():
    def defaults(cls):
        return {k: p.default for k, p in inspect.signature(cls).parameters.items()}

    sgd, adam, adamw = (defaults(c) for c in (tps.optimizers.SGD, tps.optimizers.Adam, tps.optimizers.AdamW))
    assert (sgd["learning_rate"], sgd["momentum"], sgd["nesterov"], sgd["name"]) == (0.01, 0.0, False, "SGD")
    assert (adam["learning_rate"], adam["beta_1"], adam["beta_2"], adam["epsilon"], adam["amsgrad"]) == (
        0.001, 0.9, 0.999, 1e-7, False)
    assert (adamw["learning_rate"], adamw["weight_decay"], adamw["epsilon"], adamw["name"]) == (
        0.001, 0.004, 1e-7, "AdamW")
    for d in (sgd, adam, adamw):
        assert {"clipnorm", "clipvalue", "global_clipnorm"} <= set(d)
    opt = tps.optimizers.Adam(beta_1=0.8)
    assert (opt.learning_rate, opt.beta_1, opt.beta_2, opt.epsilon, opt.name) == (0.001, 0.8, 0.999, 1e-7, "Adam")


@pytest.mark.parametrize("make,message", [
    (lambda: tps.optimizers.SGD(momentum=1.5), r"`momentum` must be between \[0, 1\]. Received: momentum=1.5"),
    (lambda: tps.optimizers.SGD(learning_rate="fast"), r"(?s)`learning_rate` must be a float or a schedule.*Fix:"),
    (lambda: tps.optimizers.SGD(learning_rate=-1.0), r"`learning_rate` must be >= 0"),
    (lambda: tps.optimizers.Adam(beta_1=1.0), r"`beta_1` must be in \[0, 1\)"),
    (lambda: tps.optimizers.Adam(clipnorm=1.0, global_clipnorm=1.0),
     r"at most one of `clipnorm` and `global_clipnorm` can be set"),
    (lambda: tps.optimizers.Adam(clipvalue=-1.0), r"`clipvalue` must be a float >= 0 or None"),
    (lambda: tps.optimizers.AdamW(weight_decay=None), r"(?s)`weight_decay` must be a float.*Fix:"),
])
def test_invalid_keras_arguments_name_the_argument_and_value(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()
