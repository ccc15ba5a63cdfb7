"""`Dataset.counter`: the infinite sequence ``start, start + step, ...`` (``tf.data.Dataset.counter``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY
from tpustrategy._src.data.core.structure import TensorSpec, as_dtype


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"Dataset.counter: {name} must be an int; received {type(value).__name__}: {value!r}.\n"
            "Fix: e.g. Dataset.counter(start=0, step=1)."
        )
    return int(value)


class CounterDataset(Dataset):
    """Counts from ``start`` by ``step`` forever (``tf.data.experimental.Counter``).

    Attributes:
      start, step: the first value and the increment (``step`` may be 0 or negative).
      dtype: the element dtype (int64 by default).
    """

    _params = ("start", "step", "dtype")

    def __init__(self, start: int = 0, step: int = 1, dtype: Any = np.int64):
        super().__init__(())
        self.start, self.step = _check_int("start", start), _check_int("step", step)
        self.dtype = as_dtype(np.int64 if dtype is None else dtype)
        if self.dtype.kind not in "iuf":
            raise TypeError(
                f"Dataset.counter: dtype must be a numeric dtype; received {self.dtype}.\n"
                "Fix: use dtype=np.int64 (the default) or another integer dtype."
            )

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return TensorSpec((), self.dtype)

    def _compute_cardinality(self) -> int:
        return INFINITE_CARDINALITY

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _CounterIterator(self.start, self.step, self.dtype)


class _CounterIterator(NodeIterator):
    def __init__(self, start: int, step: int, dtype: np.dtype):
        self._next, self._step, self._dtype = start, step, dtype
        self._scalar = dtype.type

    def __next__(self) -> Any:
        v = self._next
        self._next = v + self._step
        return self._scalar(v)

    def _block(self, n: int) -> np.ndarray:
        v = self._next
        self._next = v + n * self._step
        return (v + self._step * np.arange(n, dtype=np.int64)).astype(self._dtype, copy=False)

    def _next_many(self, n: int) -> list[Any]:
        return list(self._block(n))

    def _next_batch(self, n: int, api: str) -> tuple[int, Any]:
        return n, self._block(n)

    def _skip(self, n: int) -> int:
        self._next += n * self._step
        return n

    def get_state(self) -> dict[str, Any]:
        return {"next": self._next}

    def set_state(self, state: dict[str, Any]) -> None:
        self._next = int(check_state(state, ("next",), "counter")["next"])


Counter = CounterDataset
"""``tf.data.experimental.Counter``: the same as `Dataset.counter`."""
