"""Multi-host: per-replica values built on the host, and the processes' agreement on their shapes.

Each process holds only its own replicas' components of a host-built
``PerReplica`` (``experimental_distribute_values_from_function``, a list of
NumPy arrays). Before such values enter a program every process must know
every replica's shape, so all of them build the same (uniform or ragged)
program: one all-gather of the shapes does it.

A concrete distributed value that a ``tps.function`` closes over (instead of
taking it as an argument) is met while tracing. Its components span every
process, so it cannot become a constant of the program; ``evaluate_captured``
combines it (``strategy.reduce``, ``strategy.gather``) at trace time, on every
process together, into a value each process holds whole — the constant. Host
values never change, so the constant is the value TensorFlow's captured
tensors would give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from tpustrategy._src.execution import off_trace
from tpustrategy._src.replica import across_processes
from tpustrategy._src.values import regroup
from tpustrategy._src.values.distributed import DistributedValues, PerReplica
from tpustrategy._src.variables import frames


def is_captured(value: Any) -> bool:
    """Multi-host: a concrete distributed value met while tracing (closed over by the traced function)."""
    return (isinstance(value, DistributedValues) and not value.is_traced and frames.current() is not None
            and across_processes.multi_process())


def evaluate_captured(compute: Callable[[], Any]) -> np.ndarray:
    """Runs ``compute`` (a cross-process combination of a captured value) now, outside the trace.

    It runs on a helper thread, because JAX's trace state is per thread (as for
    batches pulled during a trace). Every process traces the same function at the
    same point (SPMD), so the collectives inside ``compute`` meet. The result is
    replicated, so every process reads it whole and the trace takes it as a constant.
    """
    result: np.ndarray = off_trace.call(lambda: np.asarray(compute()), "tps-captured-value")
    return result


def agree_on_shapes(tree: Any) -> None:
    """Multi-host: per-replica values built on the host learn every replica's shape.

    Each process holds only its replicas' components. One all-gather of their
    shapes gives every process the job's per-replica shapes, so all of them
    build the same (uniform or ragged) program.
    """
    host_built = [
        leaf for leaf in regroup.flatten(tree)[0]
        if isinstance(leaf, PerReplica) and not leaf.has_stacked and not leaf.is_traced
    ]
    if not host_built:
        return
    per_process = across_processes.shapes_over_processes([np.shape(c) for leaf in host_built for c in leaf.values])
    if len({len(p) for p in per_process}) > 1:
        raise ValueError(
            "strategy.run: the processes of the job passed different numbers of per-replica components "
            f"({[len(p) for p in per_process]}); every process must call run with the same structure."
        )
    from tpustrategy._src.replica.shapes import shape_mismatch_error

    offset = 0
    for leaf in host_built:
        k = len(leaf.values)
        shapes = [s for p in per_process for s in p[offset:offset + k]]
        error = shape_mismatch_error("strategy.run", shapes, None)  # ranks only: sizes may differ
        if error is not None:
            raise error  # on every process alike, before any program is built
        leaf.set_global_shapes(shapes)
        offset += k


class LocalResults(tuple[Any, ...]):
    """``experimental_local_results`` of a traced value inside a multi-host ``tps.function``.

    The program is the same on every process, so while tracing this tuple holds
    every replica's component; the function's result then becomes this
    process's own components (TensorFlow's local results), because the tuple is
    a pytree node around the distributed value, rebuilt after the program runs.
    """

    _value: Any
    _num_local: int

    def __new__(cls, value: Any, num_local: int) -> LocalResults:
        obj = super().__new__(cls, regroup.local_results(value, num_local))
        obj._value = value
        obj._num_local = num_local
        return obj


def _flatten_local_results(x: LocalResults) -> tuple[tuple[Any], int]:
    return (x._value,), x._num_local


def _unflatten_local_results(num_local: int, children: Any) -> LocalResults:
    return LocalResults(children[0], num_local)


jax.tree_util.register_pytree_node(LocalResults, _flatten_local_results, _unflatten_local_results)


def local_results_in_trace(value: Any, num_local: int) -> LocalResults | None:
    """A ``LocalResults`` when ``value`` holds traced distributed values of a multi-host job's
    ``tps.function``; else None (the plain tuple of local components is right)."""
    frame = frames.current()
    if frame is None or frame.level != "cross" or not across_processes.multi_process():
        return None
    if not any(isinstance(leaf, DistributedValues) and leaf.is_traced for leaf in regroup.flatten(value)[0]):
        return None
    return LocalResults(value, num_local)
