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
        pad = 0 if left is None or right is None else min(w - 1, w - 1 if padding_width is None else padding_width)
        seq: list[bytes] = [left or b""] * pad + row + [right or b""] * pad
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
      ValueError: ``ngram_width`` or ``padding_width`` not positive, ``padding_width`` without
        ``pad_values``, or scalar ``data`` (TensorFlow's messages).
      TypeError: ``pad_values`` is not a string or a pair of strings.
    """
    api = "tps.strings.ngrams"
    widths = [int(w) for w in (ngram_width if isinstance(ngram_width, (list, tuple)) else [ngram_width])]
    if any(w < 1 for w in widths):
        raise ValueError(f"All ngram_widths must be greater than 0. Got {ngram_width}\n"
                         f"({api}: Fix: e.g. ngram_width=2 for bigrams.)")
    left = right = None
    if pad_values is not None:
        if isinstance(pad_values, (bytes, str)):
            left = right = _as_bytes(pad_values)
        elif (isinstance(pad_values, (list, tuple)) and len(pad_values) == 2
              and all(isinstance(v, (bytes, str)) for v in pad_values)):
            left, right = (_as_bytes(v) for v in pad_values)
        else:
            raise TypeError("pad_values must be a string, tuple of strings, or None.\n"
                            f"({api}: received {pad_values!r}. Fix: e.g. pad_values=('<s>', '</s>').)")
    if padding_width is not None:
        if pad_values is None:
            raise ValueError("pad_values must be provided if padding_width is set.\n"
                             f"({api}: Fix: pass pad_values, e.g. pad_values='<pad>', or drop padding_width.)")
        if int(padding_width) < 1:
            raise ValueError(f"padding_width must be greater than 0.\n({api}: received {padding_width!r}. "
                             "Fix: pass a positive int, or None for ngram_width - 1.)")
    sep = _as_bytes(separator)
    pw = None if padding_width is None else int(padding_width)
    if is_ragged(data):
        rows, leading = rows_of(data)
        rows = [string_array(r, api, "data").tolist() if r else [] for r in rows]
        grams = [_row_ngrams(r, widths, sep, left, right, pw, preserve_short_sequences) for r in rows]
        return from_rows(grams, leading, OBJECT)
    arr = string_array(data, api, "data")
    if arr.ndim == 0:
        raise ValueError("Data must have rank>0\n"
                         f"({api}: Fix: pass a 1-D tensor of tokens, e.g. tps.strings.split(text).)")
    leading = arr.shape[:-1]
    flat = arr.reshape(-1, arr.shape[-1])
    grams = [_row_ngrams(r.tolist(), widths, sep, left, right, pw, preserve_short_sequences) for r in flat]
    count = len(grams[0]) if grams else 0
    out = np.empty((*leading, count), dtype=OBJECT)
    if count:
        out.reshape(-1, count)[:] = grams
    return out
