"""`Dataset.skip`: all but the first ``count`` elements (none when -1)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from tpustrategy._src.data.transformations.take import check_count


class SkipDataset(Dataset):
    """The input without its first ``count`` elements.

    Attributes:
      count: the number of elements skipped (-1: all).
    """

    _params = ("count",)

    def __init__(self, input_dataset: Dataset, count: int):
        super().__init__((input_dataset,))
        self.count = check_count(count, "Dataset.skip")

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        n = self.inputs[0].cardinality()
        if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            return n
        if self.count < 0:
            return 0
        return max(0, n - self.count)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _SkipIterator(self.inputs[0]._make_iterator(ctx), self.count)


class _SkipIterator(NodeIterator):
    def __init__(self, it: NodeIterator, count: int):
        self._it, self._count = it, count
        self._skipped = False

    def _ensure(self) -> None:
        self._skipped = True
        if self._count < 0:
            while self._it._skip(1 << 20):
                pass
        else:
            self._it._skip(self._count)

    def __next__(self) -> Any:
        if not self._skipped:
            self._ensure()
        return self._it.__next__()

    def _next_many(self, n: int) -> list[Any]:
        if not self._skipped:
            self._ensure()
        return self._it._next_many(n)

    def _next_batch(self, n: int, api: str) -> tuple[int, Any] | None:
        if not self._skipped:
            self._ensure()
        return self._it._next_batch(n, api)

    def _skip(self, n: int) -> int:
        if not self._skipped:
            self._ensure()
        return self._it._skip(n)

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "skipped": self._skipped}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "skipped"), "skip")
        self._it.set_state(state["input"])
        self._skipped = bool(state["skipped"])

    def close(self) -> None:
        self._it.close()
