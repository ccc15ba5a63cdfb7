"""`Dataset.group_by_window`: groups elements by a key into windows, each reduced to a dataset.

TensorFlow's algorithm: ``key_func(*element)`` gives an int64 key; elements
join their key's group; a group holding ``window_size`` (or
``window_size_func(key)``) elements is flushed at once, which yields the
elements of ``reduce_func(key, window)`` (``window`` is a dataset of the
group's elements). When the input ends, the groups still open are flushed in
ascending key order. The cardinality is infinite for an infinite input and
unknown otherwise.

A checkpoint holds the input state, the open groups' elements (encoded with
`state_codec`; at most the number of keys times the window size, whatever the
position) and, while a group is being flushed, that group and the position in
its reduced dataset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.args import int_or_none, positive_int
from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.state_codec import decode, encode
from tpustrategy._src.data.core.structure import common_spec
from tpustrategy._src.data.transformations.map import call_fn, check_fn
from tpustrategy._src.data.transformations.window import WindowContent

_API = "Dataset.group_by_window"


def int64_key(value: Any, api: str, arg: str = "key_func") -> np.int64:
    """A key function's result as an int64 scalar (TensorFlow converts it with dtype int64)."""
    if isinstance(value, np.ndarray) and value.shape == () or isinstance(value, (int, np.integer)):
        key = int_or_none(value)
        if key is not None:
            return np.int64(key)
    raise ValueError(
        f"{api}: `{arg}` must return a single tf.int64 tensor; received "
        f"{type(value).__name__}: {value!r}.\nFix: return one integer scalar, e.g. lambda x: x % 2."
    )


class GroupByWindowDataset(Dataset):
    """Windows of elements with equal keys, each reduced by ``reduce_func``.

    Attributes:
      key_func: ``key_func(*element)`` -> int64 scalar.
      reduce_func: ``reduce_func(key, window_dataset)`` -> Dataset.
      window_size: the window size for every key (or None with ``window_size_func``).
      window_size_func: ``window_size_func(key)`` -> int64 scalar.
    """

    autoshard_pass_through = True
    _params = ("key_func", "reduce_func", "window_size", "window_size_func")

    def __init__(
        self,
        input_dataset: Dataset,
        key_func: Callable[..., Any],
        reduce_func: Callable[[Any, Dataset], Dataset],
        window_size: Any = None,
        window_size_func: Callable[[Any], Any] | None = None,
    ):
        super().__init__((input_dataset,))
        check_fn(key_func, _API, "key_func")
        check_fn(reduce_func, _API, "reduce_func")
        if (window_size is None) == (window_size_func is None):
            raise ValueError(
                f"{_API}: either the `window_size` argument or the `window_size_func` argument must be "
                f"specified; received window_size={window_size!r}, window_size_func={window_size_func!r}.\n"
                "Fix: pass exactly one, e.g. window_size=32."
            )
        if window_size is not None:
            size = int_or_none(window_size)
            if size is not None and size <= 0:
                raise ValueError(
                    f"{_API}: Window size must be greater than zero, but got {size}.\n"
                    "Fix: pass window_size >= 1."
                )
            window_size = positive_int(window_size, _API, "window_size", "group_by_window(f, g, window_size=32)")
        else:
            check_fn(window_size_func, _API, "window_size_func")
        self.key_func = key_func
        self.reduce_func = reduce_func
        self.window_size = window_size
        self.window_size_func = window_size_func

    def _size_for(self, key: np.int64) -> int:
        if self.window_size is not None:
            return self.window_size
        size = int(int64_key(self.window_size_func(key), _API, "window_size_func"))  # type: ignore[misc]
        if size <= 0:
            raise ValueError(
                f"{_API}: Window size must be greater than zero, but got {size} (window_size_func({int(key)})).\n"
                "Fix: make window_size_func return a positive size for every key."
            )
        return size

    def _reduce(self, key: np.int64, elements: list[Any], spec: Any) -> Dataset:
        out = self.reduce_func(key, WindowContent(elements, spec))
        if not isinstance(out, Dataset):
            raise TypeError(
                f"{_API}: `reduce_func` must return a `Dataset` object; received {type(out).__name__}.\n"
                "Fix: return a dataset built from the window, e.g. lambda key, window: window.batch(32)."
            )
        return out

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        spec = input_spec(self.inputs[0])
        if spec is None:
            return None
        # TensorFlow traces reduce_func with a symbolic key: sizes that depend on
        # the key are unknown. Two keys approximate that (dimensions that differ -> None).
        specs = []
        for key in (0, 1):
            try:
                specs.append(self._reduce(np.int64(key), [], spec)._static_spec())
            except Exception:
                break
        if not specs or specs[0] is None:
            return None
        if len(specs) == 1 or specs[1] is None:
            return specs[0]
        return common_spec(specs[0], specs[1])

    def _compute_cardinality(self) -> int:
        n = self.inputs[0].cardinality()
        return INFINITE_CARDINALITY if n == INFINITE_CARDINALITY else UNKNOWN_CARDINALITY

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return GroupByWindowIterator(self, self.inputs[0]._make_iterator(ctx), ctx)


