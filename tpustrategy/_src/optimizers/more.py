"""The other Keras optimizers: RMSprop, Adagrad, Adadelta, Adamax, Nadam, Ftrl, Lion, Adafactor.

Same conventions as ``keras.py`` (Keras's names, arguments and defaults; one
optax chain: clipping, the method, decoupled weight decay, the learning rate).
Where optax has the method in Keras's form it is used as is: ``RMSprop``
(``optax.rmsprop`` with ``eps_in_sqrt``, ``initial_scale=0``; momentum after the
learning rate, as Keras), ``Adagrad``, ``Adadelta`` and ``Lion`` give Keras's
updates number for number. ``Adamax`` and ``Nadam`` are ``optax.adamax``, which
puts ``epsilon`` inside the max (Keras adds it after), so the two agree to
about 1e-5 and exactly once the moments are far above ``epsilon``. ``Nadam``
(Keras keeps Dozat's ``0.96 ** t`` momentum schedule, optax a simpler one),
``Ftrl`` and ``Adafactor`` (optax's is a different variant) are written here
as optax transformations following Keras's update rules exactly.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from tpustrategy._src.optimizers.keras import (
    _chain,
    _check_learning_rate,
    _check_nonnegative,
    _clipping,
    _optax,
)
from tpustrategy._src.optimizers.optimizer import Optimizer


def _check_unit(value: Any, argument: str, api: str, *, closed: bool = False) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and (
        0 <= value <= 1 if closed else 0 <= value < 1)
    if not ok:
        interval = "[0, 1]" if closed else "[0, 1)"
        raise ValueError(f"{api}: `{argument}` must be in {interval}. Received: {argument}={value!r}.\n"
                         f"Fix: leave {argument} at Keras's default, or pass a number in {interval}.")
    return float(value)


def _lr_at(learning_rate: Any, count: Any) -> Any:
    return learning_rate(count) if callable(learning_rate) else learning_rate


class _Base(Optimizer):
    """Stores the Keras arguments and builds the chain."""

    def _setup(self, learning_rate: Any, weight_decay: Any, clipnorm: Any, clipvalue: Any,
               global_clipnorm: Any) -> tuple[Any, str, list[Any]]:
        api = f"tps.optimizers.{type(self).__name__}"
        optax = _optax(api)
        _check_learning_rate(learning_rate, api)
        _check_nonnegative(weight_decay, "weight_decay", api)
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.clipnorm, self.clipvalue, self.global_clipnorm = clipnorm, clipvalue, global_clipnorm
        return optax, api, _clipping(optax, clipnorm, clipvalue, global_clipnorm, api)


class RMSprop(_Base):
    """RMSprop (``tf.keras.optimizers.RMSprop``): Keras's update exactly (``optax.rmsprop`` form).

    ``v = rho * v + (1 - rho) * g**2``; the step is ``learning_rate * g / sqrt(v + epsilon)``
    (``centered``: ``v - mean_g**2`` under the root); with ``momentum`` the steps
    accumulate as ``m = momentum * m + step``.

    Args:
      learning_rate: a float or a schedule. rho: the decay of ``v``. momentum: in [0, 1].
      epsilon: under the square root. centered: subtract the squared mean gradient.
      weight_decay, clipnorm, clipvalue, global_clipnorm, name: as ``tps.optimizers.Adam``.
    """

    def __init__(self, learning_rate: Any = 0.001, rho: float = 0.9, momentum: float = 0.0,
                 epsilon: float = 1e-7, centered: bool = False, weight_decay: float | None = None,
                 clipnorm: float | None = None, clipvalue: float | None = None,
                 global_clipnorm: float | None = None, name: str = "RMSprop"):
        optax, api, clipping = self._setup(learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm)
        self.rho = _check_unit(rho, "rho", api, closed=True)
        self.momentum = _check_unit(momentum, "momentum", api, closed=True)
        _check_nonnegative(epsilon, "epsilon", api)
        self.epsilon, self.centered = float(epsilon), bool(centered)
        scale = (optax.scale_by_stddev if centered else optax.scale_by_rms)(
            decay=self.rho, eps=self.epsilon, initial_scale=0.0, eps_in_sqrt=True)
        if not self.momentum:
            tx = _chain(optax, clipping, [scale], weight_decay, learning_rate)
        else:  # Keras accumulates the learning-rate-scaled steps
            decay = [optax.add_decayed_weights(float(weight_decay))] if weight_decay else []
            tx = optax.chain(*clipping, scale, *decay, optax.scale_by_learning_rate(learning_rate),
                             optax.trace(decay=self.momentum))
        super().__init__(tx, name=name)


class Adagrad(_Base):
    """Adagrad (``tf.keras.optimizers.Adagrad``) as ``optax.adagrad``: Keras's update exactly.

    ``a = a + g**2`` (starting at ``initial_accumulator_value``); the step is
    ``learning_rate * g / sqrt(a + epsilon)``.
    """

    def __init__(self, learning_rate: Any = 0.001, initial_accumulator_value: float = 0.1,
                 epsilon: float = 1e-7, weight_decay: float | None = None,
                 clipnorm: float | None = None, clipvalue: float | None = None,
                 global_clipnorm: float | None = None, name: str = "Adagrad"):
        optax, api, clipping = self._setup(learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm)
        _check_nonnegative(initial_accumulator_value, "initial_accumulator_value", api)
        _check_nonnegative(epsilon, "epsilon", api)
        self.initial_accumulator_value, self.epsilon = float(initial_accumulator_value), float(epsilon)
        scale = optax.scale_by_rss(initial_accumulator_value=self.initial_accumulator_value, eps=self.epsilon)
        super().__init__(_chain(optax, clipping, [scale], weight_decay, learning_rate), name=name)


class Adadelta(_Base):
    """Adadelta (``tf.keras.optimizers.Adadelta``) as ``optax.adadelta``: Keras's update exactly."""

    def __init__(self, learning_rate: Any = 0.001, rho: float = 0.95, epsilon: float = 1e-7,
                 weight_decay: float | None = None, clipnorm: float | None = None,
                 clipvalue: float | None = None, global_clipnorm: float | None = None,
                 name: str = "Adadelta"):
        optax, api, clipping = self._setup(learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm)
        self.rho = _check_unit(rho, "rho", api, closed=True)
        _check_nonnegative(epsilon, "epsilon", api)
        self.epsilon = float(epsilon)
        scale = optax.scale_by_adadelta(rho=self.rho, eps=self.epsilon)
        super().__init__(_chain(optax, clipping, [scale], weight_decay, learning_rate), name=name)


