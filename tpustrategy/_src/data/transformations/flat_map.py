"""`Dataset.flat_map`: concatenates the datasets ``fn(element)``.

``fn`` is kept on the node, so graph passes can call it on a sample element
(e.g. a file name) to discover the dataset it builds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.transformations.dummy_element import dummy_element
from tpustrategy._src.data.transformations.map import call_fn, check_fn


def make_inner(fn: Callable[..., Any], element: Any, api: str) -> Dataset:
    """``fn(element)``, checked to be a Dataset."""
    ds = call_fn(fn, element)
    if not isinstance(ds, Dataset):
        raise TypeError(
            f"{api}: the `map_func` argument must return a `Dataset` object. Got "
            f"{type(ds)}.\nFix: return a dataset, e.g. lambda x: Dataset.from_tensors(x).repeat(2)."
        )
    return ds


def inner_spec(fn: Callable[..., Any], input_spec: Any) -> Any | None:
    """The element spec of ``fn(placeholder)``, or None when it cannot be found statically."""
    if input_spec is None:
        return None
    try:
        ds = call_fn(fn, dummy_element(input_spec, 2))
    except Exception:
        return None
    return ds._static_spec() if isinstance(ds, Dataset) else None


class FlatMapDataset(Dataset):
    """The concatenation of ``fn(element)`` over the input.

    Attributes:
      fn: the function returning a Dataset.
    """

    _params = ("fn",)

    def __init__(self, input_dataset: Dataset, fn: Callable[..., Dataset]):
        super().__init__((input_dataset,))
        check_fn(fn, "Dataset.flat_map")
        self.fn = fn

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return inner_spec(self.fn, input_spec(self.inputs[0]))

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _FlatMapIterator(self.inputs[0]._make_iterator(ctx), self.fn, ctx)


class _FlatMapIterator(NodeIterator):
    def __init__(self, it: NodeIterator, fn: Callable[..., Dataset], ctx: IterContext):
        self._it, self._fn, self._ctx = it, fn, ctx
        self._inner: NodeIterator | None = None
        self._outer_state: Any = None

    def _open_next(self) -> bool:
        state = self._it.get_state()
        try:
            x = self._it.__next__()
        except StopIteration:
            return False
        self._outer_state = state
        self._inner = make_inner(self._fn, x, "Dataset.flat_map")._make_iterator(self._ctx.fresh())
        return True

    def __next__(self) -> Any:
        while True:
            if self._inner is None and not self._open_next():
                raise StopIteration
            try:
                return self._inner.__next__()  # type: ignore[union-attr]
            except StopIteration:
                self._inner.close()  # type: ignore[union-attr]
                self._inner = None

    def _next_many(self, n: int) -> list[Any]:
        while True:
            if self._inner is None and not self._open_next():
                return []
            out = self._inner._next_many(n)  # type: ignore[union-attr]
            if out:
                return out
            self._inner.close()  # type: ignore[union-attr]
            self._inner = None

    def get_state(self) -> dict[str, Any]:
        if self._inner is None:
            return {"input": self._it.get_state(), "inner": None}
        return {"input": self._outer_state, "inner": self._inner.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "inner"), "flat_map")
        if self._inner is not None:
            self._inner.close()
            self._inner = None
        self._it.set_state(state["input"])
        if state["inner"] is not None:
            if not self._open_next():
                raise ValueError("set_state: the flat_map input ended before the saved position.")
            self._inner.set_state(state["inner"])  # type: ignore[union-attr]

    def close(self) -> None:
        if self._inner is not None:
            self._inner.close()
        self._it.close()
