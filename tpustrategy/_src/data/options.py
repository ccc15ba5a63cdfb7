"""Dataset options (``tf.data.Options``) and the constants that go with them.

Options are pipeline-wide settings attached with ``Dataset.with_options``.
Like ``tf.data.Options`` they are mutable objects whose fields are validated
on assignment; a field that was never set is *unset* and inherits from
upstream. ``a.merge(b)`` returns a copy of ``a`` with every field that ``b``
sets overriding ``a`` (options set further downstream win).
"""

from __future__ import annotations

import copy
import enum
from typing import Any, ClassVar

AUTOTUNE = -1
"""Let the library pick a parallelism or buffer size (``tf.data.AUTOTUNE``)."""

SHARD_HINT = -1
"""Placeholder ``num_shards`` that the HINT auto-shard policy fills in."""

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


class AutoShardPolicy(enum.IntEnum):
    """How a dataset is split across input pipelines (``tf.data.experimental.AutoShardPolicy``).

    OFF: every pipeline reads everything. AUTO: shard by file when a reader is
    found, otherwise by data. FILE: pipeline i reads files i, i+W, ...
    DATA: every pipeline reads everything and keeps its share of elements.
    HINT: replace ``SHARD_HINT`` placeholders in ``shard`` calls.
    """

    OFF = -1
    AUTO = 0
    FILE = 1
    DATA = 2
    HINT = 3


class _OptionsBase:
    """Validated, mergeable option fields; subclasses list them in ``_fields``."""

    # name -> (allowed type(s), default, validator or None)
    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {}
    _aliases: ClassVar[dict[str, str]] = {}

    def __init__(self) -> None:
        object.__setattr__(self, "_values", {})
        for name, (kind, _default) in self._fields.items():
            if isinstance(kind, type) and issubclass(kind, _OptionsBase):
                self._values[name] = kind()

    def __getattr__(self, name: str) -> Any:
        name = type(self)._aliases.get(name, name)
        fields = type(self)._fields
        if name not in fields:
            raise AttributeError(self._unknown(name))
        return self._values.get(name, fields[name][1])

    def __setattr__(self, name: str, value: Any) -> None:
        name = type(self)._aliases.get(name, name)
        fields = type(self)._fields
        if name not in fields:
            raise AttributeError(self._unknown(name))
        kind, _default = fields[name]
        if isinstance(kind, type) and issubclass(kind, _OptionsBase):
            if not isinstance(value, kind):
                raise TypeError(
                    f"{type(self).__name__}.{name} must be a {kind.__name__}; received "
                    f"{type(value).__name__}: {value!r}.\n"
                    f"Fix: set its fields instead, e.g. options.{name}.<field> = ..."
                )
            self._values[name] = value
            return
        if value is None:
            self._values.pop(name, None)
            return
        self._values[name] = self._validate(name, kind, value)

    def _validate(self, name: str, kind: Any, value: Any) -> Any:
        cls = type(self).__name__
        if kind is bool:
            if not isinstance(value, bool):
                raise TypeError(
                    f"{cls}.{name} must be a bool; received {type(value).__name__}: {value!r}.\n"
                    f"Fix: set {name} = True or False (or None to unset it)."
                )
            return value
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(
                    f"{cls}.{name} must be an int; received {type(value).__name__}: {value!r}.\n"
                    f"Fix: set {name} to a non-negative int (or None to unset it)."
                )
            if value < 0:
                raise ValueError(f"{cls}.{name} must be >= 0; received {value}.")
            return value
        if isinstance(kind, type) and issubclass(kind, enum.Enum):
            try:
                return kind(value)
            except ValueError:
                valid = ", ".join(f"{kind.__name__}.{m.name}" for m in kind)
                raise ValueError(
                    f"{cls}.{name} must be one of {valid}; received {value!r}.\n"
                    f"Fix: use a member of {kind.__name__}."
                ) from None
        return value  # pragma: no cover

    def _unknown(self, name: str) -> str:
        valid = ", ".join(sorted([*type(self)._fields, *type(self)._aliases]))
        return (
            f"{type(self).__name__} has no option {name!r}. Valid options: {valid}.\n"
            "Fix: check the spelling against tf.data.Options."
        )

    def _is_set(self, name: str) -> bool:
        return name in self._values

    def merge(self, other: _OptionsBase) -> Any:
        """A copy of ``self`` where every field that ``other`` sets overrides it."""
        if type(other) is not type(self):
            raise TypeError(
                f"{type(self).__name__}.merge: expected a {type(self).__name__}; "
                f"received {type(other).__name__}."
            )
        out = copy.deepcopy(self)
        for name, value in other._values.items():
            if isinstance(value, _OptionsBase):
                out._values[name] = out._values[name].merge(value)
            else:
                out._values[name] = value
        return out

    def __deepcopy__(self, memo: dict) -> Any:
        new = type(self)()
        for k, v in self._values.items():
            new._values[k] = copy.deepcopy(v, memo)
        return new

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in type(self)._fields)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}={getattr(self, n)!r}" for n in type(self)._fields)
        return f"{type(self).__name__}({parts})"


class DistributeOptions(_OptionsBase):
    """Distribution options (``tf.data.experimental.DistributeOptions``).

    Attributes:
      auto_shard_policy: an `AutoShardPolicy` (default AUTO).
      num_devices: the number of devices the dataset is split over (or None).
    """

    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {
        "auto_shard_policy": (AutoShardPolicy, AutoShardPolicy.AUTO),
        "num_devices": (int, None),
    }


class ThreadingOptions(_OptionsBase):
    """Threading options (``tf.data.ThreadingOptions``); advisory here.

    Attributes:
      max_intra_op_parallelism: an upper bound on threads per operation.
      private_threadpool_size: the number of worker threads to use.
    """

    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {
        "max_intra_op_parallelism": (int, None),
        "private_threadpool_size": (int, None),
    }


class Options(_OptionsBase):
    """Pipeline-wide options (``tf.data.Options``).

    Attributes:
      deterministic: whether parallel transformations keep element order
        when they are called with ``deterministic=None`` (default True).
        ``experimental_deterministic`` is an alias.
      experimental_distribute: a `DistributeOptions`.
      threading: a `ThreadingOptions`.

    Example:
      >>> opts = Options()
      >>> opts.experimental_distribute.auto_shard_policy = AutoShardPolicy.DATA
      >>> ds = Dataset.range(8).with_options(opts)
    """

    _fields: ClassVar[dict[str, tuple[Any, Any]]] = {
        "deterministic": (bool, None),
        "experimental_distribute": (DistributeOptions, None),
        "threading": (ThreadingOptions, None),
    }
    _aliases: ClassVar[dict[str, str]] = {"experimental_deterministic": "deterministic"}
