"""``SGD``, ``Adam``, ``AdamW``: Keras's optimizer names and arguments, built on optax.

Each builds one ``optax.chain`` in Keras's order: gradient clipping
(``clipnorm`` per variable, else ``global_clipnorm``, else ``clipvalue``),
the method's direction, decoupled weight decay (``weight_decay``: the variable
shrinks by ``learning_rate * weight_decay * variable`` each step, as in Keras
and in ``optax.adamw``), then the learning rate (a float or a schedule: a
callable of the step count, like an optax schedule or a Keras
``LearningRateSchedule``). Without clipping and weight decay the chain is the
plain ``optax.sgd`` / ``optax.adam`` / ``optax.adamw`` update, number for number.
"""

from __future__ import annotations

import numbers
from typing import Any

import jax
import jax.numpy as jnp

from tpustrategy._src.optimizers.optimizer import Optimizer


def _optax(api: str) -> Any:
    try:
        import optax
    except ImportError as e:
        raise ImportError(
            f"{api} is built on optax, which is not installed.\nFix: pip install optax "
            "(or pip install 'tpustrategy[examples]')."
        ) from e
    return optax


def _check_learning_rate(learning_rate: Any, api: str) -> None:
    if callable(learning_rate):
        return
    if not isinstance(learning_rate, numbers.Real) or isinstance(learning_rate, bool):
        raise TypeError(
            f"{api}: `learning_rate` must be a float or a schedule (a callable of the step "
            f"count). Received: learning_rate={learning_rate!r}.\nFix: pass e.g. "
            "learning_rate=1e-3 or learning_rate=optax.exponential_decay(...)."
        )
    if learning_rate < 0:
        raise ValueError(
            f"{api}: `learning_rate` must be >= 0. Received: learning_rate={learning_rate!r}.\n"
            "Fix: pass a non-negative rate, e.g. learning_rate=1e-3."
        )


def _check_nonnegative(value: Any, argument: str, api: str) -> None:
    if value is None:
        return
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{api}: `{argument}` must be a float >= 0 or None. Received: {argument}={value!r}.\n"
                         f"Fix: pass {argument}=None to turn it off, or a non-negative number.")


def _clip_by_norm(optax: Any, max_norm: float) -> Any:
    """Each gradient scaled to norm at most ``max_norm`` (``tf.clip_by_norm``, Keras's ``clipnorm``)."""

    def clip(updates: Any, params: Any = None) -> Any:
        def one(g: Any) -> Any:
            norm = jnp.sqrt(jnp.sum(jnp.square(g)))
            return g * (max_norm / jnp.maximum(norm, max_norm)).astype(g.dtype)

        return jax.tree_util.tree_map(one, updates)

    return optax.stateless(clip)


def _clipping(optax: Any, clipnorm: Any, clipvalue: Any, global_clipnorm: Any, api: str) -> list[Any]:
    for argument, value in (("clipnorm", clipnorm), ("clipvalue", clipvalue), ("global_clipnorm", global_clipnorm)):
        _check_nonnegative(value, argument, api)
    if clipnorm is not None and global_clipnorm is not None:
        raise ValueError(
            f"{api}: at most one of `clipnorm` and `global_clipnorm` can be set. Received: "
            f"clipnorm={clipnorm}, global_clipnorm={global_clipnorm}.\nFix: keep one of them "
            "(clipnorm clips each gradient, global_clipnorm all of them together)."
        )
    if clipnorm:
        return [_clip_by_norm(optax, float(clipnorm))]
    if global_clipnorm:
        return [optax.clip_by_global_norm(float(global_clipnorm))]
    if clipvalue:
        return [optax.clip(float(clipvalue))]
    return []


def _chain(optax: Any, clipping: list[Any], direction: list[Any], weight_decay: Any, learning_rate: Any) -> Any:
    decay = [optax.add_decayed_weights(float(weight_decay))] if weight_decay else []
    return optax.chain(*clipping, *direction, *decay, optax.scale_by_learning_rate(learning_rate))


class SGD(Optimizer):
    """Stochastic gradient descent with optional (Nesterov) momentum (``tf.keras.optimizers.SGD``).

    The update is ``optax.sgd(learning_rate, momentum, nesterov)``: with
    ``momentum`` m, ``t = g + m * t`` and the variable moves by
    ``-learning_rate * t`` (Nesterov: ``-learning_rate * (g + m * t)``), the
    same steps as Keras's velocity form for a constant learning rate.

    Args:
      learning_rate: a float or a schedule (callable of the step count).
      momentum: in ``[0, 1]``; 0 is plain SGD.
      nesterov: Nesterov momentum.
      weight_decay: decoupled weight decay (None for none).
      clipnorm: clip each gradient to this norm.
      clipvalue: clip each gradient element to ``[-clipvalue, clipvalue]``.
      global_clipnorm: clip all gradients together to this global norm.
      name: the name (prefix of the state variables).
    """

    def __init__(
        self,
        learning_rate: Any = 0.01,
        momentum: float = 0.0,
        nesterov: bool = False,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        name: str = "SGD",
    ):
        api = "tps.optimizers.SGD"
        optax = _optax(api)
        _check_learning_rate(learning_rate, api)
        if not isinstance(momentum, numbers.Real) or not 0 <= momentum <= 1:
            raise ValueError(f"{api}: `momentum` must be between [0, 1]. Received: momentum={momentum!r}.\n"
                             "Fix: e.g. momentum=0.9 (0 for plain SGD).")
        _check_nonnegative(weight_decay, "weight_decay", api)
        self.learning_rate = learning_rate
        self.momentum = float(momentum)
        self.nesterov = bool(nesterov)
        self.weight_decay = weight_decay
        self.clipnorm, self.clipvalue, self.global_clipnorm = clipnorm, clipvalue, global_clipnorm
        direction = [optax.trace(decay=self.momentum, nesterov=self.nesterov)] if momentum else []
        tx = _chain(optax, _clipping(optax, clipnorm, clipvalue, global_clipnorm, api), direction,
                    weight_decay, learning_rate)
        super().__init__(tx, name=name)


