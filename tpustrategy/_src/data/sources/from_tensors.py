"""`Dataset.from_tensors` (one element) and `Dataset.from_tensor_slices` (one per row).

User constants are converted once, the way TensorFlow converts them (Python
``int`` -> int32, ``float`` -> float32, strings -> ``bytes``), and frozen
read-only so the views handed out cannot change the dataset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.structure import (
    OBJECT,
    element_to_numpy,
    flatten,
    flatten_with_paths,
    is_structure,
    make_readonly,
    map_structure,
    spec_of,
    spec_of_element,
    unflatten_as,
)


class TensorDataset(Dataset):
    """A dataset holding exactly one element.

    Attributes:
      element: the converted element.
    """

    _params = ("element",)

    def __init__(self, element: Any):
        super().__init__(())
        self.element = make_readonly(element_to_numpy(element))

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return spec_of_element(self.element)

    def _compute_cardinality(self) -> int:
        return 1

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _TensorIterator(self.element)


class _TensorIterator(NodeIterator):
    def __init__(self, element: Any):
        self._element = element
        self._done = False

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        self._done = True
        return self._element

    def get_state(self) -> dict[str, Any]:
        return {"done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        self._done = bool(check_state(state, ("done",), "from_tensors")["done"])


class TensorSliceDataset(Dataset):
    """One element per row of the leading dimension of every component.

    Attributes:
      tensors: the converted components (a nest of arrays).
    """

    _params = ("tensors",)

    def __init__(self, tensors: Any, copy: bool = True):
        super().__init__(())
        if copy:
            tensors = make_readonly(element_to_numpy(tensors))
        else:
            # Numeric NumPy arrays are sliced in place (read-only views, no copy).
            tensors = make_readonly(map_structure(
                lambda x: x.view() if isinstance(x, np.ndarray) and x.dtype.kind in "biufc"
                else element_to_numpy(x), tensors))
        sizes = []
        for path, leaf in flatten_with_paths(tensors):
            shape = np.shape(leaf) if not isinstance(leaf, bytes) else ()
            if len(shape) == 0:
                where = f" component {path}" if path else " the input"
                raise ValueError(
                    f"Dataset.from_tensor_slices:{where} is a scalar (rank 0), which has no "
                    f"rows to slice; received {leaf!r}.\n"
                    "Fix: pass arrays with a leading dimension, or use Dataset.from_tensors "
                    "for a single element."
                )
            sizes.append((path, shape[0]))
        if len({s for _, s in sizes}) > 1:
            listed = ", ".join(f"{p or 'input'}: {s}" for p, s in sizes)
            raise ValueError(
                "Dataset.from_tensor_slices: all components must have the same size in their "
                f"first dimension; received sizes {listed}.\n"
                "Fix: slice arrays with the same number of rows, or build separate datasets "
                "and combine them with Dataset.zip."
            )
        self.tensors = tensors
        self._n = sizes[0][1] if sizes else 0

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return map_structure(lambda leaf: spec_of(leaf)._unbatch(), self.tensors)

    def _compute_cardinality(self) -> int:
        return self._n

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _SliceIterator(self.tensors, self._n)


def _rows(leaf: np.ndarray, i: int, j: int) -> list[Any]:
    part = leaf[i:j]
    if part.dtype == OBJECT and part.ndim == 1:
        return part.tolist()
    return list(part)


class _SliceIterator(NodeIterator):
    def __init__(self, tensors: Any, n: int):
        self._tensors = tensors
        self._structured = is_structure(tensors)
        self._leaves = flatten(tensors)
        self._n = n
        self._i = 0

    def __next__(self) -> Any:
        i = self._i
        if i >= self._n:
            raise StopIteration
        self._i = i + 1
        if not self._structured:
            return self._tensors[i]
        return unflatten_as(self._tensors, [leaf[i] for leaf in self._leaves])

    def _next_many(self, n: int) -> list[Any]:
        i = self._i
        j = min(self._n, i + n)
        self._i = j
        if i >= j:
            return []
        if not self._structured:
            return _rows(self._tensors, i, j)
        cols = [_rows(leaf, i, j) for leaf in self._leaves]
        return [unflatten_as(self._tensors, row) for row in zip(*cols)]

    def _next_batch(self, n: int, api: str) -> tuple[int, Any] | None:
        i = self._i
        j = min(self._n, i + n)
        if i >= j:
            return None
        self._i = j
        return j - i, map_structure(lambda leaf: np.array(leaf[i:j]), self._tensors)

    def _skip(self, n: int) -> int:
        k = max(0, min(n, self._n - self._i))
        self._i += k
        return k

    def get_state(self) -> dict[str, Any]:
        return {"index": self._i}

    def set_state(self, state: dict[str, Any]) -> None:
        self._i = int(check_state(state, ("index",), "from_tensor_slices")["index"])
