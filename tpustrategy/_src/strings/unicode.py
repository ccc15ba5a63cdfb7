"""``tf.strings.unicode_decode`` / ``encode`` / ``split`` / ``transcode``: strings and code points.

Each invalid byte sequence (the longest prefix of a valid sequence, or one
byte) counts as one error, as ICU counts it in TensorFlow: ``errors="replace"``
gives one ``replacement_char`` for it, ``"ignore"`` drops it, ``"strict"``
raises. Encodings: UTF-8, UTF-16(-BE / -LE), UTF-32(-BE / -LE), ISO-8859-1, US-ASCII, and other ICU
names that Python has a text codec for (SHIFT-JIS, EUC-KR, windows-1252, ...).
"""

from __future__ import annotations

import codecs
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.strings.ragged import from_rows, is_ragged, ragged_map, rows_of
from tpustrategy._src.strings.split import pieces_result
from tpustrategy._src.strings.tensor import OBJECT, check_choice, string_array, string_result

_CODECS = {"UTF-8": "utf-8", "UTF-16-BE": "utf-16-be", "UTF-16-LE": "utf-16-le", "UTF-32-BE": "utf-32-be",
           "UTF-32-LE": "utf-32-le", "ISO-8859-1": "latin-1", "US-ASCII": "ascii", "UTF-16": "utf-16",
           "UTF-32": "utf-32"}
