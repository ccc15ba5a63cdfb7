"""What ``strategy.scope()`` adds when Keras is imported (``context.extensions``' Keras entry).

``Strategy.scope()`` calls ``scope_hook`` only when ``"keras"`` is in ``sys.modules``: the
first call installs the patch table (``patches``), every call makes the strategy's Keras
distribution current (``distribution``).
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
    from tpustrategy._src.keras.distribution import for_strategy
    from tpustrategy._src.keras.patches import install

    install()
    return for_strategy(strategy).scope()


def dataset_hook() -> None:
    """Lets Keras take tpustrategy datasets before any ``strategy.scope()`` (the default strategy's ``fit``).

    Meant to run when one of our datasets is created while Keras is imported (the JAX backend):
    installs the patch table, which teaches Keras's ``get_data_adapter`` the ``tpsd`` datasets.
    Installing is idempotent; a Keras with another backend is left alone.
    """
    if keras_backend() != "jax":
        return
    from tpustrategy._src.keras.patches import install

    install()