class Adam(Optimizer):
    """Adam (``tf.keras.optimizers.Adam``), computed as ``optax.adam``.

    ``epsilon`` is added to the bias-corrected ``sqrt(v_hat)`` (the paper's
    Algorithm 1 and optax's placement); Keras adds it to the uncorrected
    ``sqrt(v)``, which differs only while ``sqrt(v)`` is near ``epsilon``.

    Args:
      learning_rate: a float or a schedule (callable of the step count).
      beta_1: decay rate of the first-moment estimate.
      beta_2: decay rate of the second-moment estimate.
      epsilon: numerical-stability constant.
      amsgrad: use AMSGrad (``optax.scale_by_amsgrad``).
      weight_decay: decoupled weight decay (then the update is ``optax.adamw``'s).
      clipnorm: clip each gradient to this norm.
      clipvalue: clip each gradient element to ``[-clipvalue, clipvalue]``.
      global_clipnorm: clip all gradients together to this global norm.
      name: the name (prefix of the state variables).
    """

    def __init__(
        self,
        learning_rate: Any = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        amsgrad: bool = False,
        weight_decay: float | None = None,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        name: str = "Adam",
    ):
        api = f"tps.optimizers.{type(self).__name__}"
        optax = _optax(api)
        _check_learning_rate(learning_rate, api)
        for argument, value in (("beta_1", beta_1), ("beta_2", beta_2)):
            if not isinstance(value, numbers.Real) or not 0 <= value < 1:
                raise ValueError(f"{api}: `{argument}` must be in [0, 1). Received: {argument}={value!r}.\n"
                                 "Fix: use Keras's defaults beta_1=0.9, beta_2=0.999, or values in [0, 1).")
        _check_nonnegative(epsilon, "epsilon", api)
        _check_nonnegative(weight_decay, "weight_decay", api)
        self.learning_rate = learning_rate
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)
        self.amsgrad = bool(amsgrad)
        self.weight_decay = weight_decay
        self.clipnorm, self.clipvalue, self.global_clipnorm = clipnorm, clipvalue, global_clipnorm
        scale = optax.scale_by_amsgrad if amsgrad else optax.scale_by_adam
        direction = [scale(b1=self.beta_1, b2=self.beta_2, eps=self.epsilon)]
        tx = _chain(optax, _clipping(optax, clipnorm, clipvalue, global_clipnorm, api), direction,
                    weight_decay, learning_rate)
        super().__init__(tx, name=name)


class AdamW(Adam):
    """Adam with decoupled weight decay (``tf.keras.optimizers.AdamW``), computed as ``optax.adamw``.

    Each step the variable also shrinks by ``learning_rate * weight_decay *
    variable`` (Keras's default ``weight_decay=0.004``; optax's is 1e-4).

    Args:
      learning_rate: a float or a schedule (callable of the step count).
      weight_decay: the decoupled weight decay rate.
      beta_1: decay rate of the first-moment estimate.
      beta_2: decay rate of the second-moment estimate.
      epsilon: numerical-stability constant (see ``Adam``).
      amsgrad: use AMSGrad.
      clipnorm: clip each gradient to this norm.
      clipvalue: clip each gradient element to ``[-clipvalue, clipvalue]``.
      global_clipnorm: clip all gradients together to this global norm.
      name: the name (prefix of the state variables).
    """

    def __init__(
        self,
        learning_rate: Any = 0.001,
        weight_decay: float = 0.004,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        amsgrad: bool = False,
        clipnorm: float | None = None,
        clipvalue: float | None = None,
        global_clipnorm: float | None = None,
        name: str = "AdamW",
    ):
        if weight_decay is None:
            raise ValueError(
                "tps.optimizers.AdamW: `weight_decay` must be a float. Received: weight_decay=None."
                "\nFix: pass weight_decay=0.004 (Keras's default), or use tps.optimizers.Adam."
            )
        super().__init__(
            learning_rate=learning_rate, beta_1=beta_1, beta_2=beta_2, epsilon=epsilon,
            amsgrad=amsgrad, weight_decay=weight_decay, clipnorm=clipnorm, clipvalue=clipvalue,
            global_clipnorm=global_clipnorm, name=name,
        )
