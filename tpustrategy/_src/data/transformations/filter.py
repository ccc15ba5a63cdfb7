"""`Dataset.filter`: the elements for which a predicate is true."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator
from tpustrategy._src.data.transformations.map import call_fn, check_fn
from tpustrategy._src.data.transformations.rest_after_error import RestAfterError


def _as_bool(value: Any) -> bool:
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_) or (isinstance(value, np.ndarray) and value.shape == () and value.dtype == np.bool_):
        return bool(value)
    shape = getattr(value, "shape", ())
    raise TypeError(
        "Dataset.filter: `predicate` return type must be convertible to a scalar boolean; "
        f"received {type(value).__name__} with shape {tuple(shape)}: {value!r}.\n"
        "Fix: return a Python bool or a NumPy bool scalar, e.g. lambda x: bool(x % 2 == 0)."
    )


class FilterDataset(Dataset):
    """Keeps the elements for which ``predicate(element)`` is true.

    Attributes:
      predicate: the predicate function.
    """

    _params = ("predicate",)

    def __init__(self, input_dataset: Dataset, predicate: Callable[..., Any]):
        super().__init__((input_dataset,))
        check_fn(predicate, "Dataset.filter", "predicate")
        self.predicate = predicate

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return input_spec(self.inputs[0])

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _FilterIterator(self.inputs[0]._make_iterator(ctx), self.predicate)


class _FilterIterator(RestAfterError, NodeIterator):
    def __init__(self, it: NodeIterator, predicate: Callable[..., Any]):
        self._it, self._pred = it, predicate

    def __next__(self) -> Any:
        if self._pending is not None:
            self._raise_pending()
        pred = self._pred
        while True:
            x = self._read_one()
            if _as_bool(call_fn(pred, x)):
                return x

    def _next_many(self, n: int) -> list[Any]:
        if self._pending is not None:
            self._raise_pending()
        pred = self._pred
        while True:
            xs = self._read_many(n)
            if not xs:
                return []
            out = []
            for k, x in enumerate(xs):
                try:
                    keep = _as_bool(call_fn(pred, x))
                except BaseException as e:
                    if isinstance(e, Exception):
                        self._keep_rest(xs, k, e, bool(out))
                    if not out:
                        raise
                    self._pending = e
                    return out
                if keep:
                    out.append(x)
            if out:
                return out

    def get_state(self) -> dict[str, Any]:
        return self._rest_state()

    def set_state(self, state: dict[str, Any]) -> None:
        self._restore_rest(state)

    def close(self) -> None:
        self._it.close()