class Adamax(_Base):
    """Adamax (``tf.keras.optimizers.Adamax``) as ``optax.adamax`` (epsilon inside the max)."""

    def __init__(self, learning_rate: Any = 0.001, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, weight_decay: float | None = None,
                 clipnorm: float | None = None, clipvalue: float | None = None,
                 global_clipnorm: float | None = None, name: str = "Adamax"):
        optax, api, clipping = self._setup(learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm)
        self.beta_1, self.beta_2 = _check_unit(beta_1, "beta_1", api), _check_unit(beta_2, "beta_2", api)
        _check_nonnegative(epsilon, "epsilon", api)
        self.epsilon = float(epsilon)
        scale = optax.scale_by_adamax(b1=self.beta_1, b2=self.beta_2, eps=self.epsilon)
        super().__init__(_chain(optax, clipping, [scale], weight_decay, learning_rate), name=name)


class _NadamState(NamedTuple):
    count: Any
    u_product: Any
    m: Any
    v: Any


def _nadam(optax: Any, learning_rate: Any, beta_1: float, beta_2: float, epsilon: float,
           weight_decay: Any) -> Any:
    def init(params: Any) -> _NadamState:
        zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
        return _NadamState(jnp.zeros([], jnp.int32), jnp.ones([], jnp.float32), zeros, zeros)

    def update(grads: Any, state: _NadamState, params: Any = None) -> Any:
        lr = _lr_at(learning_rate, state.count)
        start = _decayed(params, lr, weight_decay)
        t = (state.count + 1).astype(jnp.float32)
        u_t = beta_1 * (1.0 - 0.5 * jnp.power(0.96, t))  # Dozat's momentum schedule, as Keras
        u_next = beta_1 * (1.0 - 0.5 * jnp.power(0.96, t + 1))
        u_product = state.u_product * u_t
        u_product_next = u_product * u_next
        tm = jax.tree_util.tree_map
        m = tm(lambda m, g: m + (g - m) * (1 - beta_1), state.m, grads)
        v = tm(lambda v, g: v + (jnp.square(g) - v) * (1 - beta_2), state.v, grads)

        def new_var(var: Any, g: Any, m: Any, v: Any) -> Any:
            m_hat = u_next * m / (1 - u_product_next) + (1 - u_t) * g / (1 - u_product)
            v_hat = v / (1 - jnp.power(beta_2, t))
            return var - m_hat * lr / (jnp.sqrt(v_hat) + epsilon)

        updates = tm(lambda n, p: n - p, tm(new_var, start, grads, m, v), params)
        return updates, _NadamState(state.count + 1, u_product, m, v)

    return optax.GradientTransformation(init, update)


