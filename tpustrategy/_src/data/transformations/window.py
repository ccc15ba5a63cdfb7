"""`Dataset.window`: a dataset of windows, each a nest of small datasets.

Window ``k`` holds the input elements ``k*shift + j*stride`` for ``j < size``;
it exists when its first element does (``k*shift < n``), and with
``drop_remainder`` only when it is full. An element of the result nests like
an input element, with a `WindowContent` dataset (the window's values of that
component) at every leaf — TensorFlow's nested structure of datasets, which
programs flatten with ``flat_map(lambda w: w.batch(size))``.

Checkpoints store no elements: the state is the input state recorded at the
first element of the next window (the *anchor*; one input ``get_state`` per
window) and the window count. A restored iterator re-reads at most one window
span, ``(size - 1) * stride + 1`` elements, whatever the position.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.args import as_bool, positive_int
from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.structure import (
    flatten,
    is_structure,
    spec_of,
    unflatten_as,
)

_API = "Dataset.window"


def window_cardinality(n: int, size: int, shift: int, stride: int, drop_remainder: bool) -> int:
    """TensorFlow's count of windows over ``n`` input elements."""
    if n in (INFINITE_CARDINALITY, UNKNOWN_CARDINALITY):
        return n
    if drop_remainder:
        rest = n - ((size - 1) * stride + 1)
        return 0 if rest < 0 else rest // shift + 1
    return n // shift + (0 if n % shift == 0 else 1)


class WindowContent(Dataset):
    """The values of one component of one window (a finite source dataset).

    Attributes:
      values: the window's values of this component, in order.
    """

    _params = ("values",)

    def __init__(self, values: list[Any], spec: Any = None):
        super().__init__(())
        self.values = values
        self._spec = spec

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        if self._spec is not None:
            return self._spec
        if not self.values:
            return None
        out = spec_of(self.values[0])
        for v in self.values[1:]:
            out = out.most_specific_common(spec_of(v)) or out
        return out

    def _compute_cardinality(self) -> int:
        return len(self.values)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _ListIterator(self.values)


class _ListIterator(NodeIterator):
    def __init__(self, values: list[Any]):
        self._values, self._i = values, 0

    def __next__(self) -> Any:
        i = self._i
        if i >= len(self._values):
            raise StopIteration
        self._i = i + 1
        return self._values[i]

    def _next_many(self, n: int) -> list[Any]:
        i = self._i
        self._i = min(len(self._values), i + n)
        return self._values[i : self._i]

    def _skip(self, n: int) -> int:
        k = max(0, min(n, len(self._values) - self._i))
        self._i += k
        return k

    def get_state(self) -> dict[str, Any]:
        return {"index": self._i}

    def set_state(self, state: dict[str, Any]) -> None:
        self._i = int(check_state(state, ("index",), "window content")["index"])


class WindowDataset(Dataset):
    """Sliding windows over the input.

    Attributes:
      size: elements per window.
      shift: input elements between the starts of consecutive windows.
      stride: input elements between consecutive elements of a window.
      drop_remainder: whether short windows at the end are dropped.
    """

    autoshard_pass_through = True
    _params = ("size", "shift", "stride", "drop_remainder")

    def __init__(self, input_dataset: Dataset, size: Any, shift: Any = None, stride: Any = 1, drop_remainder: Any = False):
        super().__init__((input_dataset,))
        self.size = positive_int(size, _API, "size", "window(size=4)")
        self.shift = self.size if shift is None else positive_int(shift, _API, "shift", "window(4, shift=2)")
        self.stride = positive_int(stride, _API, "stride", "window(4, stride=2)")
        self.drop_remainder = as_bool(drop_remainder, _API, "drop_remainder")

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        from tpustrategy._src.data.core.nested_spec import dataset_spec_nest

        spec = input_spec(self.inputs[0])
        return None if spec is None else dataset_spec_nest(spec)

    def _compute_cardinality(self) -> int:
        n = self.inputs[0].cardinality()
        return window_cardinality(n, self.size, self.shift, self.stride, self.drop_remainder)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        spec = self.inputs[0]._static_spec()
        return _WindowIterator(self, self.inputs[0]._make_iterator(ctx), spec)


