"""`Dataset.padded_batch`: batches of elements padded to a common shape.

Each component is padded at the end of every dimension, to the size given in
``padded_shapes`` or (for None / -1 entries, and by default) to the largest
size in the batch, with ``padding_values`` (0, or ``b""`` for strings).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state, pull
from tpustrategy._src.data.core.structure import (
    OBJECT,
    TensorSpec,
    flatten,
    flatten_with_paths,
    has_sparse,
    is_structure,
    map_structure,
    same_structure,
    to_numpy,
    unflatten_as,
)
from tpustrategy._src.data.transformations.batch import (
    batched_cardinality,
    check_batch_size,
    check_bool,
)

_API = "Dataset.padded_batch"


def _normalize_shape(shape: Any) -> tuple[int | None, ...]:
    if isinstance(shape, TensorSpec):
        return shape.shape
    if isinstance(shape, int) and not isinstance(shape, bool):
        return (None if shape < 0 else shape,)
    return tuple(None if d is None or d < 0 else int(d) for d in shape)


def _broadcast(value: Any, template: Any, what: str) -> list[Any]:
    """Leaves of ``value`` matched to ``template``'s leaves (a single value applies to all)."""
    n = len(flatten(template))
    if value is None or not is_structure(value):
        return [value] * n
    if not same_structure(template, value):
        raise ValueError(
            f"{_API}: {what} must nest like the dataset elements; received {value!r} for "
            f"elements nested like {map_structure(lambda _: '.', template)!r}.\n"
            f"Fix: give one value per component, or a single value for all of them."
        )
    return flatten(value)


def _shape_leaves(padded_shapes: Any, template: Any) -> list[Any]:
    # A shape is a tuple, so it cannot be told apart from structure by type;
    # walk the element's nesting instead.
    if padded_shapes is None:
        return [None] * len(flatten(template))
    if isinstance(template, tuple):
        if not isinstance(padded_shapes, (tuple, list)) or len(padded_shapes) != len(template):
            raise ValueError(
                f"{_API}: padded_shapes {padded_shapes!r} does not nest like the elements "
                f"({len(template)} components).\nFix: give one shape per component."
            )
        return [s for t, p in zip(template, padded_shapes) for s in _shape_leaves(p, t)]
    if isinstance(template, dict):
        if not isinstance(padded_shapes, dict) or sorted(padded_shapes) != sorted(template):
            raise ValueError(
                f"{_API}: padded_shapes must be a dict with keys {sorted(template)}; "
                f"received {padded_shapes!r}.\nFix: give one shape per key."
            )
        return [s for k in sorted(template) for s in _shape_leaves(padded_shapes[k], template[k])]
    return [_normalize_shape(padded_shapes)]


class PaddedBatchDataset(Dataset):
    """Batches with per-component padding.

    Attributes:
      batch_size, drop_remainder: as in `BatchDataset`.
      padded_shapes: the target shapes (None entries: pad to the batch max).
      padding_values: the padding values (None: 0, or ``b""`` for strings).
    """

    _params = ("batch_size", "padded_shapes", "padding_values", "drop_remainder")

    def __init__(self, input_dataset: Dataset, batch_size: int, padded_shapes: Any, padding_values: Any, drop_remainder: bool):
        super().__init__((input_dataset,))
        spec = input_dataset._static_spec()
        if spec is not None and has_sparse(spec):
            raise TypeError(
                "Batching of padded sparse tensors is not currently supported\n"
                f"({_API}: the elements hold a SparseTensor component: {spec!r}. Fix: batch them with "
                "batch(...) (a batched SparseTensor needs no padding), or densify them first with "
                "map(tps.sparse.to_dense).)")
        self.batch_size = check_batch_size(batch_size, _API)
        self.drop_remainder = check_bool(drop_remainder, _API, "drop_remainder")
        self.padded_shapes = padded_shapes
        self.padding_values = padding_values

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        spec = input_spec(self.inputs[0])
        if spec is None:
            return None
        shapes = _shape_leaves(self.padded_shapes, spec)
        size = self.batch_size if self.drop_remainder else None
        leaves = [
            TensorSpec((size, *(s.shape if target is None else target)), s.dtype)
            for s, target in zip(flatten(spec), shapes)
        ]
        return unflatten_as(spec, leaves)

    def _compute_cardinality(self) -> int:
        return batched_cardinality(self.inputs[0].cardinality(), self.batch_size, self.drop_remainder)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _PaddedBatchIterator(self, self.inputs[0]._make_iterator(ctx))


