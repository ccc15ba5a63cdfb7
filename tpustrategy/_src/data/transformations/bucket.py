"""`Dataset.bucket_by_sequence_length`: batches of elements of similar length.

Built, as TensorFlow builds it, on `group_by_window`: an element of length
``L`` goes to bucket ``i`` with ``boundaries[i-1] <= L < boundaries[i]``
(bucket 0 below the first boundary, the last bucket from the last boundary
up); bucket ``i`` is batched ``bucket_batch_sizes[i]`` at a time with
``padded_batch`` (``batch`` when ``no_padding``). Padded shapes default to
the element spec with unknown dimensions padded to the batch maximum, or to
``boundary - 1`` of the bucket with ``pad_to_bucket_boundary``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpustrategy._src.data.core.args import as_bool, as_int, positive_int
from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.structure import TensorSpec, flatten, is_structure, unflatten_as
from tpustrategy._src.data.transformations.map import check_fn

_API = "Dataset.bucket_by_sequence_length"


def _int_list(values: Any, arg: str) -> list[int]:
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, (list, tuple)):
        raise TypeError(
            f"{_API}: {arg} must be a list of ints; received {type(values).__name__}: {values!r}.\n"
            "Fix: e.g. bucket_boundaries=[10, 20], bucket_batch_sizes=[32, 16, 8]."
        )
    return [as_int(v, _API, f"{arg}[{i}]", "[10, 20]") for i, v in enumerate(values)]


def _length(value: Any) -> int:
    length = as_int(value, _API, "element_length_func's result", "lambda x: x.shape[0]")
    return length


def bucket_by_sequence_length(
    dataset: Dataset,
    element_length_func: Callable[..., Any],
    bucket_boundaries: Sequence[int],
    bucket_batch_sizes: Sequence[int],
    padded_shapes: Any = None,
    padding_values: Any = None,
    pad_to_bucket_boundary: bool = False,
    no_padding: bool = False,
    drop_remainder: bool = False,
) -> Dataset:
    """The bucketed dataset (see the module docstring)."""
    check_fn(element_length_func, _API, "element_length_func")
    boundaries = _int_list(bucket_boundaries, "bucket_boundaries")
    sizes = _int_list(bucket_batch_sizes, "bucket_batch_sizes")
    if len(sizes) != len(boundaries) + 1:
        raise ValueError(
            f"{_API}: `len(bucket_batch_sizes)` must equal `len(bucket_boundaries) + 1` but "
            f"`len(bucket_batch_sizes)={len(sizes)}` and `len(bucket_boundaries)={len(boundaries)}`.\n"
            "Fix: give one batch size per bucket: below the first boundary, between each pair, and "
            "from the last boundary up."
        )
    for i, s in enumerate(sizes):
        positive_int(s, _API, f"bucket_batch_sizes[{i}]", "[32, 16, 8]")
    if any(b >= c for b, c in zip(boundaries, boundaries[1:])):
        raise ValueError(
            f"{_API}: bucket_boundaries must be strictly increasing; received {boundaries}.\n"
            "Fix: sort the boundaries and drop duplicates."
        )
    pad_to_boundary = as_bool(pad_to_bucket_boundary, _API, "pad_to_bucket_boundary")
    no_pad = as_bool(no_padding, _API, "no_padding")
    drop = as_bool(drop_remainder, _API, "drop_remainder")
    lows = [np.iinfo(np.int32).min, *boundaries]
    highs = [*boundaries, np.iinfo(np.int32).max]
    input_spec: list[Any] = []

    def bucket_id(*args: Any) -> np.int64:
        n = _length(element_length_func(*args))
        for i, (lo, hi) in enumerate(zip(lows, highs)):
            if lo <= n < hi:
                return np.int64(i)
        return np.int64(len(sizes) - 1)  # lengths beyond int32 stay in the last bucket

    def batching_fn(bucket: np.int64, window: Dataset) -> Dataset:
        size = sizes[int(bucket)]
        if no_pad:
            return window.batch(size, drop_remainder=drop)
        filler = None
        if pad_to_boundary:
            if int(bucket) >= len(sizes) - 1:
                raise ValueError(
                    f"{_API}: When pad_to_bucket_boundary=True, elements must have length < "
                    f"max(bucket_boundaries) = {max(boundaries) if boundaries else None}.\n"
                    "Fix: add a larger last boundary, filter out longer elements, or set pad_to_bucket_boundary=False."
                )
            filler = boundaries[int(bucket)] - 1
        if padded_shapes is not None:
            shapes = _fill_shapes(padded_shapes, filler)
        else:
            if not input_spec:
                input_spec.append(dataset.element_spec)
            shapes = _shapes_of(input_spec[0], filler)
        return window.padded_batch(size, shapes, padding_values, drop_remainder=drop)

    return dataset.group_by_window(key_func=bucket_id, reduce_func=batching_fn, window_size_func=lambda b: np.int64(sizes[int(b)]))


def _shapes_of(spec: Any, filler: int | None) -> Any:
    leaves = [tuple(filler if d is None else d for d in s.shape) if isinstance(s, TensorSpec) else s for s in flatten(spec)]
    return unflatten_as(spec, leaves) if is_structure(spec) else leaves[0]


def _fill_shapes(shapes: Any, filler: int | None) -> Any:
    """``padded_shapes`` with None / -1 dimensions replaced by ``filler`` (a shape is a tuple or list of dims)."""
    if isinstance(shapes, TensorSpec):
        return tuple(filler if d is None else d for d in shapes.shape)
    if isinstance(shapes, dict):
        return {k: _fill_shapes(v, filler) for k, v in shapes.items()}
    if isinstance(shapes, (list, tuple)) and all(d is None or isinstance(d, (int, np.integer)) for d in shapes):
        return tuple(filler if d is None or int(d) < 0 else int(d) for d in shapes)
    if isinstance(shapes, (list, tuple)):
        return tuple(_fill_shapes(v, filler) for v in shapes)
    return shapes