class Nadam(_Base):
    """Nadam (``tf.keras.optimizers.Nadam``), Keras's update rule exactly (Dozat's momentum schedule)."""

    def __init__(self, learning_rate: Any = 0.001, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, weight_decay: float | None = None,
                 clipnorm: float | None = None, clipvalue: float | None = None,
                 global_clipnorm: float | None = None, name: str = "Nadam"):
        optax, api, clipping = self._setup(learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm)
        self.beta_1, self.beta_2 = _check_unit(beta_1, "beta_1", api), _check_unit(beta_2, "beta_2", api)
        _check_nonnegative(epsilon, "epsilon", api)
        self.epsilon = float(epsilon)
        rule = _nadam(optax, learning_rate, self.beta_1, self.beta_2, self.epsilon, weight_decay)
        super().__init__(optax.chain(*clipping, rule), name=name)


class Lion(_Base):
    """Lion (``tf.keras.optimizers.Lion``) as ``optax.lion``: Keras's update exactly.

    The step is ``learning_rate * sign(beta_1 * m + (1 - beta_1) * g)``, then
    ``m = beta_2 * m + (1 - beta_2) * g``.
    """

    def __init__(self, learning_rate: Any = 0.001, beta_1: float = 0.9, beta_2: float = 0.99,
                 weight_decay: float | None = None, clipnorm: float | None = None,
                 clipvalue: float | None = None, global_clipnorm: float | None = None,
                 name: str = "Lion"):
        optax, api, clipping = self._setup(learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm)
        self.beta_1 = _check_unit(beta_1, "beta_1", api, closed=True)
        self.beta_2 = _check_unit(beta_2, "beta_2", api, closed=True)
        if self.beta_1 == 0:
            raise ValueError(f"{api}: `beta_1` must be in (0, 1]. Received: beta_1={beta_1!r}.\n"
                             "Fix: e.g. beta_1=0.9 (Keras's default).")
        scale = optax.scale_by_lion(b1=self.beta_1, b2=self.beta_2)
        super().__init__(_chain(optax, clipping, [scale], weight_decay, learning_rate), name=name)


# Keras's own rules as optax transformations ---------------------------------------------------
class _FtrlState(NamedTuple):
    count: Any
    accumulator: Any
    linear: Any


class _AdafactorState(NamedTuple):
    count: Any
    r: Any
    c: Any
    v: Any


def _decayed(params: Any, lr: Any, weight_decay: Any) -> Any:
    """Keras shrinks the variable by ``lr * weight_decay`` before the method's own step."""
    if not weight_decay:
        return params
    return jax.tree_util.tree_map(lambda p: p - p * (lr * weight_decay), params)


def _ftrl(optax: Any, learning_rate: Any, power: float, initial: float, l1: float, l2: float,
          shrinkage: float, beta: float, weight_decay: Any) -> Any:
    def init(params: Any) -> _FtrlState:
        return _FtrlState(jnp.zeros([], jnp.int32),
                          jax.tree_util.tree_map(lambda p: jnp.full_like(p, initial), params),
                          jax.tree_util.tree_map(jnp.zeros_like, params))

    def update(grads: Any, state: _FtrlState, params: Any = None) -> Any:
        lr = _lr_at(learning_rate, state.count)
        start = _decayed(params, lr, weight_decay)

        def one(g: Any, var: Any, accum: Any, linear: Any) -> tuple[Any, Any, Any]:
            l2_reg = l2 + beta / (2.0 * lr)
            grad_to_use = g + 2 * shrinkage * var
            new_accum = accum + jnp.square(g)
            linear = linear + grad_to_use - (new_accum ** -power - accum ** -power) / lr * var
            quadratic = new_accum ** -power / lr + 2 * l2_reg
            clipped = jnp.clip(linear, -l1, l1)
            return (clipped - linear) / quadratic, new_accum, linear

        out = jax.tree_util.tree_map(one, grads, start, state.accumulator, state.linear)
        is_triple = lambda x: isinstance(x, tuple) and len(x) == 3  # noqa: E731
        new_var = jax.tree_util.tree_map(lambda t: t[0], out, is_leaf=is_triple)
        updates = jax.tree_util.tree_map(lambda n, p: n - p, new_var, params)
        return updates, _FtrlState(state.count + 1,
                                   jax.tree_util.tree_map(lambda t: t[1], out, is_leaf=is_triple),
                                   jax.tree_util.tree_map(lambda t: t[2], out, is_leaf=is_triple))

    return optax.GradientTransformation(init, update)


