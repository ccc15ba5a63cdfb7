"""Data-movement programs: the only compiled programs outside ``execution/`` (no user code).

Each moves or re-lays out the arrays of distributed values and is cached by its static
arguments, so a call costs one dispatch:

- ``relayout``: a stacked ``[R, ...]`` array sharded over the replicas becomes one
  array whose every device holds its own replica's component (``views``:
  ``experimental_local_results`` of a ``PerReplica``);
- ``concatenated`` / ``ragged_concatenated``: every replica's component of a stacked
  array concatenated along an axis, replicated over the strategy's devices
  (``strategy.gather``; ragged components at their true sizes).

Tracers (inside a trace) are moved by the same functions traced inline.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from tpustrategy._src.types import Shape
from tpustrategy._src.values import mesh_axis


@functools.cache
def relayout(mesh: Mesh, ndim: int) -> Any:
    """``[R, ...]`` sharded over replicas -> each device holding its own ``[...]`` (one dispatch)."""
    in_spec = P(mesh_axis.REPLICA_AXIS, *([None] * (ndim - 1)))
    body = jax.shard_map(lambda a: a[0], mesh=mesh, in_specs=in_spec, out_specs=P(), check_vma=False)
    return jax.jit(body)


def _concatenate_stacked(stacked: Any, a: int) -> Any:
    moved = jnp.moveaxis(stacked, 0, a)
    shape = list(moved.shape)
    return moved.reshape(shape[:a] + [shape[a] * shape[a + 1]] + shape[a + 2:])


@functools.cache
def _concatenate_program(a: int, replicated: Any) -> Any:
    return jax.jit(functools.partial(_concatenate_stacked, a=a), out_shardings=replicated)


def concatenated(stacked: Any, a: int, replicated: Any) -> Any:
    """The components of ``stacked`` (``[R, ...]``) concatenated along axis ``a``, on ``replicated``."""
    if replicated is None or isinstance(stacked, jax.core.Tracer):
        return _concatenate_stacked(stacked, a)
    return _concatenate_program(a, replicated)(stacked)


@functools.lru_cache(maxsize=64)
def _ragged_program(shapes: tuple[Shape, ...], a: int, replicated: Any) -> Any:
    return jax.jit(functools.partial(_ragged_body, shapes=shapes, a=a), out_shardings=replicated)


def _ragged_body(x: Any, shapes: tuple[Shape, ...], a: int) -> Any:
    return jnp.concatenate([x[r][tuple(slice(0, d) for d in s)] for r, s in enumerate(shapes)], axis=a)


def ragged_concatenated(stacked: Any, shapes: tuple[Shape, ...], a: int, replicated: Any) -> Any:
    """As ``concatenated``, each replica's component trimmed to its true shape first."""
    if replicated is None or isinstance(stacked, jax.core.Tracer):
        return _ragged_body(stacked, shapes, a)
    return _ragged_program(shapes, a, replicated)(stacked)
