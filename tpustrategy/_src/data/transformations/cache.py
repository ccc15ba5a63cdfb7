"""`Dataset.cache`: keep the elements of the first complete pass, replay them later.

The first pass that reaches the end publishes its elements on the node; later
passes (for instance the next epochs of a ``repeat``) read them instead of
recomputing the input, so they see the first pass's order even after a
shuffle. The cache is kept in memory (a ``filename`` is accepted and also kept
in memory).

Checkpoints hold no elements: a pass that is writing records the input's state
at its start and how many elements it has taken; a pass that is reading
records the same start state, the writer's iteration context and its
position. A restored iterator in a fresh process rebuilds the cache by
replaying the input from that start state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state


class _Store:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.elements: list[Any] | None = None
        self.start: Any = None
        self.epochs: list[int] = []


class CacheDataset(Dataset):
    """Caches the input's elements after the first complete pass.

    Attributes:
      filename: the cache file name given ('' for memory; both are kept in memory).
    """

    _params = ("filename",)

    def __init__(self, input_dataset: Dataset, filename: str = ""):
        super().__init__((input_dataset,))
        if not isinstance(filename, str):
            raise TypeError(
                f"Dataset.cache: filename must be a str; received {type(filename).__name__}: {filename!r}."
            )
        self.filename = filename
        self._store = _Store()

    def _reset(self) -> None:
        self._store = _Store()

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _compute_cardinality(self) -> int:
        return self.inputs[0].cardinality()

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _CacheIterator(self, ctx)


class _CacheIterator(NodeIterator):
    def __init__(self, node: CacheDataset, ctx: IterContext):
        self._node, self._ctx, self._store = node, ctx, node._store
        self._it: NodeIterator | None = None
        self._index = 0
        self._buf: list[Any] = []
        self._start: Any = None
        self._epochs: list[int] = list(ctx.epochs)
        self._reading = self._store.elements is not None
        if not self._reading:
            self._it = node.inputs[0]._make_iterator(ctx)
            self._start = self._it.get_state()

    def _publish(self) -> None:
        with self._store.lock:
            if self._store.elements is None:
                self._store.elements = self._buf
                self._store.start = self._start
                self._store.epochs = self._epochs
        if self._it is not None:
            self._it.close()
            self._it = None

    def _next_many(self, n: int) -> list[Any]:
        if self._reading:
            elems = self._store.elements
            assert elems is not None
            out = elems[self._index : self._index + n]
            self._index += len(out)
            return out
        if self._it is None:
            return []
        out = self._it._next_many(n)
        if out:
            self._buf.extend(out)
            self._index += len(out)
        else:
            self._publish()
        return out

    def __next__(self) -> Any:
        out = self._next_many(1)
        if not out:
            raise StopIteration
        return out[0]

    def get_state(self) -> dict[str, Any]:
        if self._reading:
            return {"mode": "read", "start": self._store.start, "epochs": self._store.epochs, "index": self._index}
        return {"mode": "write", "start": self._start, "epochs": self._epochs, "index": self._index}

    def _replay(self, start: Any, epochs: list[int], count: int | None) -> tuple[NodeIterator, list[Any]]:
        ctx = IterContext(self._ctx.options, tuple(epochs))
        it = self._node.inputs[0]._make_iterator(ctx)
        it.set_state(start)
        buf: list[Any] = []
        while count is None or len(buf) < count:
            got = it._next_many(4096 if count is None else min(4096, count - len(buf)))
            if not got:
                break
            buf.extend(got)
        return it, buf

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("mode", "start", "epochs", "index"), "cache")
        self.close()
        self._index = int(state["index"])
        if state["mode"] == "read":
            self._reading = True
            if self._store.elements is None:
                it, buf = self._replay(state["start"], state["epochs"], None)
                it.close()
                with self._store.lock:
                    if self._store.elements is None:
                        self._store.elements, self._store.start = buf, state["start"]
                        self._store.epochs = list(state["epochs"])
            return
        self._reading = False
        self._start, self._epochs = state["start"], list(state["epochs"])
        self._it, self._buf = self._replay(self._start, self._epochs, self._index)

    def close(self) -> None:
        if self._it is not None:
            self._it.close()
            self._it = None
