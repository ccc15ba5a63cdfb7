"""`Dataset.take`: the first ``count`` elements (all of them when -1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY


def check_count(count: Any, api: str) -> int:
    if isinstance(count, bool) or not isinstance(count, int):
        raise TypeError(
            f"{api}: count must be an int; received {type(count).__name__}: {count!r}.\n"
            "Fix: pass a non-negative int (or -1 for all elements)."
        )
    if count < -1:
        raise ValueError(
            f"{api}: count must be >= -1; received count={count}.\n"
            "Fix: pass a non-negative int (or -1 for all elements)."
        )
    return count


class TakeDataset(Dataset):
    """At most ``count`` elements of the input.

    Attributes:
      count: the number of elements (-1: all).
    """

    _params = ("count",)

    def __init__(self, input_dataset: Dataset, count: int):
        super().__init__((input_dataset,))
        self.count = check_count(count, "Dataset.take")

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        n = self.inputs[0].cardinality()
        if n == UNKNOWN_CARDINALITY:
            return n
        if n == INFINITE_CARDINALITY:
            return self.count
        if self.count == -1:
            return n
        return min(n, self.count)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _TakeIterator(self.inputs[0]._make_iterator(ctx), self.count)


class _TakeIterator(NodeIterator):
    def __init__(self, it: NodeIterator, count: int):
        self._it, self._count, self._taken = it, count, 0

    def _left(self, n: int) -> int:
        return n if self._count < 0 else min(n, self._count - self._taken)

    def __next__(self) -> Any:
        if self._left(1) <= 0:
            raise StopIteration
        x = self._it.__next__()
        self._taken += 1
        return x

    def _next_many(self, n: int) -> list[Any]:
        k = self._left(n)
        if k <= 0:
            return []
        out = self._it._next_many(k)
        self._taken += len(out)
        return out

    def _next_batch(self, n: int, api: str) -> tuple[int, Any] | None:
        k = self._left(n)
        if k <= 0:
            return None
        got = self._it._next_batch(k, api)
        if got is not None:
            self._taken += got[0]
        return got

    def _skip(self, n: int) -> int:
        k = self._left(n)
        if k <= 0:
            return 0
        done = self._it._skip(k)
        self._taken += done
        return done

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "taken": self._taken}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "taken"), "take")
        self._it.set_state(state["input"])
        self._taken = int(state["taken"])

    def close(self) -> None:
        self._it.close()
