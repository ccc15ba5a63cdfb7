"""`Dataset.shard`: elements ``index, index + num_shards, index + 2 * num_shards, ...``.

``num_shards=SHARD_HINT`` is a placeholder the HINT auto-shard policy fills in;
left unfilled it passes every element through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state, pull
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, SHARD_HINT, UNKNOWN_CARDINALITY


def _check_int(value: Any, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"Dataset.shard: {arg} must be an int; received {type(value).__name__}: {value!r}.\n"
            "Fix: e.g. ds.shard(num_shards=num_workers, index=worker_index)."
        )
    return value


class ShardDataset(Dataset):
    """Every ``num_shards``-th element starting at ``index``.

    Attributes:
      num_shards: the number of shards (or SHARD_HINT).
      index: which shard this is.
    """

    _params = ("num_shards", "index")

    def __init__(self, input_dataset: Dataset, num_shards: int, index: int):
        super().__init__((input_dataset,))
        num_shards = _check_int(num_shards, "num_shards")
        index = _check_int(index, "index")
        if num_shards <= 0 and num_shards != SHARD_HINT:
            raise ValueError(
                f"Dataset.shard: num_shards must be greater than zero (currently num_shards = "
                f"{num_shards}).\nFix: pass the number of input pipelines, e.g. shard(2, 0)."
            )
        if num_shards != SHARD_HINT and not 0 <= index < num_shards:
            raise ValueError(
                f"Dataset.shard: index must be between 0 and {num_shards - 1} (currently "
                f"index = {index}).\nFix: pass an index in range(num_shards), e.g. the worker id."
            )
        self.num_shards = num_shards
        self.index = index

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        n = self.inputs[0].cardinality()
        if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY) or self.num_shards == SHARD_HINT:
            return n
        return n // self.num_shards + (1 if self.index < n % self.num_shards else 0)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        it = self.inputs[0]._make_iterator(ctx)
        if self.num_shards == SHARD_HINT:
            return _ShardIterator(it, 1, 0)
        return _ShardIterator(it, self.num_shards, self.index)


class _ShardIterator(NodeIterator):
    def __init__(self, it: NodeIterator, num_shards: int, index: int):
        self._it, self._k, self._index = it, num_shards, index
        self._pos = 0  # input elements consumed so far

    def __next__(self) -> Any:
        skip = (self._index - self._pos) % self._k
        if skip:
            got = self._it._skip(skip)
            self._pos += got
            if got < skip:
                raise StopIteration
        x = self._it.__next__()
        self._pos += 1
        return x

    def _next_many(self, n: int) -> list[Any]:
        k = self._k
        if k == 1:
            out = self._it._next_many(n)
            self._pos += len(out)
            return out
        offset = (self._index - self._pos) % k
        got = pull(self._it, offset + (n - 1) * k + 1)
        self._pos += len(got)
        return got[offset::k]

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "pos": self._pos}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "pos"), "shard")
        self._it.set_state(state["input"])
        self._pos = int(state["pos"])

    def close(self) -> None:
        self._it.close()
