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

Checkpoints store no elements and cost the same at any position in an epoch.
The state holds the input position of every buffered element, the random
generator's state, and a recorded input state (the *anchor*) at or before the
oldest buffered element; restoring re-reads the input from the anchor, keeping
only the buffered elements and skipping the rest (``_skip``, which sources
and ``map`` do without producing elements). An element stays in the buffer
about ``buffer_size * ln(buffer_size)`` draws at most, so the re-read is
bounded by the buffer size, not by how far into the epoch the iterator is.
Anchors are recorded every ``max(buffer_size, 256)`` input elements.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state

_DRAWS = 1024
_MIN_ANCHOR_SPACING = 256


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
        # Input states are recorded every `_every` input elements, and the oldest one still
        # needed (at or before the oldest element in the buffer) is the restore anchor.
        self._every = max(buffer_size, _MIN_ANCHOR_SPACING)
        self._start(seed)
        self._anchors: collections.deque[tuple[int, Any]] = collections.deque([(0, self._it.get_state())])

    def _start(self, seed: list[int]) -> None:
        self._seed = [int(s) for s in seed]
        self._rng = np.random.default_rng(self._seed)
        self._block_state: dict[str, Any] | None = None
        self._draws: list[float] = []
        self._d = 0
        self._produced = 0
        self._buf: list[Any] = []
        self._ords: list[int] = []  # the input position of each buffer slot's element
        self._consumed = 0
        self._next_anchor = 0
        self._filled = False
        self._input_done = False

    def _fill(self) -> None:
        self._filled = True
        while len(self._buf) < self._size and not self._input_done:
            got = self._it._next_many(self._size - len(self._buf))
            if not got:
                self._input_done = True
            self._buf.extend(got)
        self._ords = list(range(len(self._buf)))
        self._consumed = len(self._buf)
        self._next_anchor = self._every

    def _record_anchor(self) -> None:
        """Keeps the newest recorded state at or before the oldest buffered element."""
        self._anchors.append((self._consumed, self._it.get_state()))
        self._next_anchor = self._consumed + self._every
        oldest = min(self._ords) if self._ords else self._consumed
        anchors = self._anchors
        while len(anchors) > 1 and anchors[1][0] <= oldest:
            anchors.popleft()

    def __next__(self) -> Any:
        if not self._filled:
            self._fill()
        buf = self._buf
        if not buf:
            raise StopIteration
        d = self._d
        if d >= len(self._draws):
            self._block_state = self._rng.bit_generator.state
            self._draws = self._rng.random(_DRAWS).tolist()
            d = 0
        i = int(self._draws[d] * len(buf))
        self._d = d + 1
        self._produced += 1
        x = buf[i]
        if not self._input_done:
            try:
                buf[i] = self._it.__next__()
            except StopIteration:
                self._input_done = True
            else:
                consumed = self._consumed
                self._ords[i] = consumed
                self._consumed = consumed + 1
                if consumed >= self._next_anchor:
                    self._record_anchor()
                return x
        buf[i] = buf[-1]
        buf.pop()
        ords = self._ords
        ords[i] = ords[-1]
        ords.pop()
        return x

    def get_state(self) -> dict[str, Any]:
        anchor_at, anchor = self._anchors[0]
        return {
            "seed": self._seed,
            "filled": self._filled,
            "anchor": anchor,
            "anchor_at": anchor_at,
            "consumed": self._consumed,
            "slots": list(self._ords),
            "input_done": self._input_done,
            "rng": _rng_to_json(self._block_state),
            "draw": self._d,
            "produced": self._produced,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if isinstance(state, dict) and "start" in state and "slots" not in state:
            self._set_replayed_state(state)
            return
        check_state(state, _STATE_KEYS, "shuffle")
        self._start(state["seed"])
        self._it.set_state(state["anchor"])
        anchor_at = int(state["anchor_at"])
        self._anchors = collections.deque([(anchor_at, state["anchor"])])
        self._produced = int(state["produced"])
        if not state["filled"]:
            return
        self._filled = True
        self._input_done = bool(state["input_done"])
        self._consumed = int(state["consumed"])
        self._ords = [int(o) for o in state["slots"]]
        self._buf, position = self._read_slots(anchor_at)
        if not self._input_done:
            self._it._skip(self._consumed - position)
        self._next_anchor = self._consumed + self._every - (self._consumed - anchor_at) % self._every
        if state["rng"] is not None:
            self._rng.bit_generator.state = _rng_from_json(state["rng"])
            self._block_state = self._rng.bit_generator.state
            self._draws = self._rng.random(_DRAWS).tolist()
        self._d = int(state["draw"])

    def _read_slots(self, anchor_at: int) -> tuple[list[Any], int]:
        """The buffered elements, re-read from the anchor, and the input position after them."""
        buf: list[Any] = [None] * len(self._ords)
        pos = anchor_at
        for slot in sorted(range(len(self._ords)), key=self._ords.__getitem__):
            ordinal = self._ords[slot]
            if ordinal > pos:
                pos += self._it._skip(ordinal - pos)
            try:
                buf[slot] = self._it.__next__()
            except StopIteration:
                raise ValueError(
                    f"set_state: the shuffle buffer held input element {ordinal}, but the input "
                    f"ended after {pos} elements: the state belongs to a different pipeline.\n"
                    "Fix: pass a state returned by get_state() of an iterator over the same pipeline."
                ) from None
            pos += 1
        return buf, pos

    def _set_replayed_state(self, state: dict[str, Any]) -> None:
        """States written before buffer positions were recorded: replay the draws."""
        check_state(state, ("seed", "start", "produced"), "shuffle")
        self._it.set_state(state["start"])
        self._start(state["seed"])
        self._anchors = collections.deque([(0, state["start"])])
        for _ in range(int(state["produced"])):
            try:
                self.__next__()
            except StopIteration:
                break

    def close(self) -> None:
        self._it.close()


_STATE_KEYS = ("seed", "filled", "anchor", "anchor_at", "consumed", "slots", "input_done", "rng",
               "draw", "produced")


def _rng_to_json(state: dict[str, Any] | None) -> dict[str, Any] | None:
    """A PCG64 state with its 128-bit integers as hex strings (portable JSON)."""
    if state is None:
        return None
    inner = state["state"]
    return {"bit_generator": state["bit_generator"], "state": hex(inner["state"]), "inc": hex(inner["inc"]),
            "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}


def _rng_from_json(saved: dict[str, Any]) -> dict[str, Any]:
    return {"bit_generator": saved["bit_generator"],
            "state": {"state": int(saved["state"], 16), "inc": int(saved["inc"], 16)},
            "has_uint32": int(saved["has_uint32"]), "uinteger": int(saved["uinteger"])}