class GroupByWindowIterator(NodeIterator):
    """Groups keyed elements; flushes one group at a time through its reduced dataset."""

    def __init__(self, node: GroupByWindowDataset, it: NodeIterator, ctx: IterContext):
        self._node, self._it, self._ctx = node, it, ctx
        self._spec = node.inputs[0]._static_spec()
        self._groups: dict[int, list[Any]] = {}
        self._sizes: dict[int, int] = {}
        self._input_done = False
        self._flush: tuple[int, list[Any]] | None = None  # the group being flushed
        self._inner: NodeIterator | None = None

    def _start_flush(self, key: int, elements: list[Any]) -> None:
        self._flush = (key, elements)
        ds = self._node._reduce(np.int64(key), elements, self._spec)
        self._inner = ds._make_iterator(self._ctx.fresh())

    def _end_flush(self) -> None:
        if self._inner is not None:
            self._inner.close()
        self._inner, self._flush = None, None

    def __next__(self) -> Any:
        while True:
            if self._inner is not None:
                try:
                    return self._inner.__next__()
                except StopIteration:
                    self._end_flush()
            if self._input_done:
                if not self._groups:
                    raise StopIteration
                key = min(self._groups)
                self._sizes.pop(key, None)
                self._start_flush(key, self._groups.pop(key))
                continue
            try:
                x = self._it.__next__()
            except StopIteration:
                self._input_done = True
                continue
            key = int(int64_key(call_fn(self._node.key_func, x), _API))
            group = self._groups.get(key)
            if group is None:
                self._sizes[key] = self._node._size_for(np.int64(key))
                group = self._groups[key] = []
            group.append(x)
            if len(group) >= self._sizes[key]:
                del self._groups[key]
                del self._sizes[key]
                self._start_flush(key, group)

    def get_state(self) -> dict[str, Any]:
        flush = None
        if self._flush is not None and self._inner is not None:
            key, elements = self._flush
            flush = {"key": key, "elements": [encode(e) for e in elements], "inner": self._inner.get_state()}
        return {
            "input": self._it.get_state(),
            "input_done": self._input_done,
            "groups": [[k, self._sizes.get(k, 0), [encode(e) for e in g]] for k, g in self._groups.items()],
            "flush": flush,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "input_done", "groups", "flush"), "group_by_window")
        self._end_flush()
        self._it.set_state(state["input"])
        self._input_done = bool(state["input_done"])
        self._groups = {int(k): [decode(e) for e in g] for k, _, g in state["groups"]}
        self._sizes = {int(k): int(s) for k, s, _ in state["groups"]}
        flush = state["flush"]
        if flush is not None:
            self._start_flush(int(flush["key"]), [decode(e) for e in flush["elements"]])
            self._inner.set_state(flush["inner"])  # type: ignore[union-attr]

    def close(self) -> None:
        self._end_flush()
        self._it.close()
