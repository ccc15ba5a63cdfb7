"""A variable's identity: one id counter shared by new variables and their copies, and ``ref()``."""

from __future__ import annotations

import itertools
from typing import Any

_counter = itertools.count()


def next_id() -> int:
    """The next unused variable id (unique in this process)."""
    return next(_counter)


class VariableRef:
    """A hashable reference to a variable (``tf.Variable.ref()``): equal references name one variable."""

    __slots__ = ("_variable",)

    def __init__(self, variable: Any):
        self._variable = variable

    def deref(self) -> Any:
        """The variable this reference names."""
        return self._variable

    def __hash__(self) -> int:
        return hash(self._variable.unique_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VariableRef) and other._variable is self._variable

    def __repr__(self) -> str:
        return f"<Reference wrapping {self._variable!r}>"