class Ftrl(_Base):
    """FTRL-proximal (``tf.keras.optimizers.Ftrl``), Keras's update rule exactly.

    Args:
      learning_rate: a float or a schedule.
      learning_rate_power: <= 0 (-0.5: the paper's ``sqrt`` schedule).
      initial_accumulator_value: >= 0, the accumulators' start.
      l1_regularization_strength, l2_regularization_strength,
      l2_shrinkage_regularization_strength: >= 0.
      beta: >= 0 (adds ``beta / (2 * learning_rate)`` to the L2 strength).
      weight_decay, clipnorm, clipvalue, global_clipnorm, name: as ``tps.optimizers.Adam``.
    """

    def __init__(self, learning_rate: Any = 0.001, learning_rate_power: float = -0.5,
                 initial_accumulator_value: float = 0.1, l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0,
                 l2_shrinkage_regularization_strength: float = 0.0, beta: float = 0.0,
                 weight_decay: float | None = None, clipnorm: float | None = None,
                 clipvalue: float | None = None, global_clipnorm: float | None = None,
                 name: str = "Ftrl"):
        optax, api, clipping = self._setup(learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm)
        if (not isinstance(learning_rate_power, numbers.Real) or isinstance(learning_rate_power, bool)
                or learning_rate_power > 0):
            raise ValueError(f"{api}: `learning_rate_power` must be a float <= 0. Received: "
                             f"learning_rate_power={learning_rate_power!r}.\nFix: e.g. "
                             "learning_rate_power=-0.5 (Keras's default; 0 is a fixed rate).")
        for argument, value in (("initial_accumulator_value", initial_accumulator_value),
                                ("l1_regularization_strength", l1_regularization_strength),
                                ("l2_regularization_strength", l2_regularization_strength),
                                ("l2_shrinkage_regularization_strength", l2_shrinkage_regularization_strength),
                                ("beta", beta)):
            if value is None:
                raise ValueError(f"{api}: `{argument}` must be a float >= 0. Received: {argument}=None.\n"
                                 f"Fix: pass {argument}=0.0 to turn it off.")
            _check_nonnegative(value, argument, api)
        self.learning_rate_power = float(learning_rate_power)
        self.initial_accumulator_value = float(initial_accumulator_value)
        self.l1_regularization_strength = float(l1_regularization_strength)
        self.l2_regularization_strength = float(l2_regularization_strength)
        self.l2_shrinkage_regularization_strength = float(l2_shrinkage_regularization_strength)
        self.beta = float(beta)
        rule = _ftrl(optax, learning_rate, self.learning_rate_power, self.initial_accumulator_value,
                     self.l1_regularization_strength, self.l2_regularization_strength,
                     self.l2_shrinkage_regularization_strength, self.beta, weight_decay)
        super().__init__(optax.chain(*clipping, rule), name=name)


def _rms(x: Any) -> Any:
    return jnp.sqrt(jnp.mean(jnp.square(x)))


