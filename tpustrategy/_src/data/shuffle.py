"""`Dataset.shuffle`: uniform sampling from a buffer of upcoming elements.

The buffer is filled with ``buffer_size`` elements; each output is a uniformly
chosen buffer slot, refilled with the next input element (TensorFlow's
algorithm). ``buffer_size`` 1 keeps the order; a buffer as large as the
dataset gives a uniform permutation.

Seeds: with ``seed=None`` a random seed is drawn when the dataset is built, so
every iteration of the same object is reproducible from its checkpoint. With
``reshuffle_each_iteration`` the seed of a pass mixes in the iteration context
(the root iteration and the epoch of every enclosing ``repeat``), so each epoch
gets a new order.

Checkpoints: the state is the input's state when the buffer started filling,
the seed, and the number of elements produced since. Restoring replays that
many draws, which is exact and stores no elements (the cost is re-reading the
epoch up to that point).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.dataset import Dataset
from tpustrategy._src.data.iterator import IterContext, NodeIterator, check_state

_DRAWS = 1024


def _check_int(value: Any, arg: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(
            f"Dataset.shuffle: {arg} must be an int; received {type(value).__name__}: {value!r}.\n"
            "Fix: e.g. shuffle(buffer_size=10_000, seed=42)."
        )
    if value < minimum:
        raise ValueError(
            f"Dataset.shuffle: {arg} must be >= {minimum}; received {arg}={value}.\n"
            "Fix: use a buffer of at least 1 element (1 keeps the input order)."
        )
    return int(value)


class ShuffleDataset(Dataset):
    """Shuffles with a buffer.

    Attributes:
      buffer_size: the number of elements sampled from.
      seed: the seed given (None if it was drawn at random).
      reshuffle_each_iteration: whether each pass/epoch gets a new order.
    """

    _params = ("buffer_size", "seed", "reshuffle_each_iteration")

    def __init__(self, input_dataset: Dataset, buffer_size: int, seed: int | None, reshuffle_each_iteration: bool):
        super().__init__((input_dataset,))
        self.buffer_size = _check_int(buffer_size, "buffer_size", 1)
        if seed is not None:
            _check_int(seed, "seed", 0)
        if not isinstance(reshuffle_each_iteration, bool):
            raise TypeError(
                "Dataset.shuffle: reshuffle_each_iteration must be a bool; received "
                f"{type(reshuffle_each_iteration).__name__}: {reshuffle_each_iteration!r}."
            )
        self.seed = seed
        self.reshuffle_each_iteration = reshuffle_each_iteration
        self._base_seed = int(seed) if seed is not None else int(np.random.SeedSequence().entropy % (2**63))

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        return self.inputs[0].cardinality()

    def _seed_for(self, ctx: IterContext) -> list[int]:
        if self.reshuffle_each_iteration:
            return [self._base_seed, *ctx.epochs]
        return [self._base_seed]

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _ShuffleIterator(self.inputs[0], ctx, self.buffer_size, self._seed_for(ctx))


class _ShuffleIterator(NodeIterator):
    def __init__(self, dataset: Dataset, ctx: IterContext, buffer_size: int, seed: list[int]):
        self._ds, self._ctx, self._size = dataset, ctx, buffer_size
        self._it = dataset._make_iterator(ctx)
        self._start(seed, self._it.get_state())

    def _start(self, seed: list[int], start_state: Any) -> None:
        self._seed = [int(s) for s in seed]
        self._rng = np.random.default_rng(self._seed)
        self._draws: list[float] = []
        self._d = 0
        self._start_state = start_state
        self._produced = 0
        self._buf: list[Any] = []
        self._filled = False
        self._input_done = False

    def _fill(self) -> None:
        self._filled = True
        while len(self._buf) < self._size and not self._input_done:
            got = self._it._next_many(self._size - len(self._buf))
            if not got:
                self._input_done = True
            self._buf.extend(got)

    def __next__(self) -> Any:
        if not self._filled:
            self._fill()
        buf = self._buf
        if not buf:
            raise StopIteration
        if self._d >= len(self._draws):
            self._draws = self._rng.random(_DRAWS).tolist()
            self._d = 0
        i = int(self._draws[self._d] * len(buf))
        self._d += 1
        x = buf[i]
        replaced = False
        if not self._input_done:
            try:
                buf[i] = self._it.__next__()
                replaced = True
            except StopIteration:
                self._input_done = True
        if not replaced:
            buf[i] = buf[-1]
            buf.pop()
        self._produced += 1
        return x

    def get_state(self) -> dict[str, Any]:
        return {"seed": self._seed, "start": self._start_state, "produced": self._produced}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("seed", "start", "produced"), "shuffle")
        self._it.set_state(state["start"])
        self._start(state["seed"], state["start"])
        for _ in range(int(state["produced"])):
            try:
                self.__next__()
            except StopIteration:
                break

    def close(self) -> None:
        self._it.close()
