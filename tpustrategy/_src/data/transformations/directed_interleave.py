"""Directed interleave: each element comes from the input a selector names.

`choose_from_datasets` takes the input indices from a user dataset of int64
scalars; `sample_from_datasets` draws them from a categorical distribution
(`CategoricalSelector`, constant weights or one weight vector per element).
With ``stop_on_empty_dataset`` the stream ends when the selected input is
exhausted; otherwise an exhausted input is skipped (the draw is discarded,
which is sampling from the renormalised weights of the rest) and the stream
ends when every input or the selector is exhausted. TensorFlow's rules
throughout, including dropping inputs whose constant weight is 0.

Inputs are read a chunk at a time through `_ChunkReader`, which checkpoints
as the input's state before the chunk plus the offset into it, so a state
holds no elements and restoring skips at most one chunk per input.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY, UNKNOWN_CARDINALITY
from tpustrategy._src.data.core.seeds import BlockRng, SeedRule, check_rerandomize, check_seed
from tpustrategy._src.data.core.structure import TensorSpec, common_spec, flatten

_CHUNK = 128


class _ChunkReader:
    """Reads an input iterator in chunks; the state is (state before the chunk, offset)."""

    __slots__ = ("it", "chunk", "pos", "state", "done")

    def __init__(self, it: NodeIterator):
        self.it, self.chunk, self.pos, self.state, self.done = it, [], 0, None, False

    def next(self, want: int = _CHUNK) -> Any:
        """The next element, or the reader itself as an end marker."""
        if self.pos >= len(self.chunk):
            if self.done:
                return self
            self.state = self.it.get_state()
            self.chunk, self.pos = self.it._next_many(max(1, want)), 0
            if not self.chunk:
                self.done = True
                return self
        x = self.chunk[self.pos]
        self.pos += 1
        return x

    def get_state(self) -> dict[str, Any]:
        if self.state is None or self.pos >= len(self.chunk):
            return {"input": self.it.get_state(), "skip": 0, "done": self.done}
        return {"input": self.state, "skip": self.pos, "done": self.done}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "skip", "done"), "directed interleave input")
        self.it.set_state(state["input"])
        self.it._skip(int(state["skip"]))
        self.chunk, self.pos, self.state, self.done = [], 0, None, bool(state["done"])


def _check_datasets(datasets: Any, api: str) -> list[Dataset]:
    if isinstance(datasets, Dataset) or not isinstance(datasets, Sequence) or isinstance(datasets, (str, bytes)):
        raise TypeError(
            f"{api}: `datasets` must be a list of Datasets; received {type(datasets).__name__}.\n"
            f"Fix: e.g. {api}([ds_a, ds_b], ...)."
        )
    if not datasets:
        raise ValueError("Invalid `datasets`. `datasets` should not be empty.")
    for i, d in enumerate(datasets):
        if not isinstance(d, Dataset):
            raise TypeError(f"{api}: datasets[{i}] must be a Dataset; received {type(d).__name__}: {d!r}.")
    specs = [d._static_spec() for d in datasets]
    known = [s for s in specs if s is not None]
    for s in known[1:]:
        if common_spec(known[0], s) is None:
            raise TypeError(
                f"{api}: all datasets must have compatible element specs; datasets[0] has "
                f"{known[0]} but another has {s}.\nFix: map the datasets to one structure and dtype first."
            )
    return list(datasets)


class DirectedInterleaveDataset(Dataset):
    """Elements of ``inputs[selector_element]`` in selector order.

    Attributes:
      selector: a dataset of int64 scalar input indices (not one of ``inputs``:
        auto-sharding shards the data inputs only).
      stop_on_empty_dataset: end when the selected input is exhausted.
    """

    _params = ("selector", "stop_on_empty_dataset")

    def __init__(self, selector: Dataset, datasets: list[Dataset], stop_on_empty_dataset: bool, api: str):
        super().__init__(tuple(datasets))
        if not isinstance(stop_on_empty_dataset, bool):
            raise TypeError(
                f"{api}: stop_on_empty_dataset must be a bool; received "
                f"{type(stop_on_empty_dataset).__name__}: {stop_on_empty_dataset!r}."
            )
        self.selector = selector
        self.stop_on_empty_dataset = stop_on_empty_dataset
        self._api = api

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        out = None
        for d in self.inputs:
            s = input_spec(d)
            if s is None:
                return None
            out = s if out is None else common_spec(out, s)
        return out

    def _compute_cardinality(self) -> int:
        # TensorFlow: infinite as soon as one input is, unknown otherwise.
        if any(d.cardinality() == INFINITE_CARDINALITY for d in self.inputs):
            return INFINITE_CARDINALITY
        return UNKNOWN_CARDINALITY

    def options(self) -> Any:
        return super().options().merge(self.selector.options())

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        readers = [_ChunkReader(d._make_iterator(ctx)) for d in self.inputs]
        return _DirectedIterator(self.selector._make_iterator(ctx), readers, self.stop_on_empty_dataset, self._api)


class _DirectedIterator(NodeIterator):
    def __init__(self, selector: NodeIterator, readers: list[_ChunkReader], stop: bool, api: str):
        self._sel = _ChunkReader(selector)
        self._readers, self._stop, self._api = readers, stop, api
        self._live = len(readers)
        self._ended = False

    def _index(self, raw: Any) -> int:
        if isinstance(raw, (np.integer, int)) and not isinstance(raw, bool):
            i = int(raw)
        else:
            arr = np.asarray(raw)
            if arr.shape != () or arr.dtype.kind not in "iu":
                raise TypeError(
                    f"{self._api}: the choice dataset must produce int64 scalars; received "
                    f"{type(raw).__name__}: {raw!r}."
                )
            i = int(arr)
        if not 0 <= i < len(self._readers):
            from tpustrategy._src.errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"{self._api}: selector index {i} is out of range: there are {len(self._readers)} "
                f"datasets (valid indices 0..{len(self._readers) - 1}).\n"
                "Fix: make the choice dataset produce indices of the datasets list."
            )
        return i

    def __next__(self) -> Any:
        got = self._next_many(1)
        if not got:
            raise StopIteration
        return got[0]

    def _next_many(self, n: int) -> list[Any]:
        out: list[Any] = []
        if self._ended:
            return out
        sel, readers, append = self._sel, self._readers, out.append
        want = max(_CHUNK, n)
        while len(out) < n:
            raw = sel.next(want)
            if raw is sel:
                self._ended = True
                break
            r = readers[self._index(raw)]
            x = r.next(min(want, max(8, (n - len(out)) * 2 // max(1, self._live))))
            if x is r:
                if self._stop:
                    self._ended = True
                    break
                if self._mark_exhausted():
                    break
                continue
            append(x)
        return out

    def _mark_exhausted(self) -> bool:
        """Counts live inputs; True when every input is exhausted (the stream ends)."""
        self._live = sum(1 for r in self._readers if not r.done)
        if self._live == 0:
            self._ended = True
            return True
        return False

    def get_state(self) -> dict[str, Any]:
        return {"selector": self._sel.get_state(), "inputs": [r.get_state() for r in self._readers],
                "ended": self._ended}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("selector", "inputs", "ended"), "directed interleave")
        if len(state["inputs"]) != len(self._readers):
            raise ValueError(
                f"set_state: the state has {len(state['inputs'])} inputs but this {self._api} has "
                f"{len(self._readers)}.\nFix: pass a state of an iterator over the same pipeline."
            )
        self._sel.set_state(state["selector"])
        for r, s in zip(self._readers, state["inputs"]):
            r.set_state(s)
        self._ended = bool(state["ended"])
        self._live = sum(1 for r in self._readers if not r.done)

    def close(self) -> None:
        self._sel.it.close()
        for r in self._readers:
            r.it.close()


# ----------------------------------------------------------------- sampling


class CategoricalSelector(Dataset):
    """Infinite int64 indices drawn with probabilities ``weights`` (or one weights element each).

    Attributes:
      weights: normalised probabilities (a float64 array), or None.
      weights_dataset: a dataset of weight vectors (used when ``weights`` is None).
    """

    _params = ("weights", "weights_dataset")

    def __init__(self, weights: np.ndarray | None, weights_dataset: Dataset | None, seed: int | None,
                 rerandomize_each_iteration: bool | None):
        super().__init__(())
        self.weights, self.weights_dataset = weights, weights_dataset
        self._rule = SeedRule(seed, rerandomize_each_iteration)

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return TensorSpec((), np.int64)

    def _compute_cardinality(self) -> int:
        if self.weights_dataset is not None:
            return self.weights_dataset.cardinality()
        return INFINITE_CARDINALITY

    def options(self) -> Any:
        base = super().options()
        return base if self.weights_dataset is None else base.merge(self.weights_dataset.options())

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        seed = self._rule.for_pass(ctx, salt=1)
        if self.weights is not None:
            cdf = np.cumsum(self.weights)
            cdf /= cdf[-1]

            def draw(rng: np.random.Generator, n: int) -> np.ndarray:
                idx = np.searchsorted(cdf, rng.random(n), side="right")
                return np.minimum(idx, len(cdf) - 1).astype(np.int64)

            return _ConstantSelectorIterator(BlockRng(seed, draw))
        assert self.weights_dataset is not None
        return _VaryingSelectorIterator(self.weights_dataset._make_iterator(ctx), seed)


class _ConstantSelectorIterator(NodeIterator):
    def __init__(self, rng: BlockRng):
        self._rng = rng

    def __next__(self) -> Any:
        return self._rng.next()

    def _next_many(self, n: int) -> list[Any]:
        return self._rng.take(n).tolist()

    def _skip(self, n: int) -> int:
        self._rng.take(n)
        return n

    def get_state(self) -> dict[str, Any]:
        return {"rng": self._rng.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self._rng.set_state(check_state(state, ("rng",), "sample_from_datasets selector")["rng"])


class _VaryingSelectorIterator(NodeIterator):
    def __init__(self, weights: NodeIterator, seed: list[int]):
        self._weights = weights
        self._rng = BlockRng(seed, lambda rng, n: rng.random(n))

    def __next__(self) -> Any:
        w = np.asarray(flatten(self._weights.__next__()), dtype=np.float64).reshape(-1)
        w = np.where(w > 0, w, 0.0)
        total = w.sum()
        u = self._rng.next()
        if total <= 0:
            return np.int64(min(int(u * len(w)), len(w) - 1))
        idx = int(np.searchsorted(np.cumsum(w) / total, u, side="right"))
        return np.int64(min(idx, len(w) - 1))

    def get_state(self) -> dict[str, Any]:
        return {"weights": self._weights.get_state(), "rng": self._rng.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("weights", "rng"), "sample_from_datasets selector")
        self._weights.set_state(state["weights"])
        self._rng.set_state(state["rng"])

    def close(self) -> None:
        self._weights.close()


def _weights_array(weights: Any, n: int) -> np.ndarray:
    if isinstance(weights, (list, tuple)) and len(weights) != n:
        raise ValueError(
            "Invalid `weights`. `weights` should have the same length as `datasets` but got "
            f"`len(weights)={len(weights)}` vs. `len(datasets)={n}`."
        )
    arr = np.asarray(weights)
    if arr.shape != (n,):
        raise ValueError(
            "Invalid `weights`. The shape of `weights` should be compatible with `[len(datasets)]` "
            f"but is {arr.shape}."
        )
    if arr.dtype.kind != "f":
        raise TypeError(
            "Invalid `weights`. `weights` type must be `tf.float16`, `tf.bfloat16`, `tf.float32` or "
            f"`tf.float64` but is {arr.dtype}.\nFix: pass floats, e.g. weights=[0.5, 0.5]."
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"Invalid `weights`. Every weight must be finite; received {arr.tolist()}.")
    return arr.astype(np.float64)


def sample_from_datasets(datasets: Any, weights: Any = None, seed: int | None = None,
                         stop_on_empty_dataset: bool = False,
                         rerandomize_each_iteration: bool | None = None) -> Dataset:
    """See `Dataset.sample_from_datasets`."""
    api = "Dataset.sample_from_datasets"
    datasets = _check_datasets(datasets, api)
    seed = check_seed(seed, api)
    rerandomize_each_iteration = check_rerandomize(rerandomize_each_iteration, api)
    if isinstance(weights, Dataset):
        selector = CategoricalSelector(None, weights, seed, rerandomize_each_iteration)
        return DirectedInterleaveDataset(selector, datasets, stop_on_empty_dataset, api)
    if weights is None:
        probs = np.full(len(datasets), 1.0 / len(datasets))
    else:
        w = _weights_array(weights, len(datasets))
        keep = [i for i in range(len(datasets)) if w[i] > 0]
        if not keep:
            datasets, probs = [datasets[0].take(0)], np.ones(1)
        else:
            datasets, probs = [datasets[i] for i in keep], w[keep] / w[keep].sum()
    if len(datasets) == 1:
        return datasets[0]
    selector = CategoricalSelector(probs, None, seed, rerandomize_each_iteration)
    return DirectedInterleaveDataset(selector, datasets, stop_on_empty_dataset, api)


def choose_from_datasets(datasets: Any, choice_dataset: Any, stop_on_empty_dataset: bool = True) -> Dataset:
    """See `Dataset.choose_from_datasets`."""
    api = "Dataset.choose_from_datasets"
    datasets = _check_datasets(datasets, api)
    if not isinstance(choice_dataset, Dataset):
        raise TypeError(
            "Invalid `choice_dataset`. `choice_dataset` should be a `tf.data.Dataset` but is "
            f"{type(choice_dataset).__name__}.\nFix: e.g. choice_dataset=Dataset.range(3).repeat()."
        )
    spec = choice_dataset._static_spec()
    if isinstance(spec, TensorSpec):
        if spec.dtype != np.int64:
            raise TypeError(
                "Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `tf.int64` "
                f"tensors but are {spec}.\nFix: e.g. choice_dataset.map(lambda i: np.int64(i))."
            )
        if spec.shape != ():
            raise TypeError(
                "Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `tf.int64` "
                f"tensors but have shape {spec.shape}."
            )
    elif spec is not None:
        raise TypeError(
            "Invalid `choice_dataset`. Elements of `choice_dataset` must be scalar `tf.int64` "
            f"tensors but are {spec}."
        )
    return DirectedInterleaveDataset(choice_dataset, datasets, stop_on_empty_dataset, api)
