"""Trace frames: how variables are functionalised inside compiled programs.

While the execution core traces a function (``strategy.run``: replica level;
``tps.function``: cross-replica level), a frame is active on the thread.
Reading a variable returns the frame's current traced value of it; writing
records the new traced value. The program takes every variable it reads as
an input and returns every variable it wrote; after it runs the new values
are written back, so a Python loop of steps mutates variables like
TensorFlow eager code.

A variable first met during a trace is not an input yet: the frame records it
as *missing* and hands out a placeholder; the tracer then traces again with it
as an input (as ``tf.function`` traces again when it meets new variables).
Variables created during a trace are kept by the tracer and handed back on
the next trace, so a retrace does not create them twice.
"""

from __future__ import annotations

import functools
import operator
import threading
from typing import Any

import jax
import jax.numpy as jnp

from tpustrategy._src import activity
from tpustrategy._src.activity import ANY
from tpustrategy._src.context import contracts
from tpustrategy._src.types import Shape
from tpustrategy._src.variables.state import VariableState


class Frame:
    """One trace in progress.

    Args:
      level: ``"replica"`` for a replica function, ``"cross"`` for ``tps.function``.
      inputs: variable -> traced value at the start of the trace (local view
        for the replica level, global for the cross-replica level).
      created: variables created by earlier traces of the same function, reused in order.
      strategy: the strategy running the replica function (replica level).
    """

    def __init__(
        self,
        level: str,
        inputs: dict[VariableState, jax.Array],
        created: list[VariableState],
        strategy: contracts.StrategyContract | None = None,
    ) -> None:
        self.level = level
        self.strategy = strategy
        self._current: dict[VariableState, jax.Array] = dict(inputs)
        self.missing: list[VariableState] = []
        self.written: list[VariableState] = []
        self.created = created
        self._created_index = 0
        self.strategies: list[contracts.StrategyContract] = [strategy] if strategy is not None else []
        # execution.pulls.TracePulls at the cross-replica level (a package above this one).
        self.pulls: Any = None
        # Variables created in this trace from traced values: the program computes their
        # first value (they are outputs, not inputs) — such a program runs once.
        self.initialised: list[VariableState] = []

    def note_strategy(self, strategy: contracts.StrategyContract | None) -> None:
        if strategy is not None and strategy not in self.strategies:
            self.strategies.append(strategy)

    def has(self, var: VariableState) -> bool:
        return var in self._current

    def read(self, var: VariableState, placeholder_shape: Shape) -> jax.Array:
        self.note_strategy(var._strategy)
        if var in self._current:
            return self._current[var]
        if var not in self.missing:
            self.missing.append(var)
        return jnp.zeros(placeholder_shape, var.dtype)

    def write(self, var: VariableState, value: jax.Array) -> None:
        self.note_strategy(var._strategy)
        if var not in self._current and var not in self.missing:
            self.missing.append(var)
        self._current[var] = value
        if var not in self.written:
            self.written.append(var)

    def initialise(self, var: VariableState, value: jax.Array) -> None:
        self._current[var] = value
        if var not in self.written:
            self.written.append(var)
        if var not in self.initialised:
            self.initialised.append(var)

    def current(self, var: VariableState) -> jax.Array:
        return self._current[var]

    def next_created(self) -> VariableState | None:
        if self._created_index < len(self.created):
            var = self.created[self._created_index]
            self._created_index += 1
            return var
        return None

    def register_created(self, var: VariableState) -> None:
        self.created.append(var)
        self._created_index = len(self.created)


class _Stack(threading.local):
    def __init__(self) -> None:
        self.frames: list[Frame] = []


_stack = _Stack()


def current() -> Frame | None:
    if not ANY:  # nothing active on any thread (``activity``): no frame to read
        return None
    return _stack.frames[-1] if _stack.frames else None


def outermost() -> Frame | None:
    return _stack.frames[0] if _stack.frames else None


class active:
    """Context manager that pushes a frame."""

    def __init__(self, frame: Frame) -> None:
        self._frame = frame

    def __enter__(self) -> Frame:
        _stack.frames.append(self._frame)
        activity.enter()
        return self._frame

    def __exit__(self, *exc: object) -> None:
        activity.leave()
        _stack.frames.pop()


def global_value(var: VariableState) -> jax.Array:
    """The variable's current global value: traced in a cross-replica frame, else concrete."""
    for frame in reversed(_stack.frames):
        if frame.level == "cross":
            return frame.read(var, var._global_shape())
    return var._value


def global_values(variables: list[VariableState]) -> list[jax.Array]:
    """``global_value`` of each variable (one check of the frame stack for all of them)."""
    if not ANY or not _stack.frames:
        return list(map(_value_of, variables))
    return [global_value(v) for v in variables]


# Where a variable keeps its concrete value; generated call code reads and writes it by name.
VALUE_SLOT = "_value"
_value_of = operator.attrgetter(VALUE_SLOT)


def value_reader() -> Any:
    """``read(var)``: a variable's concrete value outside every frame (``global_values`` of one
    variable there), as one C call, for generated call code (``execution.specialised``)."""
    return _value_of


def value_writer(var: VariableState) -> Any:
    """``write(value)``: ``write_back([var], [value])`` outside every frame for a variable that
    has its first value (not ``awaits_first_value``), as one C call, for generated call code."""
    return functools.partial(setattr, var, VALUE_SLOT)


def awaits_first_value(var: Any) -> bool:
    """Whether ``var`` was created in a trace from a traced value and its program has not run yet."""
    return bool(getattr(var, "_pending_init", False))


def write_back(variables: list[VariableState], values: Any) -> None:
    """Writes a program's new values of ``variables`` (``set_global_value`` each); a variable
    created by the trace has its first value now."""
    outside = not ANY or not _stack.frames
    for var, value in zip(variables, values):
        if outside:
            var._value = value
        else:
            set_global_value(var, value)
        var._pending_init = False


def set_global_value(var: VariableState, value: jax.Array) -> None:
    for frame in reversed(_stack.frames):
        if frame.level == "cross":
            if getattr(var, "_pending_init", False):
                frame.initialise(var, value)   # first value computed by a nested replica program
            else:
                frame.write(var, value)
            return
    var._value = value
