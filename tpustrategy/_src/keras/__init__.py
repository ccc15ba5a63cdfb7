"""Keras 3 (JAX backend) under tpustrategy: the strategy's scope, trainer, custom loops, checkpoints.

Nothing here is imported unless the user imported Keras: ``Strategy.scope()``
calls ``scope_hook`` only when ``"keras"`` is in ``sys.modules``. Inside the
scope Keras's current distribution is the strategy's (``distribution``), each
new Keras variable becomes the strategy's (``variables``), and Keras's
``fit``/``evaluate``/``predict``, optimizers and checkpoints learn the
strategy's rules (``patches``, ``data``, ``steps``, ``checkpoint``).
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any


def keras_backend() -> str | None:
    """The imported Keras's backend name, or None when Keras is not imported."""
    keras = sys.modules.get("keras")
    if keras is None:
        return None
    try:
        return str(keras.backend.backend())
    except Exception:  # a Keras still being imported, or not Keras 3
        return None


def scope_hook(strategy: Any) -> contextlib.AbstractContextManager[Any]:
    """What ``strategy.scope()`` adds when Keras is imported: the strategy's Keras distribution."""
    if keras_backend() != "jax":
        return contextlib.nullcontext()
    from tpustrategy._src.keras import distribution, patches

    patches.install()
    return distribution.for_strategy(strategy).scope()
