"""`Dataset.repeat`: the input ``count`` times, or forever.

Each epoch iterates the input afresh; the epoch number joins the iteration
context, so a shuffle with ``reshuffle_each_iteration=True`` draws a new order
every epoch and a restored iterator draws the same one. Repeating forever a
dataset that produced nothing in an epoch ends instead of spinning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY


class RepeatDataset(Dataset):
    """The input repeated ``count`` times (-1 or None: forever).

    Attributes:
      count: the number of epochs, -1 for forever.
    """

    _params = ("count",)

    def __init__(self, input_dataset: Dataset, count: int | None):
        super().__init__((input_dataset,))
        if count is None:
            count = -1
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(
                f"Dataset.repeat: count must be an int or None; received {type(count).__name__}: "
                f"{count!r}.\nFix: repeat() or repeat(-1) for forever, repeat(n) for n epochs."
            )
        self.count = count

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        n = self.inputs[0].cardinality()
        if self.count < 0:
            return 0 if n == 0 else INFINITE_CARDINALITY
        if self.count == 0:
            return 0
        if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            return n
        return self.count * n

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _RepeatIterator(self.inputs[0], ctx, self.count)


class _RepeatIterator(NodeIterator):
    def __init__(self, dataset: Dataset, ctx: IterContext, count: int):
        self._ds, self._ctx, self._count = dataset, ctx, count
        self._epoch = 0
        self._produced = False  # whether the current epoch produced anything
        self._it: NodeIterator | None = None if count == 0 else dataset._make_iterator(ctx.child(0))

    def _advance(self) -> bool:
        """Starts the next epoch; False when there is none."""
        assert self._it is not None
        self._it.close()
        if not self._produced and self._count < 0:
            self._it = None  # an empty input repeated forever is empty
            return False
        self._epoch += 1
        if 0 <= self._count <= self._epoch:
            self._it = None
            return False
        self._produced = False
        self._it = self._ds._make_iterator(self._ctx.child(self._epoch))
        return True

    def __next__(self) -> Any:
        while self._it is not None:
            try:
                x = self._it.__next__()
            except StopIteration:
                if not self._advance():
                    raise
                continue
            self._produced = True
            return x
        raise StopIteration

    def _next_many(self, n: int) -> list[Any]:
        while self._it is not None:
            out = self._it._next_many(n)
            if out:
                self._produced = True
                return out
            if not self._advance():
                break
        return []

    def _next_batch(self, n: int, api: str) -> tuple[int, Any] | None:
        # Keeps the column path of sources (range, from_tensor_slices) under repeat().
        while self._it is not None:
            got = self._it._next_batch(n, api)
            if got is not None and got[0]:
                self._produced = True
                return got
            if not self._advance():
                break
        return None

    def get_state(self) -> dict[str, Any]:
        return {
            "epoch": self._epoch,
            "produced": self._produced,
            "input": None if self._it is None else self._it.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("epoch", "produced", "input"), "repeat")
        if self._it is not None:
            self._it.close()
        self._epoch = int(state["epoch"])
        self._produced = bool(state["produced"])
        if state["input"] is None:
            self._it = None
        else:
            self._it = self._ds._make_iterator(self._ctx.child(self._epoch))
            self._it.set_state(state["input"])

    def close(self) -> None:
        if self._it is not None:
            self._it.close()
