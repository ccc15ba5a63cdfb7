"""`Dataset.scan`, `Dataset.reduce` and `Dataset.get_single_element`: folds over the elements.

``scan_func(state, element)`` returns ``(new_state, output)``; ``scan`` yields
the outputs, ``reduce`` returns the last state. The element is passed whole
(a tuple element is not unpacked), as in TensorFlow. The state keeps the
structure and dtypes of ``initial_state`` (converted like a TensorFlow
constant: a Python int is int32, a list is one array); its shapes may change
from step to step, and the element spec relaxes those dimensions to None (the
fixed point TensorFlow computes).

A checkpoint holds the input state and the carried state (see `state_codec`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.state_codec import decode, encode
from tpustrategy._src.data.core.string_scalar import unwrap, wrap
from tpustrategy._src.data.core.structure import (
    common_spec,
    flatten,
    is_structure,
    same_structure,
    spec_of,
    spec_of_element,
    to_numpy,
    unflatten_as,
)
from tpustrategy._src.data.transformations.dummy_element import dummy_element
from tpustrategy._src.data.transformations.map import check_fn


def _state_leaf(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.dtype.kind in "USO":
        return to_numpy(value)  # strings are object arrays of bytes
    if isinstance(value, (np.ndarray, np.generic, bytes)):
        return value
    if isinstance(value, list) and value and all(isinstance(v, (np.ndarray, np.generic)) for v in flatten(tuple(value))):
        return np.asarray(value)  # NumPy values keep their dtype (no int32 narrowing)
    return to_numpy(value)


def to_state(value: Any) -> Any:
    """A user state converted leaf by leaf (tuples and dicts are structure, a list is one array)."""
    if isinstance(value, tuple):
        vals = [to_state(v) for v in value]
        return type(value)(*vals) if hasattr(type(value), "_fields") else tuple(vals)
    if isinstance(value, dict):
        return type(value)((k, to_state(v)) for k, v in value.items())
    return _state_leaf(value)


def _dtype_of(leaf: Any) -> np.dtype:
    return spec_of(leaf).dtype


def check_new_state(api: str, arg: str, initial: Any, new: Any) -> Any:
    """``new`` converted, with TensorFlow's errors when its structure or dtypes differ."""
    new = to_state(new)
    if not same_structure(initial, new):
        raise TypeError(
            f"{api}: the element structure for the new state must match the initial state. Expected "
            f"{_describe(initial)}; got {_describe(new)}.\nFix: make `{arg}` return a state nested like initial_state."
        )
    want = [_dtype_of(x) for x in flatten(initial)]
    got = [_dtype_of(x) for x in flatten(new)]
    if want != got:
        raise TypeError(
            f"{api}: the element types for the new state must match the initial state. Expected "
            f"{[d.name for d in want]}; got {[d.name for d in got]}.\n"
            "Fix: cast the new state to the initial state's dtypes (e.g. np.int64(...)), or give an "
            "initial_state of the dtype the function returns (a Python int is int32, as in TensorFlow)."
        )
    return new


def _describe(x: Any) -> str:
    if isinstance(x, tuple):
        return "(" + ", ".join(_describe(v) for v in x) + ("," if len(x) == 1 else "") + ")"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in x.items()) + "}"
    return "tensor"


def _wrap_strings(element: Any) -> Any:
    if type(element) is tuple:
        return tuple(wrap(v) for v in element)
    return wrap(element)


def _check_pair(out: Any) -> Any:
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise TypeError(
            "Dataset.scan: `scan_func` should return a pair consisting of new state and the output "
            f"value; received {type(out).__name__}: {out!r}.\n"
            "Fix: return (new_state, output), e.g. lambda state, x: (state + x, state)."
        )
    return out