class _Failed:
    """An input element whose production raised (TensorFlow skips it when the stride does)."""

    __slots__ = ("error",)

    def __init__(self, error: Exception):
        self.error = error


class _WindowIterator(NodeIterator):
    """Reads the input once, keeping the elements from the next window's start on."""

    def __init__(self, node: WindowDataset, it: NodeIterator, spec: Any):
        self._it = it
        self._size, self._shift, self._stride = node.size, node.shift, node.stride
        self._drop = node.drop_remainder
        self._span = (node.size - 1) * node.stride + 1
        self._leaf_specs = None if spec is None else flatten(spec)
        self._k = 0  # the next window
        self._pos = 0  # the input index of the next element read
        self._buf: collections.deque[Any] = collections.deque()  # indices [pos - len(buf), pos)
        self._anchors: dict[int, Any] = {}  # input state at future window starts
        self._input_done = False
        self._done = False

    def _start(self) -> int:
        return self._k * self._shift

    def _fill(self, upto: int) -> None:
        """Reads until the buffer covers input indices below ``upto`` (or the input ends).

        Reads in bulk up to the next possible window start, where the input
        state is recorded (the anchor a checkpoint restores from).
        """
        shift, start = self._shift, self._start()
        while not self._input_done and self._pos < upto:
            pos = self._pos
            if pos % shift == 0 and pos >= start:
                self._anchors[pos] = self._it.get_state()
            want = min(upto, (pos // shift + 1) * shift) - pos
            try:
                got = self._it._next_many(want)
            except Exception as e:  # kept in place: it only fails the windows that include it
                got = [_Failed(e)]
            if not got:
                self._input_done = True
                break
            self._buf.extend(got)
            self._pos += len(got)

    def _advance_to(self, start: int) -> None:
        """Drops buffered elements before ``start``, skipping unread ones up to it."""
        buf_start = self._pos - len(self._buf)
        drop = min(len(self._buf), max(0, start - buf_start))
        for _ in range(drop):
            self._buf.popleft()
        if self._pos < start and not self._input_done:
            gap = start - self._pos
            done = self._it._skip(gap)
            self._pos += done
            if done < gap:
                self._input_done = True
        for key in [a for a in self._anchors if a < start]:
            del self._anchors[key]

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        start = self._start()
        self._advance_to(start)
        self._fill(start + self._span)
        picked = list(self._buf)[: self._span : self._stride]
        if self._pos <= start or (self._drop and len(picked) < self._size):
            self._done = True
            raise StopIteration
        self._k += 1
        for x in picked:
            if type(x) is _Failed:
                raise x.error
        return self._make_window(picked)

    def _make_window(self, picked: list[Any]) -> Any:
        first = picked[0]
        if not is_structure(first):
            spec = self._leaf_specs[0] if self._leaf_specs else None
            return WindowContent(picked, spec)
        columns = [flatten(x) for x in picked]
        n = len(columns[0])
        specs = self._leaf_specs if self._leaf_specs and len(self._leaf_specs) == n else [None] * n
        return unflatten_as(first, [WindowContent([c[j] for c in columns], specs[j]) for j in range(n)])

    def get_state(self) -> dict[str, Any]:
        if self._done:
            return {"k": self._k, "anchor_at": self._pos, "input": None, "done": True}
        start = self._start()
        if self._pos <= start:
            anchor_at, anchor = self._pos, self._it.get_state()
        else:
            anchor_at, anchor = start, self._anchors[start]
        return {"k": self._k, "anchor_at": anchor_at, "input": anchor, "done": False}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("k", "anchor_at", "input", "done"), "window")
        self._k = int(state["k"])
        self._pos = int(state["anchor_at"])
        self._buf.clear()
        self._anchors.clear()
        self._input_done = False
        self._done = bool(state["done"])
        if not self._done:
            self._it.set_state(state["input"])

    def close(self) -> None:
        self._it.close()
