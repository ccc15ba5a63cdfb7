"""Sparse reads and writes of variables: ``sparse_read``, ``gather_nd``, ``scatter_*``, ``scatter_nd_*``.

Every sparse write is expressed as one of the variable's dense writes, so it
follows the same aggregation rules in every context (``updates``):

- ``scatter_add`` / ``scatter_sub`` / ``scatter_nd_add`` / ``scatter_nd_sub`` are
  ``assign_add`` / ``assign_sub`` of the dense delta (zeros except at the indices).
  In a replica function a mirrored variable's deltas are aggregated (SUM adds every
  replica's, MEAN averages them, ONLY_FIRST_REPLICA takes replica 0's) — TensorFlow's
  result, since its aggregated IndexedSlices are the concatenated rows.
- ``scatter_mul`` / ``scatter_div`` of a SUM or MEAN mirrored variable in a replica
  function apply TensorFlow's aggregated ``IndexedSlices`` once: every replica's rows,
  concatenated in replica order (MEAN: the values divided by the replica count), so a
  row two replicas write is multiplied / divided by both values in turn
  (``values.py``: ``MirroredVariable`` checks the aggregation only for
  ``scatter_min`` / ``max`` / ``update``; ``_on_write_update_replica`` aggregates the
  slices with ``apply_aggregation``; ``mirrored_variable_test.testScatterDiv`` /
  ``testScatterMul``).
- the others (``scatter_update``, ``scatter_min`` / ``max``, ``scatter_mul`` / ``div``
  otherwise, ``scatter_nd_update`` / ``min`` / ``max``, ``batch_scatter_update``)
  compute the new value from the current one and ``assign`` it. On a mirrored
  variable with SUM or MEAN aggregation all but ``scatter_mul`` / ``div`` raise
  TensorFlow's ``NotImplementedError``; with ONLY_FIRST_REPLICA replica 0's update
  applies; with NONE the update must be the same on every replica (our rule for
  ``assign``). In cross-replica context ``scatter_mul`` / ``div`` apply as given.

A sync-on-read variable is updated in its replica's component in replica
context; in cross-replica context the op acts on its aggregated value (as
``assign`` does; TensorFlow refuses scatters on sync-on-read variables).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import jax
import jax.numpy as jnp
import numpy as np

from tpustrategy._src.types import Shape
from tpustrategy._src.variables import updates
from tpustrategy._src.variables.enums import VariableAggregation
from tpustrategy._src.variables.indexed_slices import IndexedSlices
from tpustrategy._src.variables.state import MIRRORED, VariableState

# The variable written: each scatter returns it, typed as given (``tps.Variable`` for its methods).
V = TypeVar("V", bound=VariableState)


class _Shaped(Protocol):
    """What the index checks read: a name and a shape (a variable, or ``_Row``'s view of one)."""

    @property
    def name(self) -> str: ...

    @property
    def shape(self) -> Shape: ...


_SCATTER_ERROR = ("{op_name} is only supported for mirrored variable (variable created within certain "
                  "`tf.distribute.Strategy` scope) with NONE or `ONLY_FIRST_REPLICA` aggregation, got: "
                  "{aggregation}.")


# The row-wise scatters TensorFlow applies as aggregated IndexedSlices on SUM / MEAN mirrored variables.
_AGGREGATED = ("scatter_mul", "scatter_div")


def _check_aggregation(var: VariableState, op_name: str) -> None:
    if op_name not in _AGGREGATED and var._kind == MIRRORED and var.aggregation not in (
            VariableAggregation.NONE, VariableAggregation.ONLY_FIRST_REPLICA):
        raise NotImplementedError(
            _SCATTER_ERROR.format(op_name=op_name, aggregation=var.aggregation)
            + f"\nFix: use scatter_add / scatter_sub (aggregated), or create {var.name!r} with "
            "aggregation=tps.VariableAggregation.ONLY_FIRST_REPLICA.")


def _slices(var: VariableState, op_name: str, sparse_delta: Any) -> tuple[Any, Any]:
    if not isinstance(sparse_delta, IndexedSlices):
        raise TypeError(
            f"Variable.{op_name}: Argument `sparse_delta` must be a `tf.IndexedSlices`. Received arg: "
            f"{sparse_delta!r:.120} (variable {var.name!r}).\nFix: pass "
            "tps.IndexedSlices(values=..., indices=...), or use scatter_nd_* with (indices, updates).")
    return sparse_delta.indices, sparse_delta.values


def _indices(var: _Shaped, op_name: str, indices: Any, index_depth: int | None) -> jax.Array:
    idx = jnp.asarray(indices)
    if not jnp.issubdtype(idx.dtype, jnp.integer):
        raise TypeError(
            f"Variable.{op_name}: indices must be integers. Received: indices of dtype {idx.dtype} "
            f"(variable {var.name!r}).\nFix: pass integer indices, e.g. jnp.asarray(i, jnp.int32).")
    depth = 1 if index_depth is None else index_depth
    if index_depth is not None and (idx.ndim == 0 or depth > len(var.shape)):
        raise ValueError(
            f"Variable.{op_name}: indices of shape {tuple(idx.shape)} index {depth if idx.ndim else 0} "
            f"dimension(s), but variable {var.name!r} has shape {var.shape}; the last dimension of the "
            f"indices must be between 1 and {len(var.shape)}.\nFix: pass indices of shape [..., k] with k <= rank.")
    def shown(row: np.ndarray) -> Any:
        return int(row[0]) if index_depth is None else row.tolist()

    if not isinstance(idx, jax.core.Tracer):
        host = np.asarray(idx)
        flat = host.reshape(-1, depth) if index_depth is not None else host.reshape(-1, 1)
        for column in range(depth):
            bound = var.shape[column]
            bad = np.flatnonzero((flat[:, column] < 0) | (flat[:, column] >= bound))
            if bad.size:
                from tpustrategy._src.errors import InvalidArgumentError

                raise InvalidArgumentError(
                    None, None,
                    f"Variable.{op_name}: indices[{int(bad[0])}] = {shown(flat[int(bad[0])])} is not in "
                    f"[0, {bound}) (variable {var.name!r} of shape {var.shape}).\nFix: pass indices inside "
                    "the variable's shape (TensorFlow refuses out-of-range indices too).")
    return idx


def _values(var: VariableState, op_name: str, values: Any, target_shape: Shape) -> jax.Array:
    vals = jnp.asarray(values)
    updates.check_value(var, op_name, vals, target_shape)
    return jnp.broadcast_to(vals.astype(var.dtype), target_shape)


def _current(var: VariableState) -> jax.Array:
    return jnp.asarray(var.read_value())


def _rows(var: VariableState, op_name: str, sparse_delta: Any) -> tuple[jax.Array, jax.Array]:
    """The checked indices and values of a row-wise scatter (values broadcast to the rows)."""
    _check_aggregation(var, op_name)  # TensorFlow checks the aggregation first
    indices, values = _slices(var, op_name, sparse_delta)
    idx = _indices(var, op_name, indices, None)
    return idx, _values(var, op_name, values, tuple(idx.shape) + tuple(var.shape[1:]))


def _aggregated_rows(var: VariableState, op_name: str, idx: jax.Array, vals: jax.Array
                     ) -> tuple[jax.Array, jax.Array] | None:
    """In a replica function, a SUM / MEAN mirrored variable's aggregated slices: every replica's
    rows concatenated (MEAN: values divided by the replica count); None elsewhere."""
    if var._kind != MIRRORED or var.aggregation not in (VariableAggregation.SUM, VariableAggregation.MEAN):
        return None
    every_idx = updates.gather_update(var, op_name, idx)
    if every_idx is None:
        return None   # cross-replica context: applied as given (TensorFlow's _update_cross_replica)
    every_vals = updates.gather_update(var, op_name, vals)
    assert every_vals is not None
    n = int(every_idx.shape[0])
    rows = every_vals.reshape((-1, *var.shape[1:]))
    if var.aggregation is VariableAggregation.MEAN:
        rows = (rows / n).astype(rows.dtype)   # float: TensorFlow refuses an integer MEAN variable
    return every_idx.reshape(-1), rows


def _scattered(current: jax.Array, op_name: str, idx: jax.Array, vals: jax.Array) -> jax.Array:
    """``current`` after a row-wise scatter (update/min/max/mul/div) of ``vals`` at ``idx``."""
    at = current.at[idx]
    if op_name == "scatter_update":
        return at.set(vals)
    if op_name == "scatter_min":
        return at.min(vals)
    if op_name == "scatter_max":
        return at.max(vals)
    if op_name == "scatter_mul":
        return at.multiply(vals)
    # scatter_div: divide by the product of every update of a row (repeated indices divide in turn).
    denominator = jnp.ones_like(current).at[idx].multiply(vals)
    if jnp.issubdtype(current.dtype, jnp.integer):
        return jax.lax.div(current, denominator)  # TensorFlow's integer division truncates
    return current / denominator


def scatter(var: V, op_name: str, sparse_delta: Any) -> V:
    """``scatter_add`` / ``sub`` / ``update`` / ``min`` / ``max`` / ``mul`` / ``div`` of ``var``."""
    if op_name in ("scatter_add", "scatter_sub"):
        indices, values = _slices(var, op_name, sparse_delta)
        idx = _indices(var, op_name, indices, None)
        vals = _values(var, op_name, values, tuple(idx.shape) + tuple(var.shape[1:]))
        delta = jnp.zeros(var.shape, var.dtype).at[idx].add(vals)
        method = "assign_add" if op_name == "scatter_add" else "assign_sub"
        updates.write(var, method, delta, True, label=op_name)
        return var
    idx, vals = _rows(var, op_name, sparse_delta)
    if op_name in _AGGREGATED:
        aggregated = _aggregated_rows(var, op_name, idx, vals)
        if aggregated is not None:
            updates.write_agreed(var, _scattered(_current(var), op_name, *aggregated), op_name)
            return var
    updates.write(var, "assign", _scattered(_current(var), op_name, idx, vals), True, label=op_name)
    return var


def batch_scatter_update(var: V, sparse_delta: Any) -> V:
    """``ref[b..., indices[b..., i]] = values[b..., i]``: the last index dimension picks rows per batch."""
    op_name = "batch_scatter_update"
    _check_aggregation(var, op_name)  # TensorFlow checks the aggregation first
    indices, values = _slices(var, op_name, sparse_delta)
    idx = jnp.asarray(indices)
    if idx.ndim == 0 or idx.ndim > len(var.shape):
        raise ValueError(
            f"Variable.{op_name}: indices of shape {tuple(idx.shape)} need rank between 1 and the variable's "
            f"rank {len(var.shape)} (variable {var.name!r} of shape {var.shape}).\nFix: pass indices of shape "
            "[batch..., m] whose batch dimensions match the variable's leading ones.")
    batch = tuple(idx.shape[:-1])
    if batch != tuple(var.shape[:len(batch)]):
        raise ValueError(
            f"Variable.{op_name}: the batch dimensions {batch} of the indices do not match the variable's "
            f"leading dimensions {tuple(var.shape[:len(batch)])} (variable {var.name!r}).\nFix: pass indices "
            "of shape [d_0, ..., d_{r-2}, m] with the variable's first r-1 dimensions.")
    if not isinstance(idx, jax.core.Tracer):
        _indices(_Row(var, len(batch)), op_name, idx, None)
    grids = jnp.indices(idx.shape, sparse=True)[:-1]
    where = tuple(g for g in grids) + (idx,)
    target = tuple(idx.shape) + tuple(var.shape[len(batch) + 1:])
    vals = _values(var, op_name, values, target)
    updates.write(var, "assign", _current(var).at[where].set(vals), True, label=op_name)
    return var


class _Row:
    """The view of a variable whose first dimension is ``var.shape[axis]`` (for index checks)."""

    def __init__(self, var: VariableState, axis: int) -> None:
        self.name = var.name
        self.shape: Shape = tuple(var.shape[axis:])


def scatter_nd(var: V, op_name: str, indices: Any, values: Any) -> V:
    """``scatter_nd_add`` / ``sub`` / ``update`` / ``min`` / ``max``: ``indices[..., k]`` index ``k`` dimensions."""
    idx = _indices(var, op_name, indices, int(np.shape(indices)[-1]) if np.ndim(indices) else 0)
    depth = int(idx.shape[-1])
    where = tuple(idx[..., j] for j in range(depth))
    vals = _values(var, op_name, values, tuple(idx.shape[:-1]) + tuple(var.shape[depth:]))
    if op_name in ("scatter_nd_add", "scatter_nd_sub"):
        delta = jnp.zeros(var.shape, var.dtype).at[where].add(vals)
        updates.write(var, "assign_add" if op_name == "scatter_nd_add" else "assign_sub", delta, True,
                      label=op_name)
        return var
    _check_aggregation(var, op_name)
    at = _current(var).at[where]
    apply: dict[str, Callable[..., jax.Array]] = {
        "scatter_nd_update": at.set, "scatter_nd_min": at.min, "scatter_nd_max": at.max}
    new = apply[op_name](vals)
    updates.write(var, "assign", new, True, label=op_name)
    return var


def sparse_read(var: VariableState, indices: Any) -> jax.Array:
    """Rows ``indices`` of the variable's value in the current context (``tf.gather(v, indices)``)."""
    idx = _indices(var, "sparse_read", indices, None)
    return jnp.take(_current(var), idx, axis=0)


def gather_nd(var: VariableState, indices: Any) -> jax.Array:
    """``v[indices[..., 0], ..., indices[..., k-1]]`` (``tf.gather_nd(v, indices)``)."""
    idx = _indices(var, "gather_nd", indices, int(np.shape(indices)[-1]) if np.ndim(indices) else 0)
    return _current(var)[tuple(idx[..., j] for j in range(int(idx.shape[-1])))]
