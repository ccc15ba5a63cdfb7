"""`Dataset.unique`: the first occurrence of every distinct element.

As in TensorFlow, elements must be a single int32, int64 or string component
(of any shape; two elements are the same when shape and values are). The seen
elements are kept in a set, so memory grows with the number of distinct
elements; a checkpoint stores them (with the input state) and is as large.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.state_codec import decode, encode
from tpustrategy._src.data.core.structure import OBJECT, TensorSpec, flatten, is_structure, spec_of

_API = "Dataset.unique"
_SUPPORTED = (np.dtype(np.int32), np.dtype(np.int64), OBJECT)


def _check_spec(spec: Any) -> None:
    leaves = flatten(spec)
    if is_structure(spec) or len(leaves) != 1 or not isinstance(leaves[0], TensorSpec) or leaves[0].dtype not in _SUPPORTED:
        got = spec if is_structure(spec) else getattr(spec, "dtype", spec)
        raise TypeError(
            f"{_API}: unique() only supports inputs with a single int32, int64, or string component; "
            f"received elements of type {got!r}.\n"
            "Fix: map the elements to one int32/int64/string component first (e.g. an id or a "
            "serialized key), or deduplicate with a filter that keeps its own set."
        )


def _key(x: Any) -> Any:
    if isinstance(x, bytes):
        return bytes(x)
    arr = np.asarray(x)
    if arr.dtype == OBJECT:
        return ("s", arr.shape, tuple(bytes(v) for v in arr.reshape(-1).tolist()))
    return (arr.dtype.str, arr.shape, arr.tobytes())


class UniqueDataset(Dataset):
    """The distinct elements of the input, in order of first occurrence."""

    autoshard_pass_through = True

    def __init__(self, input_dataset: Dataset):
        super().__init__((input_dataset,))
        spec = input_dataset._static_spec()
        if spec is not None:
            _check_spec(spec)

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _UniqueIterator(self.inputs[0]._make_iterator(ctx))


class _UniqueIterator(NodeIterator):
    def __init__(self, it: NodeIterator):
        self._it = it
        self._seen: set[Any] = set()
        self._kept: list[Any] = []  # the distinct elements, for checkpoints
        self._checked = False

    def __next__(self) -> Any:
        while True:
            x = self._it.__next__()
            if not self._checked:
                _check_spec(spec_of(x) if not is_structure(x) else x)
                self._checked = True
            key = _key(x)
            if key not in self._seen:
                self._seen.add(key)
                self._kept.append(x)
                return x

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "seen": [encode(x) for x in self._kept]}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "seen"), "unique")
        self._it.set_state(state["input"])
        self._kept = [decode(x) for x in state["seen"]]
        self._seen = {_key(x) for x in self._kept}
        self._checked = bool(self._kept)

    def close(self) -> None:
        self._it.close()
