"""An optax state kept in mirrored variables, created on first use.

The state of an optax transformation is a pytree; each array leaf becomes a
non-trainable ``tps.Variable`` created under the strategy of the variables it
optimizes (mirrored on every replica, like Keras's slot variables).

The initial state must be concrete even when the first ``apply_gradients``
runs while a step is being compiled (variable reads are traced then). Most
transformations start from zeros whatever the parameters are: that is checked
by initialising with all-zero and all-one parameters of the right shapes. A
transformation whose start depends on the values (e.g. schedule-free methods)
is initialised from the variables' current values, which needs a build outside
the compiled step (``Optimizer.build``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.strategy.context import get_strategy, has_strategy
from tpustrategy._src.variables.variable import Variable


def _concrete(tree: Any) -> list[np.ndarray] | None:
    leaves = jax.tree_util.tree_leaves(tree)
    if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
        return None
    return [np.asarray(leaf) for leaf in leaves]


def _same(a: Any, b: Any) -> bool:
    if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
        return False
    la, lb = _concrete(a), _concrete(b)
    return la is not None and lb is not None and all(
        x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True)
        for x, y in zip(la, lb)
    )


def initial_state(transformation: Any, variables: Sequence[Any], api: str) -> Any:
    """A concrete ``transformation.init`` for ``variables`` (see the module docstring).

    Raises:
      ValueError: if the initial state depends on values that are being traced.
    """
    with jax.ensure_compile_time_eval():
        zeros = transformation.init([jnp.zeros(v.shape, v.dtype) for v in variables])
        ones = transformation.init([jnp.ones(v.shape, v.dtype) for v in variables])
    if _same(zeros, ones):
        return zeros
    values = [v.read_value() for v in variables]
    if _concrete(values) is None:
        raise ValueError(
            f"{api}: the optimizer's transformation starts from a state that depends on the "
            "variables' values, and its first apply_gradients runs while a step is being "
            "compiled, where those values are not known yet.\nFix: call "
            "optimizer.build(variables) once before the training loop (outside strategy.run and "
            "tps.function)."
        )
    with jax.ensure_compile_time_eval():
        state = transformation.init([jnp.asarray(x) for x in values])
    if _concrete(state) is None:
        raise ValueError(
            f"{api}: the transformation's init returned traced values, so its state cannot be "
            "stored in variables.\nFix: call optimizer.build(variables) outside strategy.run "
            "and tps.function."
        )
    return state


def creation_scope(strategy: Any) -> contextlib.AbstractContextManager[Any]:
    """Enters ``strategy``'s scope unless it is already current (e.g. inside ``merge_call``)."""
    if strategy is None or (has_strategy() and get_strategy() is strategy):
        return contextlib.nullcontext()
    return strategy.scope()


def _label(path: Any, leaf: Any, variables: Sequence[Any]) -> str:
    """``mu/kernel`` for a leaf that belongs to variable ``kernel``; ``count`` for a shared one."""
    names = [str(getattr(k, "name", getattr(k, "key", ""))) for k in path]
    names = [n for n in names if n]
    last = path[-1] if path else None
    if isinstance(last, jax.tree_util.SequenceKey) and last.idx < len(variables):
        var = variables[last.idx]
        if tuple(np.shape(leaf)) == tuple(var.shape):
            names.append(var.name.rsplit(":", 1)[0])
    return "/".join(names) or "state"


def create_slots(state: Any, variables: Sequence[Any], strategy: Any, prefix: str) -> tuple[list[Any], Any]:
    """One non-trainable variable per array leaf of ``state``, named after its path.

    Returns:
      ``(variables, treedef)``: the slot variables in leaf order and the state's tree structure.
    """
    paths_and_leaves, treedef = jax.tree_util.tree_flatten_with_path(state)
    slots = []
    with creation_scope(strategy):
        for path, leaf in paths_and_leaves:
            name = f"{prefix}/{_label(path, leaf, variables)}"
            slots.append(Variable(np.asarray(leaf), name=name, trainable=False))
    return slots, treedef
