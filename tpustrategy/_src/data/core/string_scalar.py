"""`StringScalar`: a scalar string as a dataset function sees it (TensorFlow's 0-d string tensor).

Elements keep scalar strings as Python ``bytes`` (DESIGN §1, "strings as
bytes"). A TensorFlow function, though, receives a 0-d string tensor and may
index it like an array: ``eg[tf.newaxis]`` makes the batch of one that
``parse_example`` wants. `StringScalar` is a ``bytes`` subclass, so it *is* the
same bytes everywhere (equality, hashing, slicing ``eg[2:5]``, writers and
parsers accept it), and also answers the array questions: ``shape``, ``ndim``,
``dtype``, ``numpy()``, and NumPy-style indexing with ``None`` /
``np.newaxis``, ``...`` or ``()``, which returns an object array of ``bytes``.

The functions given to ``map``, ``filter``, ``flat_map``, ``interleave`` and the
other transformations get a `StringScalar` where their argument is a scalar
string; values they return unchanged come out as plain ``bytes`` again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_OBJECT = np.dtype(object)


class StringScalar(bytes):
    """A ``bytes`` value that also indexes like a 0-d NumPy string array.

    Example:
      >>> eg = StringScalar(b"serialized")
      >>> eg[np.newaxis]            # array([b'serialized'], dtype=object)
      >>> eg == b"serialized", eg[:3]  # (True, b'ser')
    """

    __slots__ = ()

    shape: tuple[int, ...] = ()
    ndim = 0
    size = 1
    dtype = _OBJECT

    def __getitem__(self, index: Any) -> Any:  # type: ignore[override]
        if index is None or index is Ellipsis or isinstance(index, tuple):
            return self._as_array()[index]
        return bytes.__getitem__(self, index)

    def _as_array(self) -> np.ndarray:
        out = np.empty((), dtype=_OBJECT)
        out[()] = bytes(self)
        return out

    def numpy(self) -> bytes:
        """The plain ``bytes`` (TensorFlow's ``tensor.numpy()`` of a string scalar)."""
        return bytes(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (bytes, (bytes(self),))


def wrap(value: Any) -> Any:
    """``value`` as a `StringScalar` if it is plain ``bytes``, otherwise unchanged."""
    return StringScalar(value) if type(value) is bytes else value


def unwrap(value: Any) -> Any:
    """Plain ``bytes`` for a `StringScalar`, otherwise ``value`` unchanged."""
    return bytes(value) if type(value) is StringScalar else value
