"""Iterators: the protocol every transformation implements, and the public iterator.

Each dataset node builds a `NodeIterator` for one pass over its elements. The
protocol has a per-element path (``__next__``) and a bulk path
(``_next_many(n)``) that lets batch, prefetch and parallel map move whole
chunks at once: readers hand out slices of the records they decoded, range
hands out ``np.arange`` blocks, so the per-record cost of
``TFRecordDataset(...).batch(1024)`` stays a few list operations.

``_next_many(n)`` returns between 1 and ``n`` elements, or ``[]`` at the end
of the stream. A short list means nothing by itself (a chunk ended, or an
error is waiting to be raised by the next call); `pull` loops until it has
``n`` elements or the stream ends.

State: ``get_state()`` returns a JSON-able dict of counters and upstream
states (never element copies); ``set_state(state)`` on a fresh iterator of the
same pipeline resumes the stream exactly.

`DatasetIterator` is what ``iter(dataset)`` returns: it owns the tree of node
iterators, stops the pipeline after the first error (the error is raised once,
then ``StopIteration``), and shuts worker threads down on ``close()`` or when it
is garbage-collected.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tpustrategy._src.data.core.structure import concat_batches, stack

if TYPE_CHECKING:
    from tpustrategy._src.data.core.dataset import Dataset
    from tpustrategy._src.data.core.options import Options


class IterContext:
    """What a node iterator needs to know about the pass it belongs to.

    Attributes:
      options: the merged options of the whole pipeline.
      epochs: the root iteration number followed by the epoch of every
        enclosing ``repeat``; a shuffle with ``reshuffle_each_iteration`` mixes
        it into its seed, so every epoch gets a new order that a restored
        iterator reproduces.
    """

    __slots__ = ("options", "epochs")

    def __init__(self, options: Options, epochs: tuple[int, ...]):
        self.options = options
        self.epochs = epochs

    def child(self, epoch: int) -> IterContext:
        return IterContext(self.options, (*self.epochs, epoch))

    def fresh(self) -> IterContext:
        """Context for a dataset built inside ``flat_map``/``interleave`` (a new object in TF)."""
        return IterContext(self.options, ())


class NodeIterator(abc.ABC):
    """Base class of the iterator of one dataset node."""

    def __iter__(self) -> NodeIterator:
        return self

    @abc.abstractmethod
    def __next__(self) -> Any:
        """The next element; StopIteration at the end."""

    def _next_many(self, n: int) -> list[Any]:
        """Up to ``n`` elements (at least one unless the stream has ended).

        The caller must not modify the returned list: producers may hand out
        a list they still hold.
        """
        out = []
        append = out.append
        nxt = self.__next__
        try:
            for _ in range(n):
                append(nxt())
        except StopIteration:
            pass
        return out

    def _next_batch(self, n: int, api: str) -> tuple[int, Any] | None:
        """Up to ``n`` elements stacked into one batch, or None at the end.

        Sources that hold columns (range, from_tensor_slices, unbatch)
        override this to slice instead of stacking element by element.
        """
        elems = pull(self, n)
        if not elems:
            return None
        return len(elems), stack(elems, api)

    def _skip(self, n: int) -> int:
        """Discards up to ``n`` elements; returns how many were discarded."""
        done = 0
        while done < n:
            got = self._next_many(min(n - done, 4096))
            if not got:
                break
            done += len(got)
        return done

    @abc.abstractmethod
    def get_state(self) -> dict[str, Any]:
        """A JSON-able dict of this iterator's position."""

    @abc.abstractmethod
    def set_state(self, state: dict[str, Any]) -> None:
        """Moves a fresh iterator of the same pipeline to ``state``."""

    def close(self) -> None:
        """Releases threads and files held by this iterator and its inputs."""
        return None


def pull(it: NodeIterator, n: int) -> list[Any]:
    """Exactly ``n`` elements from ``it``, fewer only at the end of its stream."""
    out = it._next_many(n)
    if len(out) >= n or not out:
        return out
    parts, count = [out], len(out)
    while count < n:
        more = it._next_many(n - count)
        if not more:
            break
        parts.append(more)
        count += len(more)
    # Lists from _next_many may be shared with the producer: never extend them.
    return [x for part in parts for x in part]


