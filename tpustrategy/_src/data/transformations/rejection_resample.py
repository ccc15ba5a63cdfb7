"""`Dataset.rejection_resample`: ``(class, element)`` pairs resampled towards a target class distribution.

TensorFlow's algorithm, node for node. With ``p`` the initial class
distribution (given, or estimated) and ``t`` the target, let ``r = t / p``,
``m = min(r)`` and ``a = (r - m) / (max(r) - m)``. Output ``j`` comes, with
probability ``m``, from a pass over the input itself, and otherwise from a
second pass that keeps element ``k`` of class ``c`` with probability
``a[c]``; the mixture ends when the chosen pass is exhausted. Without
``initial_dist``, ``p`` at element ``k`` is estimated from the classes of the
batches of 32 elements up to and including ``k``'s, each count starting at
10, by passes of their own over the input (so ``p`` for the mixture and for
the filter are those of TensorFlow at every position). ``m == 1`` (a given
initial distribution equal to the target) returns the input with its classes;
``m == 0`` only the filtered pass.

Every pass is an iterator of the input; the checkpoint is their states,
the class counts (``num_classes`` integers) and the random generators'
states, so it has a fixed size at any position. Random draws use NumPy's
generator: for the same seed the kept elements differ from TensorFlow's, with
the same distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.seeds import BlockRng, SeedRule, check_seed
from tpustrategy._src.data.core.structure import element_to_numpy, is_namedtuple

_API = "Dataset.rejection_resample"
_EST_BATCH = 32
_SMOOTHING = 10
_TINY = float(np.finfo(np.float32).tiny)


def _dist(value: Any, arg: str, n: int | None) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64) if not isinstance(value, np.ndarray) else value.astype(np.float64)
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n) or arr.size == 0:
        raise ValueError(
            f"{_API}: {arg} must be a 1-D list of class probabilities"
            f"{'' if n is None else f' of length {n} (like target_dist)'}; received shape {arr.shape}.\n"
            "Fix: e.g. target_dist=[0.5, 0.5]."
        )
    if np.any(arr < 0) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{_API}: {arg} must be finite and non-negative; received {arr.tolist()}.")
    return arr.astype(np.float32).astype(np.float64)


def acceptance(initial: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, float]:
    """``(a, m)``: per-class acceptance of the filtered pass and the probability of the original."""
    ratio = target / (initial + _TINY)
    hi, lo = float(ratio.max()), float(ratio.min())
    with np.errstate(invalid="ignore", divide="ignore"):
        a = (ratio - lo) / (hi - lo)
    return a, lo


def _call(fn: Callable[..., Any], element: Any) -> Any:
    if isinstance(element, tuple) and not is_namedtuple(element):
        return fn(*element)
    return fn(element)


class RejectionResampleDataset(Dataset):
    """See the module docstring. Elements: ``(class, element)``."""

    _params = ("class_func", "target_dist", "initial_dist", "seed")

    def __init__(self, input_dataset: Dataset, class_func: Callable[..., Any], target_dist: Any,
                 initial_dist: Any, seed: int | None):
        super().__init__((input_dataset,))
        if not callable(class_func):
            raise TypeError(f"{_API}: class_func must be callable; received {type(class_func).__name__}.")
        self.class_func = class_func
        self.target_dist = _dist(target_dist, "target_dist", None)
        n = len(self.target_dist)
        self.initial_dist = None if initial_dist is None else _dist(initial_dist, "initial_dist", n)
        self.seed = check_seed(seed, _API)
        self._rule = SeedRule(self.seed, None)

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        spec = input_spec(self.inputs[0])
        if spec is None:
            return None
        from tpustrategy._src.data.transformations.map import trace_spec

        cls = trace_spec(self.class_func, spec)
        return None if cls is None else (cls, spec)

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _ResampleIterator(self, ctx)


class _Estimator:
    """The estimated class distribution at element ``k`` (counts through ``k``'s batch of 32)."""

    def __init__(self, it: NodeIterator, ds: RejectionResampleDataset):
        self._it, self._ds = it, ds
        self._counts = np.full(len(ds.target_dist), _SMOOTHING, dtype=np.int64)
        self._batch = -1  # the last batch counted

    def at(self, k: int) -> np.ndarray:
        while k // _EST_BATCH > self._batch:
            for x in self._it._next_many(_EST_BATCH):
                self._counts[_class_of(self._ds, x)] += 1
            self._batch += 1
        return (self._counts / self._counts.sum()).astype(np.float32).astype(np.float64)

    def get_state(self) -> dict[str, Any]:
        return {"input": self._it.get_state(), "counts": self._counts.tolist(), "batch": self._batch}

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("input", "counts", "batch"), "rejection_resample estimate")
        self._it.set_state(state["input"])
        self._counts = np.asarray(state["counts"], dtype=np.int64)
        self._batch = int(state["batch"])


