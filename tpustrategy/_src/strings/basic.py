"""Element-wise string ops: ``join``, ``length``, ``lower``, ``upper``, ``strip``, ``substr``.

Each works on a string scalar or tensor and keeps its shape (``join`` broadcasts
scalars against one common shape, as TensorFlow does). ``lower`` / ``upper``
change ASCII letters only unless ``encoding="utf-8"``, and ``strip`` removes
ASCII whitespace, as TensorFlow's kernels do.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError, OutOfRangeError
from tpustrategy._src.strings.ragged import is_ragged, ragged_map
from tpustrategy._src.strings.tensor import (
    OBJECT,
    check_choice,
    int_array,
    map_strings,
    numeric_result,
    string_array,
    string_result,
)

_UNITS = ("BYTE", "UTF8_CHAR")
_len = builtins.len  # `len` is an argument of substr, as in TensorFlow


def _utf8_chars(s: bytes) -> int:
    return sum(1 for b in s if b & 0xC0 != 0x80)


def join(inputs: Any, separator: Any = "", name: str | None = None) -> Any:
    """Joins the strings of several tensors element-wise (``tf.strings.join``).

    Args:
      inputs: a list of string tensors of one shape, or scalars (which broadcast).
      separator: put between the joined strings.
      name: ignored.

    Returns:
      A string tensor of the common shape (``bytes`` when every input is a scalar).

    Raises:
      InvalidArgumentError: two non-scalar inputs have different shapes.
    """
    api = "tps.strings.join"
    if isinstance(inputs, (bytes, str, np.ndarray)) or not isinstance(inputs, (list, tuple)):
        raise TypeError(f"{api}: `inputs` must be a list of string tensors; received {type(inputs).__name__}.\n"
                        "Fix: e.g. join([a, b], separator='-').")
    sep = separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)
    arrays = [string_array(x, api, "inputs") for x in inputs]
    shape: tuple[int, ...] | None = None
    for a in arrays:
        if a.ndim == 0:
            continue
        if shape is None:
            shape = a.shape
        elif a.shape != shape:
            raise InvalidArgumentError(
                f"Input shapes do not match: {list(shape)} vs. {list(a.shape)}\n"
                f"({api}: Fix: give the inputs one shape, or pass scalars, which broadcast.)".replace(", ", ","))
    shape = shape or ()
    full = [np.broadcast_to(a, shape).reshape(-1) for a in arrays]
    size = int(np.prod(shape, dtype=np.int64))
    out = np.empty(shape, dtype=OBJECT)
    out.reshape(-1)[:] = [sep.join(col[i] for col in full) for i in range(size)] if size else []
    return string_result(out)


def length(input: Any, unit: str = "BYTE", name: str | None = None) -> Any:  # noqa: A002
    """Each string's length in bytes or UTF-8 characters (``tf.strings.length``).

    Args:
      input: a string scalar or tensor.
      unit: ``"BYTE"`` or ``"UTF8_CHAR"`` (code points of valid UTF-8).
      name: ignored.

    Returns:
      int32 lengths of ``input``'s shape.
    """
    api = "tps.strings.length"
    check_choice(unit, _UNITS, api, "unit")
    if is_ragged(input):
        return ragged_map(input, lambda v: length(v, unit))
    arr = string_array(input, api)
    count = len if unit == "BYTE" else _utf8_chars
    return numeric_result(map_strings(count, arr, np.int32))


def _case(input: Any, encoding: str, api: str, to_lower: bool) -> Any:  # noqa: A002
    check_choice(encoding, ("", "utf-8"), api, "encoding")
    if is_ragged(input):
        return ragged_map(input, lambda v: _case(v, encoding, api, to_lower))
    arr = string_array(input, api)
    def unicode_case(s: bytes) -> bytes:
        text = s.decode("utf-8", "surrogateescape")
        return (text.lower() if to_lower else text.upper()).encode("utf-8", "surrogateescape")

    ascii_case = bytes.lower if to_lower else bytes.upper
    return string_result(map_strings(ascii_case if encoding == "" else unicode_case, arr))


def lower(input: Any, encoding: str = "", name: str | None = None) -> Any:  # noqa: A002
    """Lower-cases each string (``tf.strings.lower``).

    Args:
      input: a string scalar or tensor.
      encoding: ``""``: ASCII letters only; ``"utf-8"``: every Unicode letter.
      name: ignored.
    """
    return _case(input, encoding, "tps.strings.lower", True)


def upper(input: Any, encoding: str = "", name: str | None = None) -> Any:  # noqa: A002
    """Upper-cases each string (``tf.strings.upper``); see `lower` for ``encoding``."""
    return _case(input, encoding, "tps.strings.upper", False)


def strip(input: Any, name: str | None = None) -> Any:  # noqa: A002
    """Removes leading and trailing ASCII whitespace from each string (``tf.strings.strip``)."""
    if is_ragged(input):
        return ragged_map(input, strip)
    arr = string_array(input, "tps.strings.strip")
    return string_result(map_strings(bytes.strip, arr))


def _char_starts(s: bytes) -> list[int]:
    return [i for i, b in enumerate(s) if b & 0xC0 != 0x80]


def substr(input: Any, pos: Any, len: Any, unit: str = "BYTE", name: str | None = None) -> Any:  # noqa: A002
    """The substring of each string at ``pos`` of length ``len`` (``tf.strings.substr``).

    A negative ``pos`` counts from the end; ``len`` past the end (or negative) stops at the
    end. ``pos`` and ``len`` broadcast against ``input``.

    Args:
      input: a string scalar or tensor.
      pos: int32 / int64 start positions.
      len: int32 / int64 lengths.
      unit: ``"BYTE"`` or ``"UTF8_CHAR"`` (positions count UTF-8 characters).
      name: ignored.

    Raises:
      InvalidArgumentError: a position outside ``[-length, length]`` of its string.
    """
    api = "tps.strings.substr"
    check_choice(unit, _UNITS, api, "unit")
    if is_ragged(input):
        if np.ndim(pos) or np.ndim(len):
            raise ValueError(f"{api}: with a RaggedRows input, pos and len must be scalars; received shapes "
                             f"{np.shape(pos)} and {np.shape(len)}.\nFix: pass one pos and one len.")
        return ragged_map(input, lambda v: substr(v, pos, len, unit))
    arr = string_array(input, api)
    p = int_array(pos, api, "pos")
    n = int_array(len, api, "len")
    if p.shape != n.shape:
        raise ValueError(
            f"{api}: pos and len must have the same shape; received pos of shape {list(p.shape)} and len of shape "
            f"{list(n.shape)}.\nFix: pass them with one shape (np.broadcast_to(len, np.shape(pos))).")
    try:
        shape = np.broadcast_shapes(arr.shape, p.shape, n.shape)
    except ValueError:
        raise ValueError(
            f"{api}: input of shape {list(arr.shape)}, pos of shape {list(p.shape)} and len of shape "
            f"{list(n.shape)} do not broadcast together.\nFix: give pos and len input's shape, or a shape that "
            "broadcasts to it (e.g. one value per column).") from None
    strings = np.broadcast_to(arr, shape).reshape(-1)
    ps = np.broadcast_to(p, shape).reshape(-1).tolist()
    ns = np.broadcast_to(n, shape).reshape(-1).tolist()
    out = []
    for i, (s, start, count) in enumerate(zip(strings.tolist(), ps, ns)):
        starts = _char_starts(s) if unit == "UTF8_CHAR" else None
        size = _len(starts) if starts is not None else _len(s)
        if start < -size or start > size:
            shown = f"for string {s!r} " if unit == "BYTE" else "for string "
            raise InvalidArgumentError(
                f"pos {start} out of range {shown}at index {i}\n"
                f"({api}: Fix: keep pos within [-len(string), len(string)] of each string.)")
        if start < 0:
            start += size
        stop = size if count < 0 else min(size, start + count)
        if starts is None:
            out.append(s[start:stop])
        else:
            bounds = starts + [_len(s)]
            out.append(s[bounds[start] : bounds[stop]])
    result = np.empty(shape, dtype=OBJECT)
    result.reshape(-1)[:] = out
    return string_result(result)




def reduce_join(inputs: Any, axis: Any = None, keepdims: bool = False, separator: Any = "",
                name: str | None = None) -> Any:
    """Joins the strings along ``axis`` (``tf.strings.reduce_join``).

    Strings join in row-major order of the reduced axes (with several axes, the
    first listed varies fastest, as TensorFlow reduces them one after another).

    Args:
      inputs: a string tensor, or a `RaggedRows` (then ``axis`` -1 joins each row).
      axis: an int or list of ints; None: every axis.
      keepdims: keep the reduced axes with size 1.
      separator: put between joined strings.
      name: ignored.

    Raises:
      OutOfRangeError: an axis outside ``[-rank, rank)``.
    """
    api = "tps.strings.reduce_join"
    sep = separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)
    if is_ragged(inputs):
        from tpustrategy._src.strings.ragged import rows_of

        rows, leading = rows_of(inputs)
        rank = _len(leading) + 1
        axes = [rank - 1] if axis is None else [int(a) for a in np.asarray(axis).reshape(-1).tolist()]
        if [a % rank for a in axes] != [rank - 1]:
            raise InvalidArgumentError(f"{api}: a RaggedRows joins only along its ragged (last) axis; received "
                                       f"axis={axis!r}.\nFix: pass axis=-1, or to_tensor() first.")
        out = np.empty(leading, dtype=OBJECT)
        out.reshape(-1)[:] = [sep.join(string_array(r, api, "inputs").tolist()) for r in rows] if rows else []
        if keepdims:
            out = out[..., None]
        return string_result(out)
    arr = string_array(inputs, api, "inputs")
    rank = arr.ndim
    if axis is None:
        axes = list(range(rank - 1, -1, -1))
    else:
        axes = [int(a) for a in np.asarray(axis).reshape(-1).tolist()]
    norm = []
    for a in axes:
        if not -rank <= a < rank:
            raise OutOfRangeError(
                f"Invalid reduction dimension {a} for input with {rank} dimension(s)\n"
                f"({api}: Fix: pass axis in [-{rank}, {rank}).)")
        a %= rank
        if a in norm:
            raise InvalidArgumentError(f"Duplicate reduction dimension {a}\n({api}: Fix: list each axis once.)")
        norm.append(a)
    kept = [a for a in range(rank) if a not in norm]
    moved = np.transpose(arr, kept + norm[::-1]) if rank else arr
    kept_shape = tuple(arr.shape[a] for a in kept)
    reduced = int(np.prod([arr.shape[a] for a in norm], dtype=np.int64))
    flat = moved.reshape(int(np.prod(kept_shape, dtype=np.int64)), reduced) if rank else moved.reshape(1, 1)
    out = np.empty(kept_shape, dtype=OBJECT)
    out.reshape(-1)[:] = [sep.join(row.tolist()) for row in flat] if flat.shape[0] else []
    if keepdims:
        out = out.reshape(tuple(1 if a in norm else arr.shape[a] for a in range(rank)))
    return string_result(out)


def unsorted_segment_join(inputs: Any, segment_ids: Any, num_segments: Any, separator: Any = "",
                          name: str | None = None) -> Any:
    """Joins the strings of each segment (``tf.strings.unsorted_segment_join``).

    Args:
      inputs: a string tensor.
      segment_ids: int ids, of a shape that is a prefix of ``inputs``'s shape.
      num_segments: the number of segments (the output's first dimension).
      separator: put between joined strings.
      name: ignored.

    Returns:
      A string tensor ``[num_segments, *inputs.shape[segment_ids.ndim:]]``; "" for empty segments.

    Raises:
      InvalidArgumentError: an id is negative or not below ``num_segments``.
    """
    api = "tps.strings.unsorted_segment_join"
    sep = separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)
    arr = string_array(inputs, api, "inputs")
    ids = int_array(segment_ids, api, "segment_ids")
    k = int(num_segments)
    if arr.shape[: ids.ndim] != ids.shape:
        raise InvalidArgumentError(
            f"segment_ids.shape = {list(ids.shape)} is not a prefix of inputs.shape = {list(arr.shape)}\n"
            f"({api}: Fix: give one id per leading slice of inputs.)")
    if ids.size and (ids.min() < 0 or ids.max() >= k):
        raise InvalidArgumentError(
            "segment_ids are not allowed to exceed num_segments or to have negative values.\n"
            f"({api}: received ids {ids.tolist()} with num_segments={k}. Fix: keep every id in [0, num_segments).)")
    inner = arr.shape[ids.ndim :]
    flat_in = arr.reshape(ids.size, -1) if ids.size else arr.reshape(0, int(np.prod(inner, dtype=np.int64)))
    groups: list[list[list[bytes]]] = [[[] for _ in range(flat_in.shape[1])] for _ in range(k)]
    for row, seg in zip(flat_in, ids.reshape(-1).tolist()):
        for j, s in enumerate(row.tolist()):
            groups[seg][j].append(s)
    out = np.empty((k, *inner), dtype=OBJECT)
    out.reshape(-1)[:] = [sep.join(parts) for seg in groups for parts in seg] if out.size else []
    return out
