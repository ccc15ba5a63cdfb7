"""`Dataset.random`: an infinite stream of pseudo-random int64 scalars (``tf.data.Dataset.random``).

Values are uniform over ``[0, 2**32)`` like TensorFlow's (which emits one
32-bit Philox output per element). The generator is NumPy's PCG64, so the
values differ from TensorFlow's for the same seed; the seed rule is
TensorFlow's (see `core.seeds`). Values are drawn in vectorised blocks and the
checkpoint is the generator state at the block start plus an index.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.dataset import Dataset
from tpustrategy._src.data.core.iterator import IterContext, NodeIterator, check_state
from tpustrategy._src.data.core.options import INFINITE_CARDINALITY
from tpustrategy._src.data.core.seeds import BlockRng, SeedRule, check_rerandomize, check_seed
from tpustrategy._src.data.core.structure import TensorSpec


def _draw_uint32(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 2**32, size=n, dtype=np.int64)


class RandomDataset(Dataset):
    """Pseudo-random int64 scalars in ``[0, 2**32)`` (``tf.data.experimental.RandomDataset``).

    Args:
      seed: None (a new sequence every iteration) or an int (the same
        sequence every iteration unless ``rerandomize_each_iteration``).
      rerandomize_each_iteration: with a seed, True gives each iteration and
        each epoch of an enclosing ``repeat`` a new sequence.
      name: accepted for compatibility.
    """

    _params = ("seed", "rerandomize_each_iteration")

    def __init__(self, seed: int | None = None, rerandomize_each_iteration: bool | None = None, name: str | None = None):
        super().__init__(())
        self.seed = check_seed(seed, "Dataset.random")
        self.rerandomize_each_iteration = check_rerandomize(rerandomize_each_iteration, "Dataset.random")
        self._rule = SeedRule(self.seed, self.rerandomize_each_iteration)

    def _compute_spec(self, input_spec: Callable[[Dataset], Any]) -> Any:
        return TensorSpec((), np.int64)

    def _compute_cardinality(self) -> int:
        return INFINITE_CARDINALITY

    def _make_iterator(self, ctx: IterContext) -> NodeIterator:
        return _RandomIterator(self._rule.for_pass(ctx))


class _RandomIterator(NodeIterator):
    def __init__(self, seed: list[int]):
        self._rng = BlockRng(seed, _draw_uint32)

    def __next__(self) -> Any:
        return np.int64(self._rng.next())

    def _next_many(self, n: int) -> list[Any]:
        return list(self._rng.take(n))

    def _next_batch(self, n: int, api: str) -> tuple[int, Any]:
        return n, self._rng.take(n).copy()

    def _skip(self, n: int) -> int:
        self._rng.take(n)
        return n

    def get_state(self) -> dict[str, Any]:
        return {"rng": self._rng.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        self._rng.set_state(check_state(state, ("rng",), "random")["rng"])

