"""Seeds of the random sources: one rule for ``random``, ``sample_from_datasets`` and friends.

TensorFlow's rule, in NumPy terms: with a ``seed`` every iteration gives the
same sequence unless ``rerandomize_each_iteration`` is True, when each
iteration (and each epoch of an enclosing ``repeat``) gets a new one; without
a seed every iteration is different: each iterator draws a fresh seed, and
keeps it in its checkpoint, so a restored iterator still reproduces its
stream.

`BlockRng` draws random numbers in blocks (vectorised) and checkpoints as the
generator state at the start of the current block plus the index into it:
the state has a fixed size at any position.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tpustrategy._src.data.core.iterator import IterContext

_BLOCK = 1024


def check_seed(seed: Any, api: str) -> int | None:
    """Validates a ``seed`` argument (None or an int)."""
    if seed is None:
        return None
    if isinstance(seed, np.ndarray) and seed.ndim == 0:
        seed = seed.item()
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(
            f"{api}: seed must be an int or None; received {type(seed).__name__}: {seed!r}.\n"
            "Fix: pass seed=42 for a reproducible sequence, or None for a random one."
        )
    return int(seed) % (2**63)


def check_rerandomize(value: Any, api: str) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(
            f"{api}: rerandomize_each_iteration must be a bool or None; received "
            f"{type(value).__name__}: {value!r}."
        )
    return value


class SeedRule:
    """The base seed of a random node and whether each pass gets a new sequence."""

    def __init__(self, seed: int | None, rerandomize_each_iteration: bool | None):
        self.seed = seed
        self.rerandomize = bool(rerandomize_each_iteration)

    def for_pass(self, ctx: IterContext, salt: int = 0) -> list[int]:
        """The seed words of one iteration (with ``salt`` telling apart generators of one node)."""
        if self.seed is None:
            return [int(np.random.SeedSequence().entropy % (2**63)), salt]
        words = [self.seed, salt]
        return [*words, *ctx.epochs] if self.rerandomize else words


def rng_to_json(state: dict[str, Any]) -> dict[str, Any]:
    """A PCG64 state with its 128-bit integers as hex strings (portable JSON)."""
    inner = state["state"]
    return {"bit_generator": state["bit_generator"], "state": hex(inner["state"]), "inc": hex(inner["inc"]),
            "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}


def rng_from_json(saved: dict[str, Any]) -> dict[str, Any]:
    return {"bit_generator": saved["bit_generator"],
            "state": {"state": int(saved["state"], 16), "inc": int(saved["inc"], 16)},
            "has_uint32": int(saved["has_uint32"]), "uinteger": int(saved["uinteger"])}


class BlockRng:
    """Random values drawn ``block`` at a time by ``draw(generator, block)``.

    Args:
      seed: seed words for ``np.random.default_rng``.
      draw: makes one block (an array) from the generator.
      block: the block length.
    """

    def __init__(self, seed: list[int], draw: Callable[[np.random.Generator, int], np.ndarray], block: int = _BLOCK):
        self._seed = [int(s) for s in seed]
        self._rng = np.random.default_rng(self._seed)
        self._draw, self._n = draw, block
        self._block_state: dict[str, Any] | None = None
        self._values: np.ndarray = np.empty(0)
        self._i = 0

    def _refill(self) -> None:
        self._block_state = self._rng.bit_generator.state
        self._values = self._draw(self._rng, self._n)
        self._i = 0

    def next(self) -> Any:
        """One value."""
        if self._i >= len(self._values):
            self._refill()
        v = self._values[self._i]
        self._i += 1
        return v

    def take(self, n: int) -> np.ndarray:
        """The next ``n`` values as one array."""
        parts, need = [], n
        while need > 0:
            if self._i >= len(self._values):
                self._refill()
            k = min(need, len(self._values) - self._i)
            parts.append(self._values[self._i : self._i + k])
            self._i += k
            need -= k
        return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else self._values[:0]

    def get_state(self) -> dict[str, Any]:
        return {"seed": self._seed, "block": None if self._block_state is None else rng_to_json(self._block_state),
                "index": self._i}

    def set_state(self, state: dict[str, Any]) -> None:
        self._seed = [int(s) for s in state["seed"]]
        self._rng = np.random.default_rng(self._seed)
        self._values, self._i, self._block_state = np.empty(0), 0, None
        if state["block"] is not None:
            self._rng.bit_generator.state = rng_from_json(state["block"])
            self._refill()
            self._i = int(state["index"])
