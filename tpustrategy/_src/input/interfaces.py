"""The public types of distributed input: ``tps.DistributedDataset`` and ``tps.DistributedIterator``.

TensorFlow's ``tf.distribute.DistributedDataset`` / ``DistributedIterator`` are
the interfaces both of its distributed inputs implement (from
``experimental_distribute_dataset`` and from ``distribute_datasets_from_function``),
so programs test ``isinstance(x, tf.distribute.DistributedIterator)``. Ours are the
base classes of both implementations (``distributed.py``, ``from_function.py``).
A leaf: no JAX, no internal imports.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Iterator
from typing import Any


class DistributedIterator(abc.ABC):
    """An iterator over a distributed dataset (``tf.distribute.DistributedIterator``).

    Each ``get_next()`` is one step: per-replica values for ``strategy.run``.
    """

    @property
    @abc.abstractmethod
    def element_spec(self) -> Any:
        """The type specification of one step (per-replica ``TensorSpec`` s)."""
        ...

    @abc.abstractmethod
    def get_next(self) -> Any:
        """The next step; raises ``tps.errors.OutOfRangeError`` at the end."""
        ...

    @abc.abstractmethod
    def get_next_as_optional(self) -> Any:
        """The next step as an ``Optional`` (empty at the end of the input)."""
        ...

    def __iter__(self) -> DistributedIterator:
        return self

    def __next__(self) -> Any:
        return self.get_next()


class DistributedDataset(abc.ABC):
    """A dataset whose elements are steps split over replicas (``tf.distribute.DistributedDataset``).

    Iterate it (``for x in dist_dataset``, ``iter(dist_dataset)``); it takes no
    further transformations.
    """

    @property
    @abc.abstractmethod
    def element_spec(self) -> Any:
        """The type specification of one step (per-replica ``TensorSpec`` s)."""
        ...

    @abc.abstractmethod
    def __iter__(self) -> Iterator[Any]:
        ...

    def reduce(self, initial_state: Any, reduce_fn: Callable[[Any, Any], Any]) -> Any:
        """Folds every step into a state: ``state = reduce_fn(state, step)`` (TensorFlow's ``reduce``).

        Args:
          initial_state: The starting state.
          reduce_fn: ``(state, step) -> state``; a step holds per-replica values.

        Returns:
          The final state.
        """
        state = initial_state
        for step in self:
            state = reduce_fn(state, step)
        return state
