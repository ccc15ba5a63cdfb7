"""``tf.strings.format``: tensors printed into a template, TensorFlow's way.

A tensor prints as TensorFlow's ``SummarizeValue`` does: nested brackets,
elements separated by a space and rows by a newline, the first and last
``summarize`` entries of each long dimension around ``...``, floats in their
shortest round-trip form (``%.6g`` / ``%.9g``), bools as 1 / 0 and strings in
double quotes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.strings.numbers import float_text

_ESCAPES = {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", ord('"'): '\\"', ord("'"): "\\'",
            ord("\\"): "\\\\"}


def _c_escape(data: bytes) -> str:
    """Utf8SafeCEscape: quotes, backslash and controls escaped (octal), bytes >= 0x80 kept as they are."""
    out = []
    for b in data:
        if b in _ESCAPES:
            out.append(_ESCAPES[b])
        elif b < 0x20 or b == 0x7F:
            out.append(f"\\{b:03o}")
        else:
            out.append(bytes([b]).decode("utf-8", "surrogateescape"))
    return "".join(out)


def _scalar(value: Any, dtype: np.dtype) -> str:
    if dtype.kind in "OSU":
        data = value if isinstance(value, bytes) else str(value).encode("utf-8")
        return f'"{_c_escape(data)}"'
    if dtype.kind == "b":
        return "1" if value else "0"
    if dtype.kind == "f":
        return float_text(float(value), np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32))
    return str(int(value))


def _summarize(arr: np.ndarray, summarize: int, depth: int) -> str:
    n = arr.shape[0]
    cut = 0 <= summarize and n > 2 * summarize
    idx = [*range(summarize), None, *range(n - summarize, n)] if cut else list(range(n))
    if arr.ndim == 1:
        items = ["..." if i is None else _scalar(arr[i], arr.dtype) for i in idx]
        return "[" + (" " if cut and summarize == 0 else "") + " ".join(items) + "]"
    # Rows of a matrix sit on their own lines; blocks of higher rank are also kept apart by blank lines.
    gap = "\n" * (arr.ndim - 1) + " " * (depth + 1)
    items = ["..." if i is None else _summarize(arr[i], summarize, depth + 1) for i in idx]
    return "[" + gap.join(items) + "]"


def summarize_value(value: Any, summarize: int) -> str:
    """``value`` printed as TensorFlow prints a tensor in ``tf.strings.format``."""
    if isinstance(value, (bytes, str)):
        return _scalar(value.encode() if isinstance(value, str) else value, np.dtype(object))
    arr = np.asarray(value)
    if arr.dtype.kind == "U":
        arr = arr.astype(object)
    if arr.ndim == 0:
        return _scalar(arr[()], arr.dtype)
    if arr.size == 0:
        return "[]"
    return _summarize(arr, summarize, 0)


def format(template: str, inputs: Any, placeholder: str = "{}", summarize: int = 3,  # noqa: A001
           name: str | None = None) -> bytes:
    """Formats ``inputs`` into ``template`` at each ``placeholder`` (``tf.strings.format``).

    Args:
      template: the text, with one ``placeholder`` per input.
      inputs: a tensor or a list of tensors.
      placeholder: the marker replaced by each input in turn.
      summarize: entries printed at each end of a dimension (-1: all).
      name: ignored.

    Returns:
      The formatted string, ``bytes``.

    Raises:
      ValueError: the placeholder count differs from the number of inputs (TensorFlow's message).
    """
    if isinstance(template, bytes):
        template = template.decode("utf-8")
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    pieces = template.split(placeholder)
    if len(pieces) - 1 != len(inputs):
        raise ValueError(
            f"The template expects {len(pieces) - 1} tensors, but the inputs only has {len(inputs)}. "
            "Please ensure the number of placeholders in template matches inputs length.")
    out = pieces[0]
    for value, piece in zip(inputs, pieces[1:]):
        out += summarize_value(value, int(summarize)) + piece
    return out.encode("utf-8", "surrogateescape")
