"""``tf.strings.regex_full_match`` and ``regex_replace`` with RE2, TensorFlow's regex engine.

Python's ``re`` differs from RE2 (no backreferences or look-around in RE2,
``\\z`` for end of text, RE2 matches UTF-8 characters, and empty matches next to
a previous match are handled differently), so the patterns run on RE2 itself
through the ``google-re2`` package (extra ``strings``). The rewrite string is
RE2's: ``\\0`` .. ``\\9`` insert groups and ``\\\\`` a backslash; a rewrite naming
a group the pattern lacks leaves the string unchanged, as in TensorFlow.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.strings.ragged import is_ragged, ragged_map
from tpustrategy._src.strings.tensor import map_strings, numeric_result, string_array, string_result


def _re2() -> Any:
    try:
        import re2
    except ImportError:
        raise ImportError(
            "tps.strings.regex_full_match / regex_replace run TensorFlow's regex engine, RE2, from the "
            "`google-re2` package.\nFix: pip install 'tpustrategy[strings]' (or pip install google-re2)."
        ) from None
    return re2


def _as_bytes(value: Any, api: str, arg: str) -> bytes:
    if isinstance(value, np.ndarray) and value.ndim == 0:  # a scalar string tensor
        value = value[()]
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, bytes):
        return bytes(value)
    raise TypeError(f"{api}: `{arg}` must be a string (bytes or str); received {type(value).__name__}: {value!r}.\n"
                    f"Fix: pass one pattern string, e.g. {arg}=r'\\d+'.")


@functools.lru_cache(maxsize=256)
def _compile(pattern: bytes, api: str) -> Any:
    re2 = _re2()
    options = re2.Options()
    options.log_errors = False  # the error is raised, not logged to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as e:
        text = pattern.decode("utf-8", "replace")
        reason = e.args[0] if e.args else ""
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else str(reason)
        raise InvalidArgumentError(
            f"Invalid pattern: {text}, error: {reason}\n({api}: Fix: write the pattern in RE2 syntax, "
            "https://github.com/google/re2/wiki/Syntax.)") from None


def regex_full_match(input: Any, pattern: Any, name: str | None = None) -> Any:  # noqa: A002
    """Whether each whole string matches ``pattern`` (``tf.strings.regex_full_match``).

    Args:
      input: a string scalar or tensor.
      pattern: an RE2 pattern (one string).
      name: ignored.

    Returns:
      bool of ``input``'s shape.

    Raises:
      InvalidArgumentError: ``pattern`` is not valid RE2.
    """
    api = "tps.strings.regex_full_match"
    if is_ragged(input):
        return ragged_map(input, lambda v: regex_full_match(v, pattern))
    arr = string_array(input, api)
    regex = _compile(_as_bytes(pattern, api, "pattern"), api)
    return numeric_result(map_strings(lambda s: regex.fullmatch(s) is not None, arr, bool))


def _rewrite_parts(rewrite: bytes, groups: int) -> list[bytes | int] | None:
    """The rewrite as literal pieces and group numbers; None where RE2 refuses it."""
    parts: list[bytes | int] = []
    literal = bytearray()
    i = 0
    while i < len(rewrite):
        c = rewrite[i : i + 1]
        if c != b"\\":
            literal += c
            i += 1
            continue
        nxt = rewrite[i + 1 : i + 2]
        if nxt.isdigit():
            if int(nxt) > groups:
                return None
            parts.extend([bytes(literal), int(nxt)])
            literal = bytearray()
        elif nxt == b"\\":
            literal += b"\\"
        else:
            return None
        i += 2
    parts.append(bytes(literal))
    return parts


def _utf8_step(s: bytes, p: int) -> int:
    """The length of the UTF-8 character at ``p`` (1 for a byte that starts none)."""
    b = s[p]
    width = 1 if b < 0xC0 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4 if b < 0xF8 else 1
    return max(1, min(width, len(s) - p))


def _replace(s: bytes, regex: Any, parts: list[bytes | int], replace_global: bool) -> bytes:
    out = bytearray()
    p, last_end, count = 0, -1, 0
    while p <= len(s):
        m = regex.search(s, p)
        if m is None:
            break
        start, end = m.span()
        out += s[p:start]
        if start == end and start == last_end:
            # RE2 allows no empty match where the previous match ended: copy one character on.
            if start >= len(s):
                break
            step = _utf8_step(s, start)
            out += s[start : start + step]
            p = start + step
            continue
        for part in parts:
            out += (m.group(part) or b"") if isinstance(part, int) else part
        p = last_end = end
        count += 1
        if not replace_global:
            break
    if count == 0:
        return s
    out += s[p:]
    return bytes(out)


def regex_replace(input: Any, pattern: Any, rewrite: Any, replace_global: bool = True,  # noqa: A002
                  name: str | None = None) -> Any:
    """Replaces matches of ``pattern`` with ``rewrite`` (``tf.strings.regex_replace``).

    Args:
      input: a string scalar or tensor.
      pattern: an RE2 pattern.
      rewrite: the replacement; ``\\1`` inserts group 1, ``\\0`` the whole match, ``\\\\`` a backslash.
      replace_global: replace every match (True) or only the first.
      name: ignored.

    Returns:
      A string tensor of ``input``'s shape.

    Raises:
      InvalidArgumentError: ``pattern`` is not valid RE2.
    """
    api = "tps.strings.regex_replace"
    if is_ragged(input):
        return ragged_map(input, lambda v: regex_replace(v, pattern, rewrite, replace_global))
    arr = string_array(input, api)
    regex = _compile(_as_bytes(pattern, api, "pattern"), api)
    parts = _rewrite_parts(_as_bytes(rewrite, api, "rewrite"), regex.groups)
    if parts is None:
        return string_result(arr.copy())
    return string_result(map_strings(lambda s: _replace(s, regex, parts, bool(replace_global)), arr))