def _pad_component(values: list[Any], target: tuple[int | None, ...] | None, pad: Any, path: str) -> np.ndarray:
    arrays = [v if isinstance(v, np.ndarray) else np.asarray(v, dtype=OBJECT if isinstance(v, bytes) else None) for v in values]
    rank = arrays[0].ndim
    for i, a in enumerate(arrays):
        if a.ndim != rank:
            raise ValueError(
                f"{_API}: elements have different ranks in component {path or '0'}: element 0 has "
                f"shape {arrays[0].shape} and element {i} has shape {a.shape}.\n"
                "Fix: make every element of a component the same rank."
            )
    if target is not None and len(target) != rank:
        raise ValueError(
            f"{_API}: padded shape {list(target)} has rank {len(target)} but component "
            f"{path or '0'} has rank {rank} (shape {arrays[0].shape}).\n"
            "Fix: give a padded shape of the same rank, with None for dimensions padded to the batch max."
        )
    maxes = [max(a.shape[d] for a in arrays) for d in range(rank)]
    dims = []
    for d in range(rank):
        want = None if target is None else target[d]
        if want is None:
            dims.append(maxes[d])
        elif want < maxes[d]:
            raise ValueError(
                f"{_API}: attempted to pad to a smaller size than the input element: component "
                f"{path or '0'} dimension {d} has size {maxes[d]} but the padded shape is {list(target)}.\n"
                "Fix: use a larger padded shape, or None to pad to the batch max."
            )
        else:
            dims.append(want)
    dtype = arrays[0].dtype
    if pad is None:
        fill: Any = b"" if dtype == OBJECT else dtype.type(0)
    else:
        fill = to_numpy(pad)
    out = np.empty((len(arrays), *dims), dtype=dtype)
    if dtype == OBJECT:
        out.reshape(-1)[:] = [fill] * out.size
    else:
        out[...] = fill
    if rank == 0:
        # Scalars (strings included) are the batch itself; an object array must
        # hold the ``bytes``, not 0-d arrays wrapping them.
        out[:] = [a[()] for a in arrays]
        return out
    for i, a in enumerate(arrays):
        out[(i, *(slice(0, s) for s in a.shape))] = a
    return out


class _PaddedBatchIterator(NodeIterator):
    def __init__(self, node: PaddedBatchDataset, it: NodeIterator):
        self._node, self._it = node, it
        self._done = False
        self._shapes: list[Any] | None = None
        self._pads: list[Any] | None = None

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        node = self._node
        elems = pull(self._it, node.batch_size)
        if not elems or (node.drop_remainder and len(elems) < node.batch_size):
            self._done = True
            raise StopIteration
        if len(elems) < node.batch_size:
            self._done = True
        first = elems[0]
        if self._shapes is None:
            self._shapes = _shape_leaves(node.padded_shapes, first)
            self._pads = _broadcast(node.padding_values, first, "padding_values")
        paths = flatten_with_paths(first)
        cols = [flatten(e) for e in elems]
        for i, c in enumerate(cols):
            if len(c) != len(paths):
                raise ValueError(f"{_API}: element {i} has a different structure from element 0.")
        leaves = [
            _pad_component([c[j] for c in cols], self._shapes[j], self._pads[j], paths[j][0])
            for j in range(len(paths))
        ]
        return unflatten_as(first, leaves) if is_structure(first) else leaves[0]

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "done"), "padded_batch")
        self._it.set_state(state["input"])
        self._done = bool(state["done"])

    def close(self) -> None:
        self._it.close()
