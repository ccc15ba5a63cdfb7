"""Observers of variable reads and writes: the plug point of ``tps.GradientTape``.

TensorFlow's tape watches the trainable variables a computation reads while it
records, and an eager tape has to see those reads to record them (the variables
package sits below the tape in the package graph, so the tape registers itself
here). ``on_read`` passes every value read to each recording observer, outermost
first; an observer may return a stand-in for it (the eager tape's source value).
``to_stored`` turns a value about to be written back into a plain array.
"""

from __future__ import annotations

import threading
from typing import Protocol

import jax

from tpustrategy._src.types import PyTree
from tpustrategy._src.variables.state import VariableState


class ReadObserver(Protocol):
    """What a recording tape provides."""

    def on_read(self, variable: VariableState, value: jax.Array) -> jax.Array:
        """Called with each value read; returns the value to hand to the caller."""

    def to_stored(self, value: PyTree) -> PyTree:
        """The plain array a variable stores for ``value`` (a write is never recorded)."""


class _State(threading.local):
    def __init__(self) -> None:
        self.observers: list[ReadObserver] = []


_state = _State()


def add(observer: ReadObserver) -> None:
    _state.observers.append(observer)


def remove(observer: ReadObserver) -> None:
    if observer in _state.observers:
        _state.observers.remove(observer)


def active() -> bool:
    return bool(_state.observers)


def on_read(variable: VariableState, value: jax.Array) -> jax.Array:
    for observer in list(_state.observers):
        value = observer.on_read(variable, value)
    return value


def to_stored(value: PyTree) -> PyTree:
    for observer in reversed(_state.observers):
        value = observer.to_stored(value)
    return value
