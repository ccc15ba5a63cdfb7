"""Grouping per-replica structures into distributed values, and back.

``regroup`` walks the structure of replica 0 (lists, tuples, namedtuples and
dicts are recursed into): a leaf that is the same Python object on every
replica comes back unwrapped; other leaves become ``PerReplica``.
``select_replica`` does the inverse for one replica.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp

from tpustrategy._src.context import contracts
from tpustrategy._src.errors import ReplicaStructureError
from tpustrategy._src.values.distributed import DistributedValues, Mirrored, PerReplica


def _is_leaf(x: Any) -> bool:
    return isinstance(x, DistributedValues) or contracts.is_distributed_variable(x)


def flatten(tree: Any) -> tuple[list[Any], Any]:
    return jax.tree_util.tree_flatten(tree, is_leaf=_is_leaf)


def regroup(per_replica: Sequence[Any], mirrored_ids: Any = None) -> Any:
    """Groups R structures (one per replica) into one structure of distributed leaves.

    Args:
      per_replica: the structures returned by each replica.
      mirrored_ids: optional callable mapping a leaf to a token; leaves whose
        tokens are equal and not None on every replica become ``Mirrored``.
    """
    flat0, treedef = flatten(per_replica[0])
    flats = [flat0]
    for i, tree in enumerate(per_replica[1:], start=1):
        flat, other = flatten(tree)
        if other != treedef:
            raise ReplicaStructureError(
                "Replicas returned different structures: replica 0 returned "
                f"{treedef}, replica {i} returned {other}. Every replica must return the "
                "same structure."
            )
        flats.append(flat)
    out = []
    for position in range(len(flat0)):
        column = [flat[position] for flat in flats]
        first = column[0]
        if all(v is first for v in column[1:]):
            out.append(first)
            continue
        if mirrored_ids is not None:
            tokens = [mirrored_ids(v) for v in column]
            if tokens[0] is not None and all(t == tokens[0] for t in tokens[1:]):
                out.append(Mirrored(column))
                continue
        out.append(PerReplica(column))
    return jax.tree_util.tree_unflatten(treedef, out)


def select_replica(replica_id: int, structure: Any, split_variables: bool = False) -> Any:
    """Replica ``replica_id``'s view: component i of each distributed leaf.

    Distributed variables are passed whole (as TensorFlow does for ``run``
    arguments) unless ``split_variables``.
    """

    def pick(x: Any) -> Any:
        if isinstance(x, DistributedValues):
            return x.values[replica_id]
        if split_variables and contracts.is_distributed_variable(x):
            return x.local_components()[replica_id]
        return x

    return jax.tree_util.tree_map(pick, structure, is_leaf=_is_leaf)


def select_replica_traced(structure: Any, replica_id: Any) -> Any:
    """Like ``select_replica`` inside a compiled trace, where the id is a tracer."""

    def pick(x: Any) -> Any:
        if isinstance(x, Mirrored):
            return x.replicated_array
        if isinstance(x, DistributedValues):
            if x.replica_tracer is not None:
                return x.replica_tracer
            if x.is_ragged:
                raise ValueError(
                    "merge_call: merge_fn returned a PerReplica whose components differ in shape; a "
                    "compiled replica function cannot pick its own component from it.\nFix: return values "
                    "of one shape per replica, or reduce them in merge_fn."
                )
            return jnp.stack([jnp.asarray(v) for v in x.values])[replica_id]
        return x

    return jax.tree_util.tree_map(pick, structure, is_leaf=_is_leaf)


def local_results(value: Any, num_local: int) -> tuple[Any, ...]:
    """``experimental_local_results``: the tuple of local components of ``value``.

    A distributed value gives its components; a list/tuple/dict gives one
    structure per local replica with distributed leaves replaced by that
    replica's component; anything else gives ``(value,)``.
    """
    if isinstance(value, DistributedValues):
        return tuple(value.values)
    if contracts.is_distributed_variable(value):
        return tuple(value.values)
    if isinstance(value, (list, tuple, dict)):
        return tuple(select_replica(i, value, split_variables=True) for i in range(num_local))
    return (value,)