def pull_batch(it: NodeIterator, n: int, api: str) -> tuple[int, Any] | None:
    """Exactly ``n`` stacked elements (fewer only at the end), or None."""
    got = it._next_batch(n, api)
    if got is None or got[0] >= n:
        return got
    count, parts = got[0], [got[1]]
    while count < n:
        more = it._next_batch(n - count, api)
        if more is None:
            break
        count += more[0]
        parts.append(more[1])
    return count, concat_batches(parts)


def check_state(state: Any, keys: Sequence[str], node: str) -> dict[str, Any]:
    """Validates that ``state`` is a dict with ``keys`` (for ``set_state``)."""
    if not isinstance(state, dict) or any(k not in state for k in keys):
        got = sorted(state) if isinstance(state, dict) else type(state).__name__
        raise ValueError(
            f"set_state: the state for the {node} iterator must be a dict with keys "
            f"{sorted(keys)}; received {got}.\n"
            "Fix: pass a state returned by get_state() of an iterator over the same pipeline."
        )
    return state


class DatasetIterator:
    """The iterator returned by ``iter(dataset)`` (checkpointable, closeable).

    Example:
      >>> it = iter(Dataset.range(5))
      >>> next(it); state = it.get_state()
      >>> it2 = iter(Dataset.range(5)); it2.set_state(state); list(it2)  # 1, 2, 3, 4
    """

    def __init__(self, dataset: Dataset, iteration: int):
        self._dataset = dataset
        self._options = dataset.options()
        self._iteration = iteration
        self._it: NodeIterator | None = None
        self._done = False

    def _tree(self) -> NodeIterator:
        if self._it is None:
            ctx = IterContext(self._options, (self._iteration,))
            self._it = self._dataset._make_iterator(ctx)
        return self._it

    def __iter__(self) -> DatasetIterator:
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        it = self._it if self._it is not None else self._tree()
        try:
            return it.__next__()
        except StopIteration:
            self._finish()
            raise
        except BaseException:
            self._finish()
            raise

    def _next_many(self, n: int) -> list[Any]:
        """Up to ``n`` elements; ``[]`` at the end (bulk path for input pipelines)."""
        if self._done:
            return []
        try:
            out = pull(self._tree(), n)
        except BaseException:
            self._finish()
            raise
        if not out:
            self._finish()
        return out

    def next(self) -> Any:
        """The next element (raises StopIteration at the end)."""
        return self.__next__()

    get_next = next

    def get_next_as_optional(self) -> Any:
        """The next element as an ``Optional`` (empty at the end of the stream)."""
        from tpustrategy._src.data.core.optional import get_next_as_optional

        return get_next_as_optional(self)

    def _finish(self) -> None:
        self._done = True
        self.close()

    def get_state(self) -> dict[str, Any]:
        """A JSON-able dict from which `set_state` resumes the stream exactly."""
        if self._done:
            return {"iteration": self._iteration, "done": True, "pipeline": None}
        return {"iteration": self._iteration, "done": False, "pipeline": self._tree().get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Moves this iterator to the position recorded in ``state``."""
        check_state(state, ("iteration", "done", "pipeline"), "Dataset")
        if self._it is not None:
            self._it.close()
            self._it = None
        self._iteration = int(state["iteration"])
        self._done = bool(state["done"])
        if not self._done:
            self._tree().set_state(state["pipeline"])

    # TensorFlow's checkpoint-style names.
    save = get_state
    restore = set_state

    def close(self) -> None:
        """Stops worker threads and closes files; further ``next`` calls end the stream."""
        it, self._it = self._it, None
        self._done = True
        if it is not None:
            it.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    @property
    def element_spec(self) -> Any:
        return self._dataset.element_spec


Iterator = DatasetIterator
"""``tf.data.Iterator``: the iterator of a dataset (here always `DatasetIterator`)."""

NumpyIterator = DatasetIterator
"""``tf.data.NumpyIterator``: what ``as_numpy_iterator()`` returns (here `DatasetIterator`: elements are NumPy)."""
