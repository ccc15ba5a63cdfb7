"""Test helpers for users of ``tpustrategy.data`` (``tpustrategy.testing``).

`assert_iterator_checkpointing` is the check every transformation and reader
is held to: iterate a pipeline recording ``get_state()`` before every element,
then restore fresh iterators from the recorded states (round-tripped through
JSON) and compare the rest of each stream with the original, exactly.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from tpustrategy._src.data.core.structure import element_equal


def _describe(x: Any) -> str:
    text = repr(x)
    return text if len(text) < 300 else text[:300] + "..."


def assert_iterator_checkpointing(
    dataset: Any,
    *,
    max_elements: int = 2000,
    num_checkpoints: int | None = 50,
    compare_length: int | None = None,
    seed: int = 0,
) -> list[Any]:
    """Asserts that restoring any recorded iterator state resumes the stream exactly.

    Args:
      dataset: the dataset to check (iterated several times).
      max_elements: read at most this many elements (infinite streams are cut here).
      num_checkpoints: how many recorded positions to restore from, spread over
        the stream and always including the first and the last; None restores
        from every position.
      compare_length: compare at most this many elements after each restore
        (None: up to ``max_elements``).
      seed: the seed choosing the sampled positions.

    Returns:
      The elements read (so tests can also check the values).

    Raises:
      AssertionError: naming the position, the element index and both values
        when a restored stream differs, or when a state is not JSON-able.
    """
    it = iter(dataset)
    states: list[str] = []
    elements: list[Any] = []
    while len(elements) < max_elements:
        state = it.get_state()
        try:
            text = json.dumps(state)
        except (TypeError, ValueError) as e:
            raise AssertionError(f"get_state() before element {len(elements)} is not JSON-able: {e}; state={state!r}") from None
        try:
            x = next(it)
        except StopIteration:
            states.append(text)
            break
        states.append(text)
        elements.append(x)
    it.close()
    ended = len(elements) < max_elements

    positions = list(range(len(states)))
    if num_checkpoints is not None and len(positions) > num_checkpoints:
        rng = np.random.default_rng(seed)
        middle = rng.choice(np.arange(1, len(positions) - 1), size=max(0, num_checkpoints - 2), replace=False)
        positions = sorted({0, len(positions) - 1, *middle.tolist()})

    for p in positions:
        restored = iter(dataset)
        restored.set_state(json.loads(states[p]))
        stop = len(elements) if compare_length is None else min(len(elements), p + compare_length)
        for i in range(p, stop):
            try:
                got = next(restored)
            except StopIteration:
                raise AssertionError(
                    f"restored from the state before element {p}: the stream ended at element {i}, "
                    f"but the original continued with {_describe(elements[i])}"
                ) from None
            if not element_equal(got, elements[i]):
                raise AssertionError(
                    f"restored from the state before element {p}: element {i} differs.\n"
                    f"  original: {_describe(elements[i])}\n  restored: {_describe(got)}"
                )
        if ended and stop == len(elements):
            extra = next(restored, _END)
            if extra is not _END:
                raise AssertionError(
                    f"restored from the state before element {p}: the original stream ended after "
                    f"{len(elements)} elements but the restored one continued with {_describe(extra)}"
                )
        restored.close()
    return elements


_END = object()
