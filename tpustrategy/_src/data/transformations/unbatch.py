"""`Dataset.unbatch`: splits every element along its leading dimension."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.structure import (
    batch_size_of,
    flatten,
    has_sparse,
    is_structure,
    slice_leading,
    unbatch_spec,
    unflatten_as,
    unstack,
)

_API = "Dataset.unbatch"


class UnbatchDataset(Dataset):
    """The rows of every (batched) input element."""

    def __init__(self, input_dataset: Dataset):
        super().__init__((input_dataset,))
        spec = input_dataset._static_spec()
        if spec is not None and any(len(s.shape) == 0 for s in flatten(spec)):
            raise ValueError(
                f"{_API}: unbatching a dataset is only supported for rank >= 1; the elements "
                f"have spec {spec}.\nFix: only unbatch datasets whose components are batched, "
                "e.g. the output of batch(...)."
            )

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        spec = input_spec(self.inputs[0])
        return None if spec is None else unbatch_spec(spec)

    def _known_batch_size(self) -> int | None:
        spec = self.inputs[0]._static_spec()
        if spec is None:
            return None
        sizes = {s.shape[0] if s.shape else None for s in flatten(spec)}
        return sizes.pop() if len(sizes) == 1 else None

    def _compute_cardinality(self) -> int:
        n = self.inputs[0].cardinality()
        if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
            return n
        size = self._known_batch_size()
        return UNKNOWN_CARDINALITY if size is None else n * size

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _UnbatchIterator(self.inputs[0]._make_iterator(ctx))


class _UnbatchIterator(NodeIterator):
    def __init__(self, it: NodeIterator):
        self._it = it
        self._batch: Any = None
        self._leaves: list[Any] = []
        self._n = 0
        self._pos = 0
        self._batch_state: Any = None
        self._sparse = False

    def _load(self) -> bool:
        while True:
            state = self._it.get_state()
            try:
                batch = self._it.__next__()
            except StopIteration:
                self._batch, self._n, self._pos, self._batch_state = None, 0, 0, state
                return False
            n = batch_size_of(batch, _API)
            self._batch_state = state
            self._batch, self._n, self._pos = batch, n, 0
            self._leaves = flatten(batch)
            self._sparse = has_sparse(batch)
            if n:
                return True

    def __next__(self) -> Any:
        if self._pos >= self._n and not self._load():
            raise StopIteration
        i = self._pos
        self._pos = i + 1
        if self._sparse:
            return unstack(self._batch, i, i + 1)[0]
        if not is_structure(self._batch):
            return self._batch[i]
        return unflatten_as(self._batch, [leaf[i] for leaf in self._leaves])

    def _next_many(self, n: int) -> list[Any]:
        if self._pos >= self._n and not self._load():
            return []
        i = self._pos
        j = min(self._n, i + n)
        self._pos = j
        return unstack(self._batch, i, j)

    def _next_batch(self, n: int, api: str) -> tuple[int, Any] | None:
        if self._pos >= self._n and not self._load():
            return None
        i = self._pos
        j = min(self._n, i + n)
        self._pos = j
        return j - i, slice_leading(self._batch, i, j)

    def get_state(self) -> dict[str, Any]:
        if self._batch_state is None:
            return {"input": self._it.get_state(), "pos": 0, "loaded": False}
        return {"input": self._batch_state, "pos": self._pos, "loaded": self._batch is not None}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "pos", "loaded"), "unbatch")
        self._it.set_state(state["input"])
        self._batch, self._n, self._pos, self._batch_state = None, 0, 0, None
        if state["loaded"]:
            self._load()
            self._pos = int(state["pos"])

    def close(self) -> None:
        self._it.close()
