"""`Dataset.interleave`: cycles over several inner datasets, a block at a time.

TensorFlow's order, exactly: up to ``cycle_length`` inner iterators are open;
``block_length`` consecutive elements are taken from the current one before
moving to the next; an exhausted one is replaced, in its place in the cycle,
by ``fn`` of the next input element. With ``num_parallel_calls`` each open
inner iterator runs in a worker thread that fills a buffer with chunks, and
the output order stays the same.

A checkpoint stores, per open slot, the input's state just before the element
that opened it and the inner iterator's state; restoring re-reads that one
input element and reopens the slot.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import AUTOTUNE
from tpustrategy._src.data.parallel.threads import (
    BackgroundIterator,
    cpu_count,
    resolve_parallelism,
)
from tpustrategy._src.data.transformations.flat_map import inner_spec, make_inner
from tpustrategy._src.data.transformations.map import check_deterministic, check_fn


def _check_length(value: Any, arg: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"Dataset.interleave: {arg} must be an int; received {type(value).__name__}: {value!r}.\n"
            f"Fix: pass a positive int{' or AUTOTUNE' if arg == 'cycle_length' else ''}."
        )
    if value == AUTOTUNE and arg == "cycle_length":
        return value
    if value <= 0:
        raise ValueError(
            f"Dataset.interleave: {arg} must be greater than zero; received {arg}={value}.\n"
            f"Fix: pass a positive int{' or AUTOTUNE' if arg == 'cycle_length' else ''}."
        )
    return value


def default_cycle_length(num_parallel_calls: int | None) -> int:
    """TensorFlow's ``cycle_length`` when it is None / AUTOTUNE (its interleave kernels' rule).

    Sequential: the CPU count. ``num_parallel_calls=n``: ``min(n, CPUs)``.
    ``num_parallel_calls=AUTOTUNE``: ``ceil(CPUs / 17)`` (one cycle element per 16 prefetch
    threads + 1), so 1 on hosts with up to 17 cores: the inner datasets come one after another.
    """
    cpus = cpu_count()
    if num_parallel_calls is None:
        return cpus
    if num_parallel_calls == AUTOTUNE:
        return -(-cpus // 17)
    return max(1, min(int(num_parallel_calls), cpus))


class InterleaveDataset(Dataset):
    """Interleaves the datasets ``fn(element)``.

    Attributes:
      fn: the function returning a Dataset (callable on a sample element).
      cycle_length: the number of inner datasets open at once (None/AUTOTUNE: `default_cycle_length`).
      block_length: consecutive elements taken from each (default 1).
      num_parallel_calls: None (inline) or the parallelism (threads per open slot).
      deterministic: accepted; the order is always kept.
    """

    _params = ("fn", "cycle_length", "block_length", "num_parallel_calls", "deterministic")

    def __init__(
        self,
        input_dataset: Dataset,
        fn: Callable[..., Dataset],
        cycle_length: int | None,
        block_length: int | None,
        num_parallel_calls: int | None,
        deterministic: bool | None,
    ):
        super().__init__((input_dataset,))
        check_fn(fn, "Dataset.interleave")
        self.fn = fn
        self.cycle_length = _check_length(cycle_length, "cycle_length")
        self.block_length = _check_length(block_length, "block_length")
        resolve_parallelism(num_parallel_calls, "Dataset.interleave")
        check_deterministic(deterministic, "Dataset.interleave")
        self.num_parallel_calls = num_parallel_calls
        self.deterministic = deterministic

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return inner_spec(self.fn, input_spec(self.inputs[0]))

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        cycle = self._cycle()
        fn, source = self.fn, self.inputs[0]

        def open_inner(element: Any) -> NodeIterator:
            return make_inner(fn, element, "Dataset.interleave")._make_iterator(ctx.fresh())

        return InterleaveIterator(
            source._make_iterator(ctx),
            lambda: source._make_iterator(ctx),
            open_inner,
            cycle,
            self.block_length or 1,
            parallel=self.num_parallel_calls is not None,
        )


    def _cycle(self) -> int:
        cycle = self.cycle_length
        return default_cycle_length(self.num_parallel_calls) if cycle is None or cycle == AUTOTUNE else cycle

    def _record_feed(self, ctx: IterContext, batch_size: int) -> Callable[[Any], NodeIterator | None]:
        """For a fused ``map(fn).batch(batch_size)`` over this interleave: makes, at an interleave
        state, a feed of byte ranges of records, in this interleave's order, that worker processes
        read themselves -- where the inner datasets are readers that can be read by ranges (the inner
        dataset of one of the elements at that state says: its ``_interleave_record_feed``); else
        None (the records are read here)."""
        cycle, fn, source = self._cycle(), self.fn, self.inputs[0]

        def new_input() -> NodeIterator:
            return source._make_iterator(ctx)

        def open_inner(element: Any) -> Dataset:
            return make_inner(fn, element, "Dataset.interleave")

        def make(state: Any) -> NodeIterator | None:
            slot = next((s for s in state["slots"] if s is not None), None)
            if slot is None and state["input_done"]:
                return None
            peek = new_input()  # an element whose inner dataset is open, or comes next, says what it is
            try:
                peek.set_state(slot["outer"] if slot is not None else state["input"])
                feed_of = getattr(open_inner(peek.__next__()), "_interleave_record_feed", None)
            except Exception:  # the end, or an error the interleave reports in its place
                return None
            finally:
                peek.close()
            if feed_of is None:
                return None
            return feed_of(ctx, new_input, open_inner, cycle, self.block_length or 1,  # type: ignore[no-any-return]
                           batch_size, self.num_parallel_calls is not None, state)

        return make


class InterleaveIterator(NodeIterator):
    """The interleave loop over an input iterator and an inner-iterator opener.

    Args:
      it: the input iterator.
      new_input: makes a fresh input iterator (used to restore slots).
      open_inner: makes the inner iterator for one input element.
      cycle_length, block_length: as in ``Dataset.interleave``.
      parallel: run every open inner iterator in a worker thread.
    """

    def __init__(
        self,
        it: NodeIterator,
        new_input: Callable[[], NodeIterator],
        open_inner: Callable[[Any], NodeIterator],
        cycle_length: int,
        block_length: int,
        parallel: bool,
    ):
        self._it, self._new_input, self._open = it, new_input, open_inner
        self._cycle, self._block, self._parallel = cycle_length, block_length, parallel
        self._slots: list[list[Any] | None] = [None] * cycle_length  # [iterator, outer state]
        # Parallel mode opens (and starts) the next input elements' iterators
        # early, so that every slot reads concurrently; they join the cycle in
        # TensorFlow's order when the cycle reaches an empty slot.
        self._future: collections.deque[list[Any]] = collections.deque()
        self._ci = 0
        self._bi = 0
        self._input_done = False
        self._pending: BaseException | None = None

    def _wrap(self, inner: NodeIterator) -> NodeIterator:
        return BackgroundIterator(inner, None, name="tpsd-interleave") if self._parallel else inner

    def _top_up(self) -> None:
        open_count = sum(s is not None for s in self._slots)
        while not self._input_done and open_count + len(self._future) < self._cycle:
            state = self._it.get_state()
            try:
                x = self._it.__next__()
            except StopIteration:
                self._input_done = True
                break
            inner = self._wrap(self._open(x))
            inner.start()  # type: ignore[attr-defined]
            self._future.append([inner, state])

    def _advance(self) -> None:
        self._ci = (self._ci + 1) % self._cycle
        self._bi = 0

    def _next_many(self, n: int) -> list[Any]:
        if self._pending is not None:
            err, self._pending = self._pending, None
            raise err
        out: list[Any] = []
        slots = self._slots
        try:
            if self._parallel:
                self._top_up()
            while len(out) < n:
                slot = slots[self._ci]
                if slot is not None:
                    got = slot[0]._next_many(min(n - len(out), self._block - self._bi))
                    if got:
                        out += got
                        self._bi += len(got)
                        if self._bi >= self._block:
                            self._advance()
                    else:
                        slot[0].close()
                        slots[self._ci] = None
                        self._advance()
                        if self._parallel:
                            self._top_up()
                elif self._future:
                    slots[self._ci] = self._future.popleft()
                elif not self._input_done:
                    state = self._it.get_state()
                    try:
                        x = self._it.__next__()
                    except StopIteration:
                        self._input_done = True
                        continue
                    slots[self._ci] = [self._wrap(self._open(x)), state]
                elif any(s is not None for s in slots):
                    self._advance()
                else:
                    break
        except BaseException as e:
            if not out:
                raise
            self._pending = e
        return out

    def __next__(self) -> Any:
        out = self._next_many(1)
        if not out:
            raise StopIteration
        return out[0]

    def get_state(self) -> dict[str, Any]:
        if self._future:
            # Elements opened early are not in the cycle yet: resume before them.
            head = {"input": self._future[0][1], "input_done": False}
        else:
            head = {"input": self._it.get_state(), "input_done": self._input_done}
        return {
            **head,
            "cycle": self._ci,
            "block": self._bi,
            "slots": [None if s is None else {"outer": s[1], "inner": s[0].get_state()} for s in self._slots],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "input_done", "cycle", "block", "slots"), "interleave")
        if len(state["slots"]) != self._cycle:
            raise ValueError(
                f"set_state: the interleave state has {len(state['slots'])} slots but this "
                f"interleave has cycle_length={self._cycle}.\n"
                "Fix: restore a state saved from the same pipeline on a machine with the same "
                "CPU count, or pass an explicit cycle_length."
            )
        self._close_slots()
        self._pending = None
        self._it.set_state(state["input"])
        self._input_done = bool(state["input_done"])
        self._ci, self._bi = int(state["cycle"]), int(state["block"])
        for i, s in enumerate(state["slots"]):
            if s is None:
                continue
            source = self._new_input()
            try:
                source.set_state(s["outer"])
                x = source.__next__()
            finally:
                source.close()
            inner = self._wrap(self._open(x))
            inner.set_state(s["inner"])
            self._slots[i] = [inner, s["outer"]]

    def _close_slots(self) -> None:
        while self._future:
            self._future.popleft()[0].close()
        for i, s in enumerate(self._slots):
            if s is not None:
                s[0].close()
                self._slots[i] = None

    def close(self) -> None:
        self._close_slots()
        self._it.close()
