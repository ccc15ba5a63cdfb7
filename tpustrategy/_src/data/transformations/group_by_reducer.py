"""``tf.data.experimental.group_by_reducer``: one reduced value per key.

A `Reducer` holds ``init_func(key) -> state``, ``reduce_func(state, element)
-> state`` and ``finalize_func(state) -> output`` (``finalize_func(*state)``
for a tuple state). The input is read to its end; then one output per key is
produced, in the order the keys first appeared (TensorFlow's order). The
per-key states keep their initial structure and dtypes (`scan`'s rule).

A checkpoint holds the input state and every key's state (see `state_codec`):
its size grows with the number of keys, not with the position.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.state_codec import decode, encode
from tpustrategy._src.data.core.string_scalar import unwrap
from tpustrategy._src.data.core.structure import flatten, is_structure, unflatten_as
from tpustrategy._src.data.transformations.group_by_window import int64_key
from tpustrategy._src.data.transformations.map import call_fn, check_fn
from tpustrategy._src.data.transformations.scan import check_new_state, to_state

_API = "group_by_reducer"


@dataclasses.dataclass(frozen=True)
class Reducer:
    """The three functions of a per-key reduction (``tf.data.experimental.Reducer``).

    Attributes:
      init_func: ``init_func(key)`` -> the initial state of a key.
      reduce_func: ``reduce_func(state, element)`` -> the new state.
      finalize_func: ``finalize_func(state)`` -> the output for a key.
    """

    init_func: Callable[[Any], Any]
    reduce_func: Callable[[Any, Any], Any]
    finalize_func: Callable[..., Any]

    def __post_init__(self) -> None:
        for name in ("init_func", "reduce_func", "finalize_func"):
            check_fn(getattr(self, name), "Reducer", name)


class GroupByReducerDataset(Dataset):
    """One output per key: ``finalize_func`` of the key's reduced state.

    Attributes:
      key_func: ``key_func(*element)`` -> int64 scalar.
      reducer: the `Reducer`.
    """

    autoshard_pass_through = True
    _params = ("key_func", "reducer")

    def __init__(self, input_dataset: Dataset, key_func: Callable[..., Any], reducer: Reducer):
        super().__init__((input_dataset,))
        check_fn(key_func, _API, "key_func")
        if not isinstance(reducer, Reducer):
            raise TypeError(
                f"{_API}: reducer must be a tpsd.experimental.Reducer; received {type(reducer).__name__}.\n"
                "Fix: Reducer(init_func=..., reduce_func=..., finalize_func=...)."
            )
        self.key_func = key_func
        self.reducer = reducer
        self._check_on_placeholders()

    def _check_on_placeholders(self) -> None:
        from tpustrategy._src.data.transformations.dummy_element import dummy_element

        spec = self.inputs[0]._static_spec()
        if spec is None:
            return
        element = dummy_element(spec, 2, 0)
        try:
            key = call_fn(self.key_func, element)
        except Exception:
            return
        key = int64_key(key, _API)
        try:
            state = self._init(key)
            new = self.reducer.reduce_func(state, element)
        except Exception:
            return
        check_new_state(_API, "reduce_func", state, new)

    def _init(self, key: np.int64) -> Any:
        return to_state(self.reducer.init_func(key))

    def _finalize(self, state: Any) -> Any:
        out = self.reducer.finalize_func(*state) if type(state) is tuple else self.reducer.finalize_func(state)
        return tuple(out) if type(out) is list else unwrap(out)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _GroupByReducerIterator(self, self.inputs[0]._make_iterator(ctx))


class _GroupByReducerIterator(NodeIterator):
    def __init__(self, node: GroupByReducerDataset, it: NodeIterator):
        self._node, self._it = node, it
        self._states: dict[int, Any] = {}
        self._input_done = False
        self._emitted = 0

    def __next__(self) -> Any:
        node = self._node
        while not self._input_done:
            try:
                x = self._it.__next__()
            except StopIteration:
                self._input_done = True
                break
            key = int(int64_key(call_fn(node.key_func, x), _API))
            state = self._states.get(key)
            if state is None:
                state = node._init(np.int64(key))
            self._states[key] = check_new_state(_API, "reduce_func", state, node.reducer.reduce_func(state, x))
        keys = list(self._states)
        if self._emitted >= len(keys):
            raise StopIteration
        key = keys[self._emitted]
        self._emitted += 1
        return node._finalize(self._states[key])

    def get_state(self) -> dict[str, Any]:
        return {
            "input": self._it.get_state(),
            "input_done": self._input_done,
            "states": [[k, encode(s)] for k, s in self._states.items()],
            "emitted": self._emitted,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "input_done", "states", "emitted"), _API)
        self._it.set_state(state["input"])
        self._input_done = bool(state["input_done"])
        self._states = {}
        for k, s in state["states"]:
            value = decode(s)
            template = self._node._init(np.int64(k))
            self._states[int(k)] = unflatten_as(template, flatten(value)) if is_structure(template) else value
        self._emitted = int(state["emitted"])

    def close(self) -> None:
        self._it.close()