class ScanDataset(Dataset):
    """Outputs of ``scan_func`` carried over the input.

    Attributes:
      initial_state: the converted initial state.
      scan_func: ``(state, element) -> (new_state, output)``.
    """

    autoshard_pass_through = True
    _params = ("initial_state", "scan_func")

    def __init__(self, input_dataset: Dataset, initial_state: Any, scan_func: Callable[[Any, Any], Any]):
        super().__init__((input_dataset,))
        check_fn(scan_func, "Dataset.scan", "scan_func")
        self.initial_state = to_state(initial_state)
        self.scan_func = scan_func
        self._check_on_placeholders()

    def _step(self, state: Any, element: Any) -> tuple[Any, Any]:
        out = _check_pair(self.scan_func(state, _wrap_strings(element)))
        new_state = check_new_state("Dataset.scan", "scan_func", self.initial_state, out[0])
        value = out[1]
        if type(value) is list:
            value = tuple(value)
        return new_state, unwrap(value)

    def _check_on_placeholders(self) -> None:
        """Raises TensorFlow's construction-time errors when the function can run on placeholders."""
        spec = self.inputs[0]._static_spec()
        if spec is None:
            return
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                out = self.scan_func(self.initial_state, dummy_element(spec, 2, 0))
        except Exception:
            return
        _check_pair(out)
        try:
            new = to_state(out[0])
        except Exception:
            return
        check_new_state("Dataset.scan", "scan_func", self.initial_state, new)

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        spec = input_spec(self.inputs[0])
        if spec is None:
            return None
        state_spec = spec_of_element(self.initial_state)
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                for _ in range(4):  # relax the state's dimensions to a fixed point
                    runs = [
                        self._step(dummy_element(state_spec, size, fill), dummy_element(spec, size, fill))
                        for size, fill in ((2, 0), (3, 1))
                    ]
                    new_state_spec = state_spec
                    for new_state, _ in runs:
                        new_state_spec = common_spec(new_state_spec, spec_of_element(new_state))
                        if new_state_spec is None:
                            return None
                    if new_state_spec == state_spec:
                        return common_spec(spec_of_element(runs[0][1]), spec_of_element(runs[1][1]))
                    state_spec = new_state_spec
        except Exception:
            return None
        return None

    def _compute_cardinality(self) -> int:
        return self.inputs[0].cardinality()

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _ScanIterator(self, self.inputs[0]._make_iterator(ctx))


class _ScanIterator(NodeIterator):
    def __init__(self, node: ScanDataset, it: NodeIterator):
        self._node, self._it = node, it
        self._state = node.initial_state

    def __next__(self) -> Any:
        x = self._it.__next__()
        self._state, out = self._node._step(self._state, x)
        return out

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "state": encode(self._state)}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "state"), "scan")
        self._it.set_state(state["input"])
        self._state = _restore_like(self._node.initial_state, decode(state["state"]))

    def close(self) -> None:
        self._it.close()


def _restore_like(template: Any, value: Any) -> Any:
    """``value`` in ``template``'s structure types (a namedtuple stays one)."""
    if not is_structure(template):
        return value
    return unflatten_as(template, flatten(value))


def reduce_dataset(dataset: Dataset, initial_state: Any, reduce_func: Callable[[Any, Any], Any]) -> Any:
    """``reduce_func(state, element)`` folded over every element of ``dataset``; the final state.

    Raises:
      TypeError: when the new state's structure or dtypes differ from ``initial_state``'s.
    """
    check_fn(reduce_func, "Dataset.reduce", "reduce_func")
    state = to_state(initial_state)
    if dataset.cardinality() == -1:
        raise ValueError(
            "Dataset.reduce: the dataset is infinite, so the reduction would never end.\n"
            "Fix: take(n) elements first, or remove the repeat() without a count."
        )
    it = iter(dataset)
    try:
        for x in it:
            state = check_new_state("Dataset.reduce", "reduce_func", state, reduce_func(state, _wrap_strings(x)))
    finally:
        it.close()
    return unwrap(state) if not is_structure(state) else state


def get_single_element(dataset: Dataset) -> Any:
    """The only element of ``dataset``.

    Raises:
      ValueError: when the dataset is empty or has more than one element
        (TensorFlow's ``InvalidArgumentError`` texts).
    """
    it = iter(dataset)
    try:
        try:
            first = next(it)
        except StopIteration:
            raise ValueError(
                "Dataset.get_single_element: Dataset was empty.\n"
                "Fix: make sure the dataset has exactly one element (e.g. take(1) of a non-empty dataset)."
            ) from None
        try:
            next(it)
        except StopIteration:
            return first
        raise ValueError(
            "Dataset.get_single_element: Dataset had more than one element.\n"
            "Fix: batch the whole dataset into one element first (e.g. batch(n)), or take(1)."
        )
    finally:
        it.close()
