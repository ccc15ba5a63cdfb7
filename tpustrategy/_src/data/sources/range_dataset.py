"""`Dataset.range`: int64 scalars ``start, start + step, ...`` below ``stop``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.structure import TensorSpec


def _check_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"Dataset.range: {name} must be an int; received {type(value).__name__}: {value!r}.\n"
            "Fix: pass Python ints, e.g. Dataset.range(0, 10, 2)."
        )
    return int(value)


class RangeDataset(Dataset):
    """``range(stop)`` or ``range(start, stop[, step])`` as a dataset of int64 scalars.

    Attributes:
      start, stop, step: the range bounds.
      dtype: the element dtype (int64 by default).
    """

    _params = ("start", "stop", "step", "dtype")

    def __init__(self, *args: int, dtype: Any = None):
        super().__init__(())
        if not 1 <= len(args) <= 3:
            raise TypeError(
                f"Dataset.range: expected 1 to 3 positional arguments (stop) or "
                f"(start, stop[, step]); received {len(args)}: {args!r}."
            )
        full = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
        self.start, self.stop, self.step = (
            _check_int(n, v) for n, v in zip(("start", "stop", "step"), full)
        )
        if self.step == 0:
            raise ValueError(
                "Dataset.range: step must be a non-zero integer; received step=0.\n"
                "Fix: use a positive step to count up or a negative step to count down."
            )
        self.dtype = np.dtype(np.int64 if dtype is None else dtype)

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return TensorSpec((), self.dtype)

    def _compute_cardinality(self) -> int:
        return len(range(self.start, self.stop, self.step))

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _RangeIterator(self.start, self.stop, self.step, self.dtype)


class _RangeIterator(NodeIterator):
    def __init__(self, start: int, stop: int, step: int, dtype: np.dtype):
        self._start, self._next, self._stop, self._step = start, start, stop, step
        self._scalar = dtype.type
        self._dtype = dtype

    def __next__(self) -> Any:
        v = self._next
        if (v >= self._stop) if self._step > 0 else (v <= self._stop):
            raise StopIteration
        self._next = v + self._step
        return self._scalar(v)

    def _remaining(self) -> int:
        return len(range(self._next, self._stop, self._step))

    def _block(self, n: int) -> np.ndarray | None:
        k = min(n, self._remaining())
        if k <= 0:
            return None
        v = self._next
        self._next = v + k * self._step
        return np.arange(v, v + k * self._step, self._step, dtype=self._dtype)[:k]

    def _next_many(self, n: int) -> list[Any]:
        block = self._block(n)
        return [] if block is None else list(block)

    def _next_batch(self, n: int, api: str) -> tuple[int, Any] | None:
        block = self._block(n)
        return None if block is None else (len(block), block)

    def _skip(self, n: int) -> int:
        k = min(n, max(self._remaining(), 0))
        self._next += k * self._step
        return k

    def get_state(self) -> dict[str, Any]:
        return {"next": self._next}

    def set_state(self, state: dict[str, Any]) -> None:
        self._next = int(check_state(state, ("next",), "range")["next"])
