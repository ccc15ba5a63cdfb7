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


def _scalar(value: Any, dtype: np.dtype) -> str:
    if dtype.kind in "OSU":
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
        return f'"{text}"'
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
        return "[" + " ".join(items) + "]"
    items = ["..." if i is None else _summarize(arr[i], summarize, depth + 1) for i in idx]
    return "[" + ("\n" + " " * (depth + 1)).join(items) + "]"


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
    return out.encode("utf-8")
