"""``TPUStrategy.run``'s checks of how distributed variables are passed to the replica function.

TensorFlow's ``TPUStrategy.run`` binds a distributed variable passed in ``args`` / ``kwargs``
to the function's parameter by name, so that it stays a variable (``tpu_strategy.
_maybe_partial_apply_variables``). That binding refuses some calls, with ``ValueError``s
programs and tests match on: a variable in ``*args``, a variable before values that go to
``*args``, and more positional arguments than the function names (this one also without
variables). Here a variable passed to ``run`` always stays a variable; the checks are kept so
that the same calls fail the same way, each message followed by the fix.
"""

from __future__ import annotations

import inspect
from typing import Any

import jax

_TOO_MANY = "Too many positional arguments passed to call to TPUStrategy.run()."


def _is_distributed_variable(x: Any) -> bool:
    """TensorFlow's test: the first leaf of ``x`` is a distributed variable."""
    leaves = jax.tree_util.tree_leaves(x)
    return bool(leaves) and getattr(leaves[0], "is_distributed_variable", False) is True


def check_tpu_run_arguments(fn: Any, args: tuple[Any, ...] | list[Any], kwargs: dict[str, Any]) -> None:
    """Raises TensorFlow's ``ValueError`` for the calls ``TPUStrategy.run`` refuses."""
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # no Python signature (a builtin, a C function): nothing to bind
        return
    names: list[str] = []
    star_at = None
    for i, p in enumerate(parameters):
        if i == 0 and p.name == "self":   # TensorFlow's heuristic for a function defined as a method
            continue
        if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
            names.append(p.name)
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            star_at = i
        elif p.kind is inspect.Parameter.POSITIONAL_ONLY:
            in_args = sum(_is_distributed_variable(a) for a in args)
            in_kwargs = sum(_is_distributed_variable(v) for v in kwargs.values())
            if in_args or in_kwargs:
                raise ValueError(
                    "Mixing Variables and positional-only parameters not supported by TPUStrategy. "
                    f"Received {in_kwargs} DistributedVariables in **kwargs and {in_args} in *args, "
                    "expected zero for both.\nFix: make the parameters positional-or-keyword (no `/`), "
                    "or let the function capture the variables instead of passing them.")
            return
    seen_variable = False
    for i, a in enumerate(args):
        to_star = star_at is not None and i >= star_at
        if _is_distributed_variable(a):
            if to_star:
                raise ValueError(
                    "TPUStrategy.run() cannot handle Variables passed to *args. Either name the "
                    "function argument, or capture the Variable implicitly.\nFix: give the function a "
                    f"named parameter for argument {i}, or use the variable inside it without passing it.")
            seen_variable = True
        elif to_star:
            if seen_variable:
                raise ValueError(
                    "TPUStrategy.run() cannot handle both Variables and a mix of positional args and "
                    "*args. Either remove the *args, or capture the Variable implicitly.\nFix: pass the "
                    "variable by keyword or let the function capture it.")
            continue
        if len(names) <= i:
            raise ValueError(
                f"{_TOO_MANY}\nstrategy.run: {getattr(fn, '__name__', 'fn')!r} takes {len(names)} "
                f"positional argument(s) and args has {len(args)}.\nFix: pass as many values in `args` "
                "as the function has parameters.")