# Bare UTF-16 / UTF-32 (as ICU reads them): a byte-order mark picks the order and is dropped; without one,
# big-endian.
_BOMS = {"utf-16": ((b"\xfe\xff", "utf-16-be"), (b"\xff\xfe", "utf-16-le")),
         "utf-32": ((b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe\x00\x00", "utf-32-le"))}
_OUT_CODECS = ("UTF-8", "UTF-16-BE", "UTF-32-BE")
_ERRORS = ("strict", "replace", "ignore")


def _codec(encoding: Any, api: str, direction: str) -> str:
    codec = _CODECS.get(str(encoding).upper())
    if codec is None:
        # Other ICU converter names (SHIFT-JIS, EUC-KR, windows-1252, ...): Python's text codec of that name.
        try:
            info = codecs.lookup(str(encoding))
            codec = info.name if getattr(info, "_is_text_encoding", True) else None
        except LookupError:
            codec = None
    if codec is None:
        raise InvalidArgumentError(
            f"Could not create converter for {direction} encoding: {encoding}\n"
            f"({api}: Fix: use one of {sorted(_CODECS)}.)")
    return codec


def _units(data: bytes, codec: str) -> list[tuple[int | None, int, int]]:
    """``(code point or None for an invalid sequence, start byte, end byte)`` for each character."""
    out: list[tuple[int | None, int, int]] = []
    pos = 0
    if codec in _BOMS:
        bare = codec
        codec = bare + "-be"
        for bom, ordered in _BOMS[bare]:
            if data.startswith(bom):
                codec, pos = ordered, len(bom)
                break
    while pos < len(data):
        try:
            text = data[pos:].decode(codec)
            bad = None
        except UnicodeDecodeError as e:
            text = data[pos : pos + e.start].decode(codec)
            bad = (pos + e.start, pos + e.end)
        for ch in text:
            width = len(ch.encode(codec))
            out.append((ord(ch), pos, pos + width))
            pos += width
        if bad is None:
            break
        out.append((None, bad[0], bad[1]))
        pos = bad[1]
    return out


def _check_replacement(replacement_char: Any, api: str) -> int:
    char = int(replacement_char)
    if not 0 <= char <= 0x10FFFF:
        raise InvalidArgumentError(f"replacement_char out of unicode codepoint range\n({api}: received "
                                   f"{char}. Fix: pass a code point in [0, 0x10FFFF], e.g. 65533 (U+FFFD).)")
    return char


def _decode_one(data: bytes, codec: str, errors: str, replacement_char: int,
                replace_controls: bool) -> tuple[list[int], list[int]]:
    chars, offsets = [], []
    for cp, start, _ in _units(data, codec):
        if cp is None:
            if errors == "strict":
                raise InvalidArgumentError("Invalid formatting on input string\n(tps.strings.unicode_decode: "
                                           f"received {data!r}. Fix: errors='replace' or 'ignore'.)")
            if errors == "ignore":
                continue
            cp = replacement_char
        elif replace_controls and cp < 0x20:
            # A C0 control counts as an error: dropped under "ignore", else replaced (decode never raises for it).
            if errors == "ignore":
                continue
            cp = replacement_char
        chars.append(cp)
        offsets.append(start)
    return chars, offsets


def _decode(input: Any, input_encoding: str, errors: str, replacement_char: int,  # noqa: A002
            replace_control_characters: bool, api: str) -> tuple[np.ndarray, list[list[int]], list[list[int]]]:
    check_choice(errors, _ERRORS, api, "errors")
    codec = _codec(input_encoding, api, "input")
    replacement_char = _check_replacement(replacement_char, api)
    arr = string_array(input, api)
    decoded = [_decode_one(s, codec, errors, replacement_char, bool(replace_control_characters))
               for s in arr.reshape(-1).tolist()]
    return arr, [d[0] for d in decoded], [d[1] for d in decoded]


def _rows(rows: list[list[int]], shape: tuple[int, ...], dtype: Any) -> Any:
    if shape == ():
        return np.array(rows[0], dtype=dtype)
    return from_rows(rows, shape, dtype)


def unicode_decode(input: Any, input_encoding: str, errors: str = "replace",  # noqa: A002
                   replacement_char: int = 65533, replace_control_characters: bool = False,
                   name: str | None = None) -> Any:
    """Each string's Unicode code points (``tf.strings.unicode_decode``).

    Args:
      input: a string scalar or tensor.
      input_encoding: ``"UTF-8"``, ``"UTF-16-BE"``, ``"UTF-32-BE"``, ``"ISO-8859-1"``, ...
      errors: ``"replace"``, ``"ignore"`` or ``"strict"`` for invalid sequences.
      replacement_char: the code point put for an invalid sequence.
      replace_control_characters: also replace C0 controls (U+0000..U+001F).
      name: ignored.

    Returns:
      int32 code points: 1-D for a scalar, a `RaggedRows` for a tensor.
    """
    arr, rows, _ = _decode(input, input_encoding, errors, replacement_char, replace_control_characters,
                           "tps.strings.unicode_decode")
    return _rows(rows, arr.shape, np.int32)


def unicode_decode_with_offsets(input: Any, input_encoding: str, errors: str = "replace",  # noqa: A002
                                replacement_char: int = 65533, replace_control_characters: bool = False,
                                name: str | None = None) -> tuple[Any, Any]:
    """`unicode_decode` and each character's start byte, int64 (``tf.strings.unicode_decode_with_offsets``)."""
    arr, rows, offsets = _decode(input, input_encoding, errors, replacement_char, replace_control_characters,
                                 "tps.strings.unicode_decode_with_offsets")
    return _rows(rows, arr.shape, np.int32), _rows(offsets, arr.shape, np.int64)


def _encode_cp(cp: int, codec: str, errors: str, replacement_char: int) -> bytes:
    if 0 <= cp <= 0x10FFFF and not 0xD800 <= cp <= 0xDFFF:
        return chr(cp).encode(codec)
    if errors == "strict":
        raise InvalidArgumentError("Code point is out of range for Unicode, or is a surrogate.\n"
                                   f"(tps.strings.unicode_encode: received {cp}. Fix: errors='replace' or 'ignore'.)")
    if errors == "ignore":
        return b""
    # A surrogate replacement character cannot be written either; ICU writes U+FFFD for it.
    return chr(0xFFFD if 0xD800 <= replacement_char <= 0xDFFF else replacement_char).encode(codec)


def unicode_encode(input: Any, output_encoding: str, errors: str = "replace",  # noqa: A002
                   replacement_char: int = 65533, name: str | None = None) -> Any:
    """Code points to strings (``tf.strings.unicode_encode``).

    Args:
      input: int32 code points: ``[..., chars]`` dense, or a `RaggedRows`.
      output_encoding: ``"UTF-8"``, ``"UTF-16-BE"`` or ``"UTF-32-BE"``.
      errors: ``"replace"``, ``"ignore"`` or ``"strict"`` for invalid code points.
      replacement_char: the code point put for an invalid one.
      name: ignored.

    Returns:
      A string tensor of the input's shape without its last dimension (``bytes`` for 1-D input).
    """
    api = "tps.strings.unicode_encode"
    check_choice(errors, _ERRORS, api, "errors")
    check_choice(output_encoding, _OUT_CODECS, api, "output_encoding")
    codec = _CODECS[output_encoding]
    replacement_char = _check_replacement(replacement_char, api)
    if is_ragged(input):
        rows, leading = rows_of(input)
    else:
        arr = np.asarray(input)
        if arr.ndim == 0:
            raise ValueError(f"{api}: `input` must have at least one dimension (the characters); received a scalar.\n"
                             "Fix: pass [code_point].")
        leading = arr.shape[:-1]
        rows = arr.reshape(-1, arr.shape[-1]).tolist() if arr.size else [[] for _ in range(int(np.prod(leading)))]
    out = np.empty(leading, dtype=OBJECT)
    out.reshape(-1)[:] = [b"".join(_encode_cp(int(c), codec, errors, int(replacement_char)) for c in r)
                          for r in rows] if rows else []
    return string_result(out)


def _split(input: Any, input_encoding: str, errors: str, replacement_char: int, api: str,  # noqa: A002
           with_offsets: bool) -> Any:
    arr, rows, offsets = _decode(input, input_encoding, errors, replacement_char, False, api)
    codec = {"utf-16": "utf-16-be", "utf-32": "utf-32-be"}.get(_CODECS[str(input_encoding).upper()],
                                                             _CODECS[str(input_encoding).upper()])
    pieces = [[_encode_cp(c, codec, "replace", 0xFFFD) for c in r] for r in rows]
    chars = pieces_result(pieces, arr.shape)
    return (chars, _rows(offsets, arr.shape, np.int64)) if with_offsets else chars


def unicode_split(input: Any, input_encoding: str, errors: str = "replace",  # noqa: A002
                  replacement_char: int = 65533, name: str | None = None) -> Any:
    """Each string split into its characters, each encoded in ``input_encoding`` (``tf.strings.unicode_split``)."""
    return _split(input, input_encoding, errors, replacement_char, "tps.strings.unicode_split", False)


def unicode_split_with_offsets(input: Any, input_encoding: str, errors: str = "replace",  # noqa: A002
                               replacement_char: int = 65533, name: str | None = None) -> tuple[Any, Any]:
    """`unicode_split` and each character's start byte (``tf.strings.unicode_split_with_offsets``)."""
    chars, offsets = _split(input, input_encoding, errors, replacement_char, "tps.strings.unicode_split_with_offsets",
                            True)
    return chars, offsets


def unicode_transcode(input: Any, input_encoding: str, output_encoding: str, errors: str = "replace",  # noqa: A002
                      replacement_char: int = 65533, replace_control_characters: bool = False,
                      name: str | None = None) -> Any:
    """Each string re-encoded from ``input_encoding`` to ``output_encoding`` (``tf.strings.unicode_transcode``)."""
    api = "tps.strings.unicode_transcode"
    if is_ragged(input):
        return ragged_map(input, lambda v: unicode_transcode(v, input_encoding, output_encoding, errors,
                                                             replacement_char, replace_control_characters))
    check_choice(output_encoding, _OUT_CODECS, api, "output_encoding")
    if errors == "strict" and replace_control_characters:
        # Transcoding (unlike decoding) treats a C0 control as a strict error.
        for text in string_array(input, api).reshape(-1).tolist():
            if any(b < 0x20 for b in text):
                raise InvalidArgumentError("Invalid formatting on input string\n(tps.strings.unicode_transcode: "
                                           "a control character with replace_control_characters=True and "
                                           "errors='strict'. Fix: errors='replace' or 'ignore'.)")
    arr, rows, _ = _decode(input, input_encoding, errors, replacement_char, replace_control_characters, api)
    codec = _CODECS[output_encoding]
    out = np.empty(arr.shape, dtype=OBJECT)
    out.reshape(-1)[:] = [b"".join(_encode_cp(c, codec, errors, int(replacement_char)) for c in r) for r in rows]
    return string_result(out)