def _class_of(ds: RejectionResampleDataset, element: Any) -> int:
    return _classify(ds, element)[0]


def _classify(ds: RejectionResampleDataset, element: Any) -> tuple[int, Any]:
    """The class index of ``element`` and the value ``class_func`` returned (as NumPy)."""
    raw = element_to_numpy(_call(ds.class_func, element))
    c = np.asarray(raw)
    if c.shape != () or c.dtype.kind not in "iu":
        raise TypeError(f"{_API}: class_func must return an integer scalar; received {c!r}.")
    ci = int(c)
    if not 0 <= ci < len(ds.target_dist):
        from tpustrategy._src.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"{_API}: class_func returned class {ci}, outside [0, {len(ds.target_dist)}) of target_dist.\n"
            "Fix: return class indices of target_dist."
        )
    return ci, raw


class _ResampleIterator(NodeIterator):
    def __init__(self, ds: RejectionResampleDataset, ctx: IterContext):
        inp = ds.inputs[0]
        self._ds = ds
        self._orig = inp._make_iterator(ctx)
        self._filt = inp._make_iterator(ctx)
        self._mix_rng = BlockRng(ds._rule.for_pass(ctx, salt=11), lambda g, n: g.random(n))
        self._filt_rng = BlockRng(ds._rule.for_pass(ctx, salt=12), lambda g, n: g.random(n))
        if ds.initial_dist is None:
            self._mix_est: _Estimator | None = _Estimator(inp._make_iterator(ctx), ds)
            self._filt_est: _Estimator | None = _Estimator(inp._make_iterator(ctx), ds)
            self._static: tuple[np.ndarray, float] | None = None
        else:
            self._mix_est = self._filt_est = None
            self._static = acceptance(ds.initial_dist, ds.target_dist)
        self._j = 0  # outputs so far
        self._k = 0  # elements read by the filtered pass
        self._ended = False

    def _pair(self, x: Any) -> tuple[Any, Any]:
        return _classify(self._ds, x)[1], x

    def _next_filtered(self) -> Any:
        while True:
            x = self._filt.__next__()
            k = self._k
            self._k += 1
            if self._static is not None:
                accept = self._static[0]
            else:
                assert self._filt_est is not None
                accept = acceptance(self._filt_est.at(k), self._ds.target_dist)[0]
            c, raw = _classify(self._ds, x)
            if self._filt_rng.next() < accept[c]:
                return raw, x

    def __next__(self) -> Any:
        if self._ended:
            raise StopIteration
        if self._static is not None:
            m = self._static[1]
        else:
            assert self._mix_est is not None
            m = acceptance(self._mix_est.at(self._j), self._ds.target_dist)[1]
        # TensorFlow's static shortcuts (m exactly 1 or 0) and its mixture draw.
        use_original = m >= 1.0 or (m > 0.0 and self._mix_rng.next() < m)
        try:
            out = self._pair(self._orig.__next__()) if use_original else self._next_filtered()
        except StopIteration:
            self._ended = True
            raise
        self._j += 1
        return out

    def get_state(self) -> dict[str, Any]:
        return {
            "orig": self._orig.get_state(), "filt": self._filt.get_state(),
            "mix_rng": self._mix_rng.get_state(), "filt_rng": self._filt_rng.get_state(),
            "mix_est": None if self._mix_est is None else self._mix_est.get_state(),
            "filt_est": None if self._filt_est is None else self._filt_est.get_state(),
            "j": self._j, "k": self._k, "ended": self._ended,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        check_state(state, ("orig", "filt", "mix_rng", "filt_rng", "mix_est", "filt_est", "j", "k", "ended"),
                    "rejection_resample")
        self._orig.set_state(state["orig"])
        self._filt.set_state(state["filt"])
        self._mix_rng.set_state(state["mix_rng"])
        self._filt_rng.set_state(state["filt_rng"])
        if self._mix_est is not None and self._filt_est is not None:
            self._mix_est.set_state(state["mix_est"])
            self._filt_est.set_state(state["filt_est"])
        self._j, self._k, self._ended = int(state["j"]), int(state["k"]), bool(state["ended"])

    def close(self) -> None:
        for it in (self._orig, self._filt):
            it.close()
        for est in (self._mix_est, self._filt_est):
            if est is not None:
                est._it.close()


def rejection_resample(dataset: Dataset, class_func: Callable[..., Any], target_dist: Any,
                       initial_dist: Any = None, seed: int | None = None) -> Dataset:
    """See `Dataset.rejection_resample`."""
    return RejectionResampleDataset(dataset, class_func, target_dist, initial_dist, seed)
