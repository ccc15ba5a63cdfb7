"""`Dataset.take_while`: the elements before the first one for which a predicate is false."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.args import predicate_result
from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.transformations.map import call_fn, check_fn

_API = "Dataset.take_while"


class TakeWhileDataset(Dataset):
    """The input up to (not including) the first element failing ``predicate``.

    The cardinality is unknown (TensorFlow's rule): the predicate decides the length.

    Attributes:
      predicate: ``predicate(*element)`` for tuples, ``predicate(element)`` otherwise; a scalar bool.
    """

    autoshard_pass_through = True
    _params = ("predicate",)

    def __init__(self, input_dataset: Dataset, predicate: Callable[..., Any]):
        super().__init__((input_dataset,))
        check_fn(predicate, _API, "predicate")
        self.predicate = predicate

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _TakeWhileIterator(self.inputs[0]._make_iterator(ctx), self.predicate)


class _TakeWhileIterator(NodeIterator):
    def __init__(self, it: NodeIterator, predicate: Callable[..., Any]):
        self._it, self._pred = it, predicate
        self._done = False

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        x = self._it.__next__()
        if not predicate_result(call_fn(self._pred, x), _API):
            self._done = True
            raise StopIteration
        return x

    def get_state(self) -> dict[str, Any]:
        return {"input": None if self._done else self._it.get_state(), "done": self._done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "done"), "take_while")
        self._done = bool(state["done"])
        if not self._done:
            self._it.set_state(state["input"])

    def close(self) -> None:
        self._it.close()