def _adafactor(optax: Any, learning_rate: Any, beta_2_decay: float, epsilon_1: float,
               epsilon_2: float, clip_threshold: float, relative_step: bool, weight_decay: Any) -> Any:
    def init(params: Any) -> _AdafactorState:
        def r(p: Any) -> Any:
            return jnp.zeros(p.shape[:-1], p.dtype) if p.ndim >= 2 else jnp.zeros([1], p.dtype)

        def c(p: Any) -> Any:
            return jnp.zeros((*p.shape[:-2], p.shape[-1]), p.dtype) if p.ndim >= 2 else jnp.zeros([1], p.dtype)

        def v(p: Any) -> Any:
            return jnp.zeros([1], p.dtype) if p.ndim >= 2 else jnp.zeros_like(p)

        tm = jax.tree_util.tree_map
        return _AdafactorState(jnp.zeros([], jnp.int32), tm(r, params), tm(c, params), tm(v, params))

    def update(grads: Any, state: _AdafactorState, params: Any = None) -> Any:
        lr0 = _lr_at(learning_rate, state.count)
        start = _decayed(params, lr0, weight_decay)
        step = (state.count + 1).astype(jnp.float32)

        def one(g: Any, var: Any, r: Any, c: Any, v: Any) -> tuple[Any, ...]:
            lr = jnp.asarray(lr0, var.dtype)
            t = step.astype(var.dtype)
            if not callable(learning_rate) and relative_step:
                lr = jnp.minimum(lr, 1 / jnp.sqrt(t))
            rho_t = jnp.minimum(lr, 1 / jnp.sqrt(t))
            alpha_t = jnp.maximum(epsilon_2, _rms(var)) * rho_t
            square = jnp.square(g) + epsilon_1
            beta_2_t = 1 - jnp.power(t, beta_2_decay)
            if var.ndim >= 2:
                r = beta_2_t * r + (1 - beta_2_t) * jnp.mean(square, axis=-1)
                c = beta_2_t * c + (1 - beta_2_t) * jnp.mean(square, axis=-2)
                full = jnp.expand_dims(r / jnp.mean(r, axis=-1, keepdims=True), -1) * jnp.expand_dims(c, -2)
                new_v = v
            else:
                full = new_v = beta_2_t * v + (1 - beta_2_t) * square
            u = g / jnp.sqrt(full)
            u_hat = u / jnp.maximum(1.0, _rms(u) / clip_threshold)
            return var - alpha_t * u_hat, r, c, new_v

        tm = jax.tree_util.tree_map
        out = tm(one, grads, start, state.r, state.c, state.v)
        is_out = lambda x: isinstance(x, tuple) and len(x) == 4  # noqa: E731
        pick = [tm(lambda o, i=i: o[i], out, is_leaf=is_out) for i in range(4)]
        updates = tm(lambda n, p: n - p, pick[0], params)
        return updates, _AdafactorState(state.count + 1, pick[1], pick[2], pick[3])

    return optax.GradientTransformation(init, update)


class Adafactor(_Base):
    """Adafactor (``tf.keras.optimizers.Adafactor``), Keras's update rule exactly.

    Variables of rank >= 2 keep factored second moments (row and column means);
    smaller ones a full one. The step is relative to the variable's RMS and
    clipped to ``clip_threshold``.

    Args:
      learning_rate: a float or a schedule (with ``relative_step``, a float is
        capped at ``1 / sqrt(step)``).
      beta_2_decay: the second-moment decay exponent (``1 - step ** beta_2_decay``).
      epsilon_1: added to the squared gradient. epsilon_2: floor of the variable's RMS.
      clip_threshold: the update RMS limit. relative_step: see ``learning_rate``.
      weight_decay, clipnorm, clipvalue, global_clipnorm, name: as ``tps.optimizers.Adam``.
    """

    def __init__(self, learning_rate: Any = 0.001, beta_2_decay: float = -0.8,
                 epsilon_1: float = 1e-30, epsilon_2: float = 1e-3, clip_threshold: float = 1.0,
                 relative_step: bool = True, weight_decay: float | None = None,
                 clipnorm: float | None = None, clipvalue: float | None = None,
                 global_clipnorm: float | None = None, name: str = "Adafactor"):
        optax, api, clipping = self._setup(learning_rate, weight_decay, clipnorm, clipvalue, global_clipnorm)
        if not isinstance(beta_2_decay, numbers.Real) or isinstance(beta_2_decay, bool) or beta_2_decay >= 0:
            raise ValueError(f"{api}: `beta_2_decay` must be a float < 0. Received: "
                             f"beta_2_decay={beta_2_decay!r}.\nFix: e.g. beta_2_decay=-0.8 (Keras's default).")
        for argument, value in (("epsilon_1", epsilon_1), ("epsilon_2", epsilon_2),
                                ("clip_threshold", clip_threshold)):
            _check_nonnegative(value, argument, api)
        if not clip_threshold:
            raise ValueError(f"{api}: `clip_threshold` must be > 0. Received: clip_threshold={clip_threshold!r}.\n"
                             "Fix: e.g. clip_threshold=1.0 (Keras's default).")
        self.beta_2_decay, self.epsilon_1, self.epsilon_2 = float(beta_2_decay), float(epsilon_1), float(epsilon_2)
        self.clip_threshold, self.relative_step = float(clip_threshold), bool(relative_step)
        rule = _adafactor(optax, learning_rate, self.beta_2_decay, self.epsilon_1, self.epsilon_2,
                          self.clip_threshold, self.relative_step, weight_decay)
        super().__init__(optax.chain(*clipping, rule), name=name)
