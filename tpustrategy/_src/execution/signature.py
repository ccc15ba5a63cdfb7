"""Classifying the inputs of a compiled computation, and its cache key.

Every leaf of the arguments (distributed values and variables are leaves) is
one of four kinds:

- ``STATIC``: a Python value baked into the program (retraced when it changes,
  like ``tf.function``); variables and other objects pass through as is;
- ``ARRAY``: an array (or tracer) broadcast to every replica;
- ``PER_REPLICA``: a ``PerReplica``, entering as its ``[R, ...]`` stacked array
  (zero-padded, with each replica's true shape, when ragged);
- ``MIRRORED``: a ``Mirrored``, entering as its one replicated array.

The key of a call is the tree structure, each dynamic leaf's kind, shape,
dtype and (ragged) per-replica shapes, and the static values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from tpustrategy._src.context import contracts
from tpustrategy._src.values import regroup
from tpustrategy._src.values.distributed import DistributedValues, Mirrored, PerReplica
from tpustrategy._src.values.leaf import LeafKind, LeafSpec

# The kinds a leaf of the arguments has here (``values.leaf``'s vocabulary).
STATIC, ARRAY, PER_REPLICA, MIRRORED = LeafKind.STATIC, LeafKind.ARRAY, LeafKind.PER_REPLICA, LeafKind.MIRRORED


@dataclass
class Inputs:
    """The classified leaves of one call."""

    leaves: list[Any]  # the original leaves (statics are used as they are)
    kinds: list[LeafKind]  # per leaf
    treedef: Any
    specs: list[LeafSpec]  # per dynamic leaf
    arrays: list[Any]  # per dynamic leaf: the value that enters the program
    key: tuple[Any, ...]

    @property
    def is_ragged(self) -> bool:
        return any(s.is_ragged for s in self.specs)

    def rebuild(self, dynamic: list[Any], make: Any) -> Any:
        """The argument structure with dynamic leaf i replaced by ``make(spec_i, leaf_i, dynamic_i)``."""
        it = iter(zip(self.specs, dynamic))
        out = []
        for leaf, kind in zip(self.leaves, self.kinds):
            if kind == STATIC:
                out.append(leaf)
            else:
                spec, value = next(it)
                out.append(make(spec, leaf, value))
        return jax.tree_util.tree_unflatten(self.treedef, out)


def wrap_cross_input(spec: LeafSpec, leaf: Any, value: Any) -> Any:
    """A traced input as cross-replica code sees it: the distributed value it came from."""
    if spec.kind == MIRRORED:
        return Mirrored.from_replicated(value, leaf.num_replicas)
    if spec.kind == PER_REPLICA:
        cls = type(leaf) if isinstance(leaf, DistributedValues) else PerReplica
        return cls.from_stacked(value, spec.shapes)
    return value


def _is_array(x: Any) -> bool:
    return isinstance(x, (jax.Array, np.ndarray, np.generic, jax.core.Tracer))


def _static_key(leaf: Any) -> tuple[Any, ...]:
    if contracts.is_pullable(leaf):  # an iterator: batches are pulled from whichever one is passed
        return (type(leaf), "iterator")
    try:
        hash(leaf)
        return (type(leaf), leaf)
    except TypeError:
        return (type(leaf), id(leaf))


_canonical: dict[Any, Any] = {}


def _dtype(x: Any) -> Any:
    raw = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
    found = _canonical.get(raw)
    if found is None:
        found = _canonical[raw] = jax.dtypes.canonicalize_dtype(raw)
    return found


class PythonComponents(Exception):
    """A ``PerReplica`` argument holds Python values (strings, objects) that cannot enter a program."""

    def __init__(self, example: Any):
        super().__init__(f"its per-replica arguments hold Python values ({type(example).__name__} {example!r:.40})")
        self.example = example


def _python_component(leaf: DistributedValues) -> Any:
    if leaf.has_stacked or leaf.is_traced or leaf.replica_tracer is not None:
        return None
    for c in leaf.values:
        if isinstance(c, (str, bytes)) or (isinstance(c, np.ndarray) and c.dtype.kind in "OUS"):
            return c
        if not isinstance(c, (jax.Array, np.ndarray, np.generic, int, float, bool, complex)):
            return c
    return None


def argument_path(tree: Any, index: int) -> str:
    """The path of leaf ``index`` of ``tree`` (``(args, kwargs)``) as the user wrote it: ``args[1]['x']``."""
    flat, _ = jax.tree_util.tree_flatten_with_path(
        tree, is_leaf=lambda x: isinstance(x, DistributedValues) or contracts.is_distributed_variable(x))
    path = flat[index][0]
    if not path or not isinstance(path[0], jax.tree_util.SequenceKey) or not isinstance(tree, tuple):
        return f"argument{jax.tree_util.keystr(path)}"
    head = "args" if path[0].idx == 0 else "kwargs"
    return head + jax.tree_util.keystr(tuple(path[1:]))


def _check_count(leaf: DistributedValues, replicas: int | None, tree: Any, index: int) -> None:
    """A distributed argument has one component per replica of the strategy (``replicas``)."""
    if replicas is None or jax.process_count() > 1 or leaf.num_replicas == replicas:
        return
    raise ValueError(
        f"strategy.run: the {type(leaf).__name__} argument {argument_path(tree, index)} has "
        f"{leaf.num_replicas} components, but the "
        f"strategy has {replicas} replicas. Received: a {type(leaf).__name__} of {leaf.num_replicas} "
        f"values.\nFix: give one component per replica (strategy.num_replicas_in_sync = {replicas}), "
        "e.g. with strategy.experimental_distribute_values_from_function(lambda ctx: ...)."
    )


Refuse = Callable[[Any, str], "Exception | None"]


def check_arguments(tree: Any, replicas: int, refuse: Refuse | None = None) -> None:
    """The eager path's checks of its arguments (``classify`` makes them for compiled calls):
    every distributed value has ``replicas`` components, and ``refuse(leaf, path)`` finds no
    leaf that cannot be an argument."""
    leaves, _ = regroup.flatten(tree)
    for index, leaf in enumerate(leaves):
        if isinstance(leaf, DistributedValues):
            if leaf.replica_tracer is None:
                _check_count(leaf, replicas, tree, index)
        elif refuse is not None:
            _refuse(refuse, leaf, tree, index)


def _refuse(refuse: Refuse, leaf: Any, tree: Any, index: int) -> None:
    found = refuse(leaf, argument_path(tree, index))
    if found is not None:
        raise found


def _replicas_of(split_sharding: Any) -> int | None:
    return None if split_sharding is None else int(split_sharding.mesh.shape["replica"])


def classify(tree: Any, split_sharding: Any = None, refuse: Refuse | None = None) -> Inputs:
    """Classifies the leaves of ``tree``.

    Args:
      tree: the arguments, e.g. ``(args, kwargs)``.
      split_sharding: the replica-axis sharding used to stack host-built
        ``PerReplica`` values (None: stacked on the host, placed later).
      refuse: ``refuse(leaf, path)``: the error for a static leaf that cannot be an
        argument (``leaves.refuse_in_run``), or None.
    """
    leaves, treedef = regroup.flatten(tree)
    kinds, specs, arrays, key = [], [], [], [treedef]
    for index, leaf in enumerate(leaves):
        if isinstance(leaf, Mirrored):
            x = leaf.replicated_array
            if not _is_array(x):
                x = np.asarray(x)
            spec = LeafSpec(MIRRORED, tuple(np.shape(x)), _dtype(x), bool(getattr(x, "weak_type", False)),
                            None, leaf.num_replicas)
        elif isinstance(leaf, DistributedValues):
            if (odd := _python_component(leaf)) is not None:
                raise PythonComponents(odd)
            if leaf.replica_tracer is None:
                _check_count(leaf, _replicas_of(split_sharding), tree, index)
            x = leaf.stacked_array(split_sharding)
            shapes = leaf.shapes if leaf.is_ragged else None
            spec = LeafSpec(PER_REPLICA, x.shape, _dtype(x), False, shapes)
        elif _is_array(leaf):
            x = leaf
            spec = LeafSpec(ARRAY, tuple(x.shape), _dtype(x), bool(getattr(x, "weak_type", False)))
        else:
            if refuse is not None:
                _refuse(refuse, leaf, tree, index)
            kinds.append(STATIC)
            key.append(_static_key(leaf))
            continue
        kinds.append(spec.kind)
        specs.append(spec)
        arrays.append(x)
        key.append(spec)
    return Inputs(leaves, kinds, treedef, specs, arrays, tuple(key))
