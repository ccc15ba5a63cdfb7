"""`Dataset.zip`: the elements of several datasets side by side.

The datasets form a nest (a tuple, namedtuple or dict, possibly nested);
element ``i`` of the result is that nest with every dataset replaced by its
element ``i``. The stream ends with the shortest input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import (
    IterContext,
    NodeIterator,
    check_state,
    pull,
    pull_batch,
)
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.structure import flatten, slice_leading, unflatten_as


def _check_structure(structure: Any) -> None:
    if isinstance(structure, list):
        raise TypeError(
            "Dataset.zip: a Python `list` of datasets is not supported; received a list of "
            f"{len(structure)} items.\nFix: pass a tuple instead, e.g. Dataset.zip((a, b))."
        )
    if isinstance(structure, tuple):
        for s in structure:
            _check_structure(s)
    elif isinstance(structure, dict):
        for s in structure.values():
            _check_structure(s)
    elif not isinstance(structure, Dataset):
        raise TypeError(
            "Dataset.zip: `datasets` must be a (nested) tuple or dict of Dataset objects; "
            f"received a {type(structure).__name__}: {structure!r}.\n"
            "Fix: e.g. Dataset.zip((ds_a, ds_b)) or Dataset.zip({'x': ds_x, 'y': ds_y})."
        )


class ZipDataset(Dataset):
    """Zips a nest of datasets.

    Attributes:
      structure: the nest the elements take (its leaves are placeholders; the
        datasets actually read are ``inputs``, in flattened order).
    """

    def __init__(self, structure: Any):
        _check_structure(structure)
        super().__init__(tuple(flatten(structure)))
        self.structure = structure

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        specs = [input_spec(d) for d in self.inputs]
        if any(s is None for s in specs):
            return None
        return unflatten_as(self.structure, specs)

    def _compute_cardinality(self) -> int:
        result = INFINITE_CARDINALITY
        for d in self.inputs:
            n = d.cardinality()
            if n == UNKNOWN_CARDINALITY:
                return UNKNOWN_CARDINALITY
            if n != INFINITE_CARDINALITY:
                result = n if result == INFINITE_CARDINALITY else min(result, n)
        return result

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        its = [d._make_iterator(ctx) for d in self.inputs]
        return _ZipIterator(self.structure, its)


class _ZipIterator(NodeIterator):
    def __init__(self, structure: Any, its: list[NodeIterator]):
        self._structure = structure
        self._its = its

    def __next__(self) -> Any:
        values: list[Any] = []
        error: Exception | None = None
        for it in self._its:
            try:
                values.append(it.__next__())
            except StopIteration:
                raise
            except Exception as e:  # TensorFlow advances every input, then reports the first error
                error = error or e
                values.append(None)
        if error is not None:
            raise error
        return unflatten_as(self._structure, values)

    def _next_many(self, n: int) -> list[Any]:
        cols = [pull(it, n) for it in self._its]
        if not cols:
            return []
        k = min(len(c) for c in cols)
        s = self._structure
        return [unflatten_as(s, row) for row in zip(*(c[:k] for c in cols))]

    def _next_batch(self, n: int, api: str) -> tuple[int, Any] | None:
        parts = [pull_batch(it, n, api) for it in self._its]
        if not parts or any(p is None for p in parts):
            return None
        k = min(p[0] for p in parts)
        leaves = [p[1] if p[0] == k else slice_leading(p[1], 0, k) for p in parts]
        return k, unflatten_as(self._structure, leaves)

    def get_state(self) -> dict[str, Any]:
        return {"inputs": [it.get_state() for it in self._its]}

    def set_state(self, state: dict[str, Any]) -> None:
        states = check_state(state, ("inputs",), "zip")["inputs"]
        if len(states) != len(self._its):
            raise ValueError(
                f"set_state: the zip state has {len(states)} inputs but this zip has "
                f"{len(self._its)}.\nFix: restore a state saved from the same pipeline."
            )
        for it, s in zip(self._its, states):
            it.set_state(s)

    def close(self) -> None:
        for it in self._its:
            it.close()
