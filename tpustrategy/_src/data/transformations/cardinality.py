"""``assert_cardinality`` and ``pad_to_cardinality``: datasets of a declared length.

`AssertCardinalityDataset` reports the declared cardinality (so ``batch`` /
``len`` / distribution see a known length) and checks it while iterating,
with TensorFlow's ``FailedPreconditionError`` texts when the input is shorter
or longer. `pad_to_cardinality` appends zero elements, marked by a boolean
``mask_key`` entry, to a dataset of dicts until it has the requested length.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.args import as_int
from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.structure import OBJECT, TensorSpec, map_structure
from tpustrategy._src.errors import FailedPreconditionError


class AssertCardinalityDataset(Dataset):
    """The input, declared (and checked) to have ``expected_cardinality`` elements.

    Attributes:
      expected_cardinality: the declared number of elements (or INFINITE_CARDINALITY).
    """

    autoshard_pass_through = True
    _params = ("expected_cardinality",)

    def __init__(self, input_dataset: Dataset, expected_cardinality: Any):
        super().__init__((input_dataset,))
        n = as_int(expected_cardinality, "assert_cardinality", "expected_cardinality", "assert_cardinality(100)")
        if n < 0 and n != INFINITE_CARDINALITY:
            raise ValueError(
                f"assert_cardinality: expected_cardinality must be >= 0 or INFINITE_CARDINALITY (-1); "
                f"received {n}.\nFix: pass the number of elements the dataset has."
            )
        self.expected_cardinality = n

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        return self.expected_cardinality

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _AssertCardinalityIterator(self.inputs[0]._make_iterator(ctx), self.expected_cardinality)


def _elements(n: int) -> str:
    return f"{n} element" + ("" if n == 1 else "s")


class _AssertCardinalityIterator(NodeIterator):
    def __init__(self, it: NodeIterator, expected: int):
        self._it, self._expected, self._count = it, expected, 0

    def __next__(self) -> Any:
        try:
            x = self._it.__next__()
        except StopIteration:
            if self._expected != INFINITE_CARDINALITY and self._count != self._expected:
                raise FailedPreconditionError(
                    f"Input dataset was expected to contain {_elements(self._expected)} but contained only "
                    f"{_elements(self._count)}.\nFix: pass the dataset's true cardinality to assert_cardinality."
                ) from None
            if self._expected == INFINITE_CARDINALITY:
                raise FailedPreconditionError(
                    "Input dataset was expected to contain an infinite number of elements but contained only "
                    f"{_elements(self._count)}.\nFix: repeat() the dataset, or assert its finite cardinality."
                ) from None
            raise
        self._count += 1
        if self._expected != INFINITE_CARDINALITY and self._count > self._expected:
            raise FailedPreconditionError(
                f"Input dataset was expected to contain {_elements(self._expected)} but contained at least "
                f"{_elements(self._count)}.\nFix: pass the dataset's true cardinality, or take() that many elements."
            )
        return x

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "count": self._count}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "count"), "assert_cardinality")
        self._it.set_state(state["input"])
        self._count = int(state["count"])

    def close(self) -> None:
        self._it.close()


def _zeros(spec: TensorSpec, key: str) -> Any:
    if any(d is None for d in spec.shape):
        raise ValueError(
            f"pad_to_cardinality: component {key!r} has shape {spec.shape} with unknown dimensions, so "
            "padding elements cannot be made.\nFix: give the component a fully known shape (e.g. "
            "padded_batch or a map that fixes its shape) before padding."
        )
    if spec.dtype == OBJECT:
        out = np.empty(spec.shape, dtype=OBJECT)
        out.reshape(-1)[:] = [b""] * out.size
        return out if spec.shape else b""
    return np.zeros(spec.shape, spec.dtype) if spec.shape else spec.dtype.type(0)


def pad_to_cardinality(dataset: Dataset, cardinality: Any, mask_key: str = "valid") -> Dataset:
    """``dataset`` (of dicts) padded with zero elements to ``cardinality`` elements.

    Real elements get ``element[mask_key] = True``, padding elements are zeros
    (empty strings) of the element spec with ``element[mask_key] = False``.

    Raises:
      ValueError: when the elements are not dicts, the cardinality is not known
        and finite, or it exceeds ``cardinality`` (TensorFlow's messages).
    """
    target = as_int(cardinality, "pad_to_cardinality", "cardinality", "pad_to_cardinality(1024)")
    spec = dataset.element_spec
    if not isinstance(spec, dict):
        raise ValueError(
            "`pad_to_cardinality` requires its input dataset to be a dictionary; received elements of "
            f"{type(spec).__name__}.\nFix: map elements to dicts first, e.g. map(lambda x, y: {{'x': x, 'y': y}})."
        )
    n = dataset.cardinality()
    if n in (UNKNOWN_CARDINALITY, INFINITE_CARDINALITY):
        raise ValueError(
            f"The dataset passed into `pad_to_cardinality` must have a known cardinalty, but has cardinality {n}.\n"
            "Fix: use assert_cardinality(n) on the dataset first, or avoid filter / repeat() before padding."
        )
    if n > target:
        raise ValueError(
            "The dataset passed into `pad_to_cardinality` must have a cardinalty less than the target "
            f"cardinality ({target}), but has cardinality {n}.\nFix: pad to at least {n} elements, or take({target})."
        )
    padding = {k: map_structure(lambda leaf, key=k: _zeros(leaf, key), s) for k, s in spec.items()}
    padding[mask_key] = np.bool_(False)

    def mark(element: dict[str, Any]) -> dict[str, Any]:
        return {**element, mask_key: np.bool_(True)}

    out = dataset.map(mark)
    if target > n:
        out = out.concatenate(Dataset.from_tensors(padding).repeat(target - n))
    return out
