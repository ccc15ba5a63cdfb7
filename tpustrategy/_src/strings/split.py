"""``tf.strings.split`` and ``tf.strings.bytes_split``: a string into pieces.

A scalar gives a 1-D array of ``bytes``; a tensor of shape ``S`` gives a
`RaggedRows` of shape ``[*S, (pieces)]``, as TensorFlow gives a ``RaggedTensor``.
Without ``sep`` (or with ``sep=""``) the string splits on runs of ASCII
whitespace (space, ``\\t \\n \\v \\f \\r``) and empty pieces are dropped; with
``sep`` every occurrence splits, so empty pieces stay.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.strings.ragged import RaggedRows, from_rows, is_ragged
from tpustrategy._src.strings.tensor import OBJECT, string_array


def pieces_result(pieces: list[list[bytes]], shape: tuple[int, ...]) -> np.ndarray | RaggedRows:
    """One list of pieces per input string: a 1-D array for a scalar input, else `RaggedRows`."""
    if shape == ():
        out = np.empty(len(pieces[0]), dtype=OBJECT)
        out[:] = pieces[0]
        return out
    return from_rows(pieces, shape, OBJECT)


def _refuse_ragged(input: Any, api: str) -> None:  # noqa: A002
    if is_ragged(input):
        raise TypeError(
            f"{api}: `input` is ragged ({type(input).__name__}); its result would have two ragged dimensions, "
            "which RaggedRows cannot hold.\nFix: split each row, e.g. [split(row) for row in input.to_list()], "
            "or split input.flat_values.")


def split(input: Any, sep: Any = None, maxsplit: int = -1, name: str | None = None) -> Any:  # noqa: A002
    """Splits each string at ``sep`` (TensorFlow's ``tf.strings.split``).

    Args:
      input: a string scalar or tensor (``bytes``, ``str`` or an object array of ``bytes``).
      sep: the separator (``bytes`` or ``str``); None or empty: runs of ASCII whitespace.
      maxsplit: the most splits per string; -1: no limit.
      name: ignored (TensorFlow's op name).

    Returns:
      A 1-D object array of ``bytes`` for a scalar input; a `RaggedRows` for a tensor.

    Example:
      >>> split(b"a,b,,c", ",")          # array([b'a', b'b', b'', b'c'], dtype=object)
      >>> split([b"a b", b"c"]).to_list()  # [[b'a', b'b'], [b'c']]
    """
    api = "tps.strings.split"
    _refuse_ragged(input, api)
    arr = string_array(input, api)
    if isinstance(sep, str):
        sep = sep.encode("utf-8")
    if sep is not None and not isinstance(sep, bytes):
        raise TypeError(f"{api}: `sep` must be bytes, str or None; received {type(sep).__name__}: {sep!r}.\n"
                        "Fix: e.g. split(line, sep=',').")
    if isinstance(maxsplit, bool) or not isinstance(maxsplit, (int, np.integer)):
        raise TypeError(f"{api}: `maxsplit` must be an int; received {maxsplit!r}.\nFix: e.g. maxsplit=-1 (no limit).")
    sep = sep or None
    pieces = [s.split(sep, int(maxsplit)) for s in arr.reshape(-1).tolist()]
    return pieces_result(pieces, arr.shape)


def bytes_split(input: Any, name: str | None = None) -> Any:  # noqa: A002
    """Splits each string into its bytes (TensorFlow's ``tf.strings.bytes_split``).

    Args:
      input: a string scalar or tensor.
      name: ignored.

    Returns:
      A 1-D object array of one-byte ``bytes`` for a scalar; a `RaggedRows` for a tensor.
    """
    _refuse_ragged(input, "tps.strings.bytes_split")
    arr = string_array(input, "tps.strings.bytes_split")
    pieces = [[s[i : i + 1] for i in range(len(s))] for s in arr.reshape(-1).tolist()]
    return pieces_result(pieces, arr.shape)
