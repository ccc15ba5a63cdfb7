"""``tf.strings.ngrams``: the n-grams of each sequence of strings, joined with ``separator``.

The last dimension is the sequence (a `RaggedRows` row, or the last axis of a
dense tensor). With ``pad_values`` each sequence is padded on the left and right
by ``padding_width`` copies (default ``ngram_width - 1``, at most that);
``preserve_short_sequences`` keeps one n-gram of a non-empty sequence too short
for any.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.strings.ragged import from_rows, is_ragged, rows_of
from tpustrategy._src.strings.tensor import OBJECT, string_array


def _as_bytes(value: Any) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _row_ngrams(row: list[bytes], widths: list[int], sep: bytes, left: bytes | None, right: bytes | None,
                padding_width: int | None, preserve: bool) -> list[bytes]:
    out: list[bytes] = []
    for w in widths:
        pad = 0 if left is None else min(w - 1, w - 1 if padding_width is None else padding_width)
        seq = [left] * pad + row + [right] * pad
        count = len(seq) - w + 1
        if count > 0:
            out.extend(sep.join(seq[i : i + w]) for i in range(count))
        elif preserve and row:
            out.append(sep.join(seq))
    return out


def ngrams(data: Any, ngram_width: Any, separator: Any = " ", pad_values: Any = None, padding_width: Any = None,
           preserve_short_sequences: bool = False, name: str | None = None) -> Any:
    """The n-grams of each sequence (``tf.strings.ngrams``).

    Args:
      data: strings ``[..., sequence]``, or a `RaggedRows`.
      ngram_width: an int, or a list of ints (their n-grams one after another, per width).
      separator: put between the strings of an n-gram.
      pad_values: None, one string for both ends, or ``(left, right)``.
      padding_width: pad strings per end (None: ``ngram_width - 1``); needs ``pad_values``.
      preserve_short_sequences: give a too-short (non-empty) sequence one n-gram of all of it.
      name: ignored.

    Returns:
      Like ``data``: a `RaggedRows` for ragged data, else a dense array (rows of one length).

    Raises:
      ValueError: ``ngram_width`` or ``padding_width`` not positive, or ``pad_values`` not one or two strings.
    """
    api = "tps.strings.ngrams"
    widths = [int(w) for w in (ngram_width if isinstance(ngram_width, (list, tuple)) else [ngram_width])]
    if any(w < 1 for w in widths):
        raise ValueError(f"{api}: ngram_width must be greater than 0; received {ngram_width!r}.\nFix: e.g. 2 for bigrams.")
    if padding_width is not None and int(padding_width) < 1:
        raise ValueError(f"{api}: padding_width must be greater than 0; received {padding_width!r}.\n"
                         "Fix: pass a positive int or None.")
    left = right = None
    if pad_values is not None:
        if isinstance(pad_values, (bytes, str)):
            left = right = _as_bytes(pad_values)
        elif isinstance(pad_values, (list, tuple)) and len(pad_values) == 2:
            left, right = (_as_bytes(v) for v in pad_values)
        else:
            raise ValueError(f"{api}: pad_values must be a string, a pair of strings, or None; received {pad_values!r}.\n"
                             "Fix: e.g. pad_values=('<s>', '</s>').")
    sep = _as_bytes(separator)
    pw = None if padding_width is None else int(padding_width)
    if is_ragged(data):
        rows, leading = rows_of(data)
        rows = [string_array(r, api, "data").tolist() if r else [] for r in rows]
        grams = [_row_ngrams(r, widths, sep, left, right, pw, preserve_short_sequences) for r in rows]
        return from_rows(grams, leading, OBJECT)
    arr = string_array(data, api, "data")
    if arr.ndim == 0:
        raise ValueError(f"{api}: `data` must have at least one dimension (the sequence); received a scalar.\n"
                         "Fix: pass a 1-D tensor of tokens, e.g. tps.strings.split(text).")
    leading = arr.shape[:-1]
    flat = arr.reshape(-1, arr.shape[-1])
    grams = [_row_ngrams(r.tolist(), widths, sep, left, right, pw, preserve_short_sequences) for r in flat]
    count = len(grams[0]) if grams else 0
    out = np.empty((*leading, count), dtype=OBJECT)
    if count:
        out.reshape(-1, count)[:] = grams
    return out
