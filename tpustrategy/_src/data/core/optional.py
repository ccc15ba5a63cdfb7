"""`Optional`: a value that may be absent (``tf.experimental.Optional``), and ``get_next_as_optional``."""

from __future__ import annotations

from typing import Any


class Optional:
    """Holds one element or nothing.

    Example:
      >>> opt = Optional.from_value(3)
      >>> opt.has_value(), opt.get_value()
      (True, 3)
    """

    def __init__(self, value: Any = None, has_value: bool = False, element_spec: Any = None):
        self._value, self._has = value, bool(has_value)
        self._spec = element_spec

    @staticmethod
    def from_value(value: Any) -> Optional:
        """An optional holding ``value``."""
        from tpustrategy._src.data.core.structure import spec_of_element

        return Optional(value, True, spec_of_element(value))

    @staticmethod
    def empty(element_spec: Any) -> Optional:
        """An optional holding nothing, for elements of ``element_spec``."""
        return Optional(None, False, element_spec)

    def has_value(self, name: str | None = None) -> bool:
        """Whether a value is held."""
        return self._has

    def get_value(self, name: str | None = None) -> Any:
        """The value held.

        Raises:
          InvalidArgumentError: the optional is empty.
        """
        if not self._has:
            from tpustrategy._src.errors import InvalidArgumentError

            raise InvalidArgumentError(
                "Optional.get_value: the optional has no value.\n"
                "Fix: check has_value() first (an iterator's get_next_as_optional() is empty at the end)."
            )
        return self._value

    @property
    def element_spec(self) -> Any:
        return self._spec

    def __repr__(self) -> str:
        return f"Optional({self._value!r})" if self._has else "Optional(empty)"


def get_next_as_optional(iterator: Any) -> Optional:
    """The iterator's next element as an `Optional` (empty at the end of the stream)."""
    try:
        value = next(iterator)
    except StopIteration:
        return Optional.empty(getattr(iterator, "element_spec", None))
    return Optional(value, True, getattr(iterator, "element_spec", None))
