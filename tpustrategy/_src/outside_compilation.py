"""``tps.tpu.outside_compilation``: host Python code inside a compiled step.

TensorFlow's ``tf.tpu.outside_compilation(computation, *args)`` runs
``computation`` on the host CPU in the middle of a TPU program (printing,
summaries, NumPy code) and feeds its results back. On JAX this is a host
callback: inside a traced function (``tps.function``, ``strategy.run``,
``jax.jit``) the call becomes ``jax.experimental.io_callback`` — run each time
the program runs, once per replica inside ``strategy.run``, with the
arguments as NumPy arrays; outside any trace ``computation`` is simply called.

The output shapes a callback needs are found by tracing ``computation`` once
with abstract values (``jax.eval_shape``, as TensorFlow traces it into its
graph): Python side effects run then with tracers, and again with the real
values each time the step runs. Host-only code that cannot be traced (NumPy on
the arguments, ``int(x)``) must return ``None`` (the usual case: printing,
logging, writing files); if it returns a value, the step fails when it runs
with a ``TypeError`` saying so inside JAX's runtime error.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from tpustrategy._src.context import stack
from tpustrategy._src.errors import UnimplementedError
from tpustrategy._src.values.mesh_axis import CORE_AXIS


def _traced(tree: Any) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(tree))


def outside_compilation(computation: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Runs ``computation(*args, **kwargs)`` on the host, also inside a compiled step.

    Args:
      computation: a Python function; it receives NumPy arrays in place of
        traced values.
      *args, **kwargs: its arguments (arrays, pytrees of them, Python values).

    Returns:
      What ``computation`` returns (arrays of the shapes it returns; ``None``
      for a function run for its side effects).

    Raises:
      TypeError: ``computation`` is not callable (at once), or it is host-only
        code returning a value (when the step runs).

    Example:
      >>> @tps.function
      ... def step(x):
      ...     tps.tpu.outside_compilation(lambda v: print("host sees", v), x)
      ...     return x * 2
    """
    if not callable(computation):
        raise TypeError(
            f"tps.tpu.outside_compilation: computation must be callable; received "
            f"{type(computation).__name__}: {computation!r}.\nFix: "
            "tps.tpu.outside_compilation(lambda x: print(x), x).")
    if not _traced((args, kwargs)):
        return computation(*args, **kwargs)
    _check_one_core_per_replica(computation)
    try:
        shapes = jax.eval_shape(functools.partial(computation, **kwargs), *args)
    except Exception:  # host-only code (NumPy on tracers, printing tracers' values, ...)
        shapes = None
        host_only = True
    else:
        host_only = False

    def on_host(*host_args: Any, **host_kwargs: Any) -> Any:
        out = computation(*host_args, **host_kwargs)
        if host_only and out is not None:
            raise TypeError(
                f"tps.tpu.outside_compilation: {getattr(computation, '__name__', computation)!r} "
                "returned a value, but it is host-only code (JAX could not trace it), so the "
                "shapes of its results could not be known when the step was compiled.\nFix: "
                "return None from host-only code, or write the part that computes results with "
                "jax.numpy.")
        if shapes is None:
            return None
        return jax.tree_util.tree_map(lambda s, v: np.asarray(v, s.dtype).reshape(s.shape), shapes, out)

    return jax.experimental.io_callback(on_host, shapes, *args, ordered=False, **kwargs)


def _check_one_core_per_replica(computation: Callable[..., Any]) -> None:
    """JAX lowers a host callback only where every mesh axis is manual: not in a core-split replica.

    Inside ``strategy.run`` of a strategy with several cores per replica, the program is
    manual over the replicas and automatic over each replica's cores, and XLA cannot
    place a host callback there (a nested ``shard_map`` over the cores does not help:
    the replica function is traced before the program that gives it the manual axes).
    """
    mesh = getattr(stack.current_strategy(), "mesh", None)
    if mesh is None or CORE_AXIS not in mesh.axis_names or mesh.shape[CORE_AXIS] == 1:
        return
    raise UnimplementedError(
        f"tps.tpu.outside_compilation({getattr(computation, '__name__', computation)!r}): the "
        f"strategy splits each replica over {mesh.shape[CORE_AXIS]} cores, and JAX cannot run a host "
        "callback inside a program that is sharded automatically over a replica's cores "
        "(README, 'Where we differ': outside_compilation with several cores per "
        "replica).\nFix: return the values from the step and run the host code after the call "
        "(`out = strategy.run(step, ...)` then `print(strategy.experimental_local_results(out))`), "
        "or run this step on a strategy with one core per replica."
    )
