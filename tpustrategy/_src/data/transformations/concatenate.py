"""`Dataset.concatenate`: one dataset's elements followed by another's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.structure import common_spec


class ConcatenateDataset(Dataset):
    """``inputs[0]`` then ``inputs[1]``; their elements must have compatible specs."""

    def __init__(self, input_dataset: Dataset, dataset_to_concatenate: Dataset):
        if not isinstance(dataset_to_concatenate, Dataset):
            raise TypeError(
                "Dataset.concatenate: `dataset` must be a Dataset; received "
                f"{type(dataset_to_concatenate).__name__}: {dataset_to_concatenate!r}."
            )
        super().__init__((input_dataset, dataset_to_concatenate))
        a, b = input_dataset._static_spec(), dataset_to_concatenate._static_spec()
        if a is not None and b is not None and common_spec(a, b) is None:
            raise TypeError(
                f"Dataset.concatenate: incompatible dataset elements:\n  {a} vs.\n  {b}\n"
                "Fix: map both datasets to the same structure and dtypes first."
            )

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        a, b = input_spec(self.inputs[0]), input_spec(self.inputs[1])
        return None if a is None or b is None else common_spec(a, b)

    def _compute_cardinality(self) -> int:
        n1, n2 = self.inputs[0].cardinality(), self.inputs[1].cardinality()
        if INFINITE_CARDINALITY in (n1, n2):
            return INFINITE_CARDINALITY
        if UNKNOWN_CARDINALITY in (n1, n2):
            return UNKNOWN_CARDINALITY
        return n1 + n2

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _ConcatenateIterator(self.inputs, ctx)


class _ConcatenateIterator(NodeIterator):
    def __init__(self, inputs: tuple[Dataset, ...], ctx: IterContext):
        self._inputs, self._ctx = inputs, ctx
        self._index = 0
        self._it: NodeIterator | None = inputs[0]._make_iterator(ctx)

    def _switch(self) -> bool:
        assert self._it is not None
        self._it.close()
        self._index += 1
        if self._index >= len(self._inputs):
            self._it = None
            return False
        self._it = self._inputs[self._index]._make_iterator(self._ctx)
        return True

    def __next__(self) -> Any:
        while self._it is not None:
            try:
                return self._it.__next__()
            except StopIteration:
                if not self._switch():
                    raise
        raise StopIteration

    def _next_many(self, n: int) -> list[Any]:
        while self._it is not None:
            out = self._it._next_many(n)
            if out or not self._switch():
                return out
        return []

    def get_state(self) -> dict[str, Any]:
        return {"index": self._index, "input": None if self._it is None else self._it.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("index", "input"), "concatenate")
        if self._it is not None:
            self._it.close()
        self._index = int(state["index"])
        if state["input"] is None:
            self._it = None
        else:
            self._it = self._inputs[self._index]._make_iterator(self._ctx)
            self._it.set_state(state["input"])

    def close(self) -> None:
        if self._it is not None:
            self._it.close()
