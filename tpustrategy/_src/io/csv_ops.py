"""``decode_csv``: CSV records (strings) to one tensor per column (``tf.io.decode_csv``).

TensorFlow's rules, field by field: a field starting with ``"`` is quoted (``""`` inside is
one quote, the closing quote must be followed by the delimiter or the end); an unquoted
field may hold no quote, CR or LF; CR/LF before a field are skipped; an empty field or one
equal to ``na_value`` takes the column's default, and a column whose default is empty is
required. Numbers follow TensorFlow's parsers (absl ``SimpleAtoi`` / ``SimpleAtof``):
surrounding ASCII whitespace is allowed, ints are decimal, floats also take ``inf``,
``nan`` and hexadecimal (``0x1p3``), correctly rounded to float32 / float64.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.io._tensors import dtype_name, string_array, to_bytes
from tpustrategy._src.io.tensor_proto import tf_type_name, to_tensor

_API = "tps.io.decode_csv"
_ALLOWED = ("float32", "float64", "int32", "int64", "string")
_SPACE = b" \t\n\v\f\r"
_INT = re.compile(rb"[+-]?[0-9]+\Z")
_DEC = re.compile(rb"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?\Z")
_HEX = re.compile(rb"([+-]?)0[xX]([0-9a-fA-F]*)\.?([0-9a-fA-F]*)(?:[pP]([+-]?[0-9]+))?\Z")
_SPECIAL = re.compile(rb"([+-]?)(inf|infinity|nan(\([0-9A-Za-z_]*\))?)\Z", re.IGNORECASE)
_F32_MAX = float(np.finfo(np.float32).max)


def _convert_leaf(value: Any) -> Any:
    """TensorFlow types a NumPy integer inside a list as a Python int; floats keep their dtype."""
    if isinstance(value, list | tuple):
        return [_convert_leaf(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    return value


def _default_tensor(value: Any, index: int) -> np.ndarray:
    """One record default as TensorFlow's ``convert_to_tensor`` types it."""
    if isinstance(value, type | np.dtype) or type(value).__name__ == "DType":
        raise ValueError(
            f"Attempt to convert a value ({value!r}) with an unsupported type "
            f"({type(value)}) to a Tensor.\n{_API}: record_defaults[{index}] must be a default "
            "value (e.g. [0], [0.0], ['']) or an empty array of the column's dtype for a "
            "required column. Fix: pass np.array([], np.int32) instead of a dtype.")
    if isinstance(value, list | tuple):
        leaves = np.asarray(value, dtype=object).reshape(-1).tolist() if value else []
        floats = [v for v in leaves if isinstance(v, np.floating)]
        if floats and len(floats) == len(leaves):
            return np.asarray(value, dtype=np.result_type(*floats))
        value = _convert_leaf(value)
        if value == []:  # an empty list is a float32 tensor in TensorFlow
            return np.zeros((0,), np.float32)
    return to_tensor(value, api=_API, arg=f"record_defaults[{index}]")


def _ascii(field: bytes) -> str:
    return field.decode("utf-8", "backslashreplace")


def _extract_fields(record: bytes, delim: int, use_quote: bool,
                    select: list[int] | None) -> list[bytes]:
    """The selected fields of one record, with TensorFlow's quoting errors."""
    fields: list[bytes] = []
    n, pos, parsed, wanted = len(record), 0, 0, 0
    if not n:
        return fields
    if b"\r" not in record and b"\n" not in record and not (use_quote and b'"' in record):
        # Nothing quoted and no line breaks: the fields are exactly the delimiter's pieces.
        pieces = record.split(bytes((delim,)))
        return pieces if select is None else [pieces[c] for c in select if c < len(pieces)]
    quote, cr, lf = 0x22, 0x0D, 0x0A
    while pos < n:
        if record[pos] in (cr, lf):
            pos += 1
            continue
        include = select is None or select[wanted] == parsed
        field = bytearray()
        if use_quote and record[pos] == quote:
            pos += 1
            while pos < n - 1 and (record[pos] != quote or record[pos + 1] != delim):
                if record[pos] != quote:
                    field.append(record[pos])
                    pos += 1
                    continue
                if record[pos + 1] != quote:
                    raise InvalidArgumentError(
                        "Quote inside a string has to be escaped by another quote"
                        f"\n{_API}: in record {record!r}, write a quote inside a quoted field as "
                        '"" or pass use_quote_delim=False.')
                field.append(quote)
                pos += 2
            if not (pos < n and record[pos] == quote and (pos == n - 1 or record[pos + 1] == delim)):
                raise InvalidArgumentError(
                    "Quoted field has to end with quote followed by delim or end"
                    f"\n{_API}: record {record!r} has an unterminated quoted field. Fix the "
                    "record, or pass use_quote_delim=False to read quotes as characters.")
            pos += 2
        else:
            while pos < n and record[pos] != delim:
                c = record[pos]
                if (use_quote and c == quote) or c in (cr, lf):
                    raise InvalidArgumentError(
                        "Unquoted fields cannot have quotes/CRLFs inside"
                        f"\n{_API}: record {record!r}. Quote the field (\"...\"), strip line "
                        "endings from records, or pass use_quote_delim=False.")
                field.append(c)
                pos += 1
            pos += 1
        parsed += 1
        if include:
            fields.append(bytes(field))
            wanted += 1
            if select is not None and wanted == len(select):
                return fields
    if (select is None or select[wanted] == parsed) and record[-1] == delim:
        fields.append(b"")
    return fields


def _exact(text: bytes) -> Fraction:
    """The exact value of a decimal or hexadecimal float literal."""
    hexa = _HEX.match(text)
    if hexa is None:
        return Fraction(text.decode("ascii"))
    sign, whole, frac, exp = hexa.groups()
    value = Fraction(int((whole + frac) or b"0", 16), 16 ** len(frac)) * Fraction(2) ** int(exp or 0)
    return -value if sign == b"-" else value


def _parse_float(text: bytes, single: bool) -> float | None:
    """absl's SimpleAtof / SimpleAtod of a stripped field: the correctly rounded value, or
    None if it is not a number."""
    special = _SPECIAL.match(text)
    if special:
        value = float("nan") if special.group(2)[:1].lower() == b"n" else float("inf")
        return -value if special.group(1) == b"-" else value
    hexa = _HEX.match(text)
    if hexa and (hexa.group(2) or hexa.group(3)):
        try:
            value = float.fromhex(text.decode("ascii"))
        except OverflowError:
            value = float("-inf") if text.startswith(b"-") else float("inf")
    elif _DEC.match(text):
        value = float(text)
    else:
        return None
    if not single:
        return value
    return _round_to_float32(text, value)


def _round_to_float32(text: bytes, value: float) -> float:
    """float32 nearest to the literal, not to its double (which can differ at halfway points)."""
    with np.errstate(over="ignore"):
        near = float(np.float32(value))
    if near == value or value != value:
        return near
    if abs(near) == float("inf"):
        near, other = float(np.copysign(2.0 ** 128, value)), float(np.copysign(_F32_MAX, value))
    else:
        toward = np.float32(np.copysign(np.inf, value - near))
        other = float(np.nextafter(np.float32(near), toward))
    if (near + other) / 2 != value:
        return near if abs(near) != 2.0 ** 128 else float(np.copysign(np.inf, value))
    exact, mid = _exact(text), Fraction(value)
    pick = near if exact == mid else (max(near, other) if exact > mid else min(near, other))
    return pick if abs(pick) != 2.0 ** 128 else float(np.copysign(np.inf, value))


def _parse_int(text: bytes, bits: int) -> int | None:
    """absl's SimpleAtoi of a stripped field: decimal digits with an optional sign."""
    if not _INT.match(text):
        return None
    value = int(text)
    return value if -(1 << (bits - 1)) <= value < (1 << (bits - 1)) else None


def _check_select_cols(select_cols: Any, n_defaults: int) -> list[int] | None:
    if select_cols is None:
        return None
    cols = [int(c) for c in select_cols]
    if any(cols[i] >= cols[i + 1] for i in range(len(cols) - 1)):
        raise ValueError("select_cols is not strictly increasing.\n"
                         f"{_API}: received select_cols={cols}; list each column once, in "
                         "increasing order, with record_defaults in the same order.")
    if not cols:
        raise IndexError("list index out of range\n"
                         f"{_API}: select_cols=[] selects no column. Fix: pass select_cols=None "
                         "to read every column, or the indices of the columns to read.")
    if cols[0] < 0:
        raise ValueError("select_cols contains negative values.\n"
                         f"{_API}: received select_cols={cols}; column indices start at 0.")
    if len(cols) != n_defaults:
        raise ValueError("Length of select_cols and record_defaults do not match.\n"
                         f"{_API}: received {len(cols)} select_cols and {n_defaults} "
                         "record_defaults; give one default per selected column.")
    return cols


def decode_csv(records: Any, record_defaults: Any, field_delim: str = ",",
               use_quote_delim: bool = True, na_value: str = "", select_cols: Any = None,
               name: str | None = None) -> list[Any]:
    """Converts CSV records to one array per column (``tf.io.decode_csv``).

    RFC 4180 quoting: a field in double quotes may hold the delimiter, newlines and ``""``
    (one quote). Int and float fields may have leading and trailing spaces.

    Args:
      records: a string tensor of any shape (``bytes``, or an array of ``bytes``); each
        string is one record (row).
      record_defaults: one entry per column: a default value (``[0]``, ``[0.0]``, ``['']``,
        ``np.array([7], np.int64)`` or a scalar), whose dtype is the column's dtype, or an
        empty array (``np.array([], np.int32)``) for a required column. Python ints are
        int32 (int64 beyond int32's range), floats float32; dtypes allowed: float32,
        float64, int32, int64, string.
      field_delim: the one-character field delimiter.
      use_quote_delim: if False, double quotes are ordinary characters.
      na_value: a field equal to this string is missing (takes the default).
      select_cols: sorted, unique column indices to read (one per record default); the
        other columns are skipped (and not checked after the last selected one).
      name: unused (TensorFlow's op name).

    Returns:
      A list with one array per column, each of ``records``' shape and the column's dtype
      (object arrays of ``bytes`` for strings; for a scalar record, 0-d arrays and ``bytes``).

    Raises:
      tps.errors.InvalidArgumentError: TensorFlow's messages: ``Expect 3 fields but have 2 in
        record 0``, ``Field 1 is required but missing in record 2!``, ``Field 1 in record 1 is
        not a valid int32: 234a``, quoting errors, a default with more than one value.
      ValueError: select_cols not strictly increasing, negative, or not one per default.
    """
    del name
    defaults_in = list(record_defaults) if isinstance(record_defaults, np.ndarray) else record_defaults
    if not isinstance(defaults_in, list | tuple):
        raise TypeError(f"{_API}: record_defaults must be a list with one default per column. "
                        f"Received: record_defaults={record_defaults!r}.")
    select = _check_select_cols(select_cols, len(defaults_in))
    defaults = [_default_tensor(d, i) for i, d in enumerate(defaults_in)]
    types = [dtype_name(d.dtype) for d in defaults]
    for t in types:
        if t not in _ALLOWED:
            raise InvalidArgumentError(
                f"Value for attr 'OUT_TYPE' of {tf_type_name(t)} is not in the list of allowed "
                "values: float, double, int32, int64, string"
                f"\n{_API}: record_defaults give the column dtypes; use float32, float64, int32, "
                "int64 or string defaults (e.g. np.array([0], np.int64)) and cast afterwards.")
    if not defaults:
        raise InvalidArgumentError(
            "Length for attr 'OUT_TYPE' of 0 must be at least minimum 1"
            f"\n{_API}: record_defaults is empty; give one default per column.")
    delim = to_bytes(field_delim)
    if len(delim) != 1:
        raise InvalidArgumentError(
            f"field_delim should be only 1 char\n{_API}: received field_delim={field_delim!r}.")
    for i, d in enumerate(defaults):
        if d.ndim > 1:
            raise InvalidArgumentError(
                "Each record default should be at most rank 1"
                f"\n{_API}: record_defaults[{i}] has shape {list(d.shape)}; write [0], not [[0]].")
        if d.size > 1:
            raise InvalidArgumentError(
                f"There should only be 1 default per field but field {i} has {d.size}"
                f"\n{_API}: record_defaults[{i}] must be one value ([x]) or empty (required).")
    na = to_bytes(na_value)
    strings = string_array(records, api=_API, arg="records")
    flat = strings.reshape(-1)
    values: list[list[Any]] = [[None] * len(flat) for _ in types]
    texts: list[dict[int, bytes]] = [{} for _ in types]  # float32 columns: decimal text per row
    for row, record in enumerate(flat):
        fields = _extract_fields(record, delim[0], bool(use_quote_delim), select)
        if len(fields) != len(types):
            raise InvalidArgumentError(
                f"Expect {len(types)} fields but have {len(fields)} in record {row}"
                f"\n{_API}: record {row} is {record!r}; give one record default per column "
                "(or select_cols to read some of them).")
        for col, (field, t) in enumerate(zip(fields, types, strict=True)):
            if not field or field == na:
                if defaults[col].size != 1:
                    raise InvalidArgumentError(
                        f"Field {col} is required but missing in record {row}!"
                        f"\n{_API}: record {row} is {record!r}; give column {col} a default "
                        "value in record_defaults to allow missing values.")
                values[col][row] = defaults[col].reshape(-1)[0]
                continue
            if t == "string":
                values[col][row] = field
                continue
            text = field.strip(_SPACE)
            if t.startswith("int"):
                value: float | int | None = _parse_int(text, 32 if t == "int32" else 64)
            elif _DEC.match(text):  # the common case: rounded to float32 below, all at once
                value = float(text)
                if t == "float32":
                    texts[col][row] = text
            else:
                value = _parse_float(text, t == "float32")
            if value is None:
                raise InvalidArgumentError(
                    f"Field {col} in record {row} is not a valid {tf_type_name(t)}: "
                    f"{_ascii(field)}\n{_API}: record {row} is {record!r}.")
            values[col][row] = value
    out: list[Any] = []
    for col, t in enumerate(types):
        column: np.ndarray[Any, Any]
        if t == "string":
            column = np.empty(len(flat), object)
            column[:] = values[col]
        elif t == "float32":
            column = _to_float32(np.array(values[col], np.float64), texts[col])
        else:
            column = np.array(values[col], t).reshape(len(flat))
        column = column.reshape(strings.shape)
        out.append(column[()] if t == "string" and column.ndim == 0 else column)
    return out


def _to_float32(doubles: np.ndarray, texts: dict[int, bytes]) -> np.ndarray:
    """Rounds parsed doubles to float32; the rare double that sits exactly halfway between
    two float32 values (or at the overflow threshold) is rounded again from its text."""
    with np.errstate(over="ignore", invalid="ignore"):
        singles = doubles.astype(np.float32)
        inexact = (singles.astype(np.float64) != doubles) & np.isfinite(doubles)
        if not inexact.any():
            return singles
        toward = np.copysign(np.float32(np.inf), (doubles - singles.astype(np.float64)).astype(np.float32))
        other = np.nextafter(singles, toward)
        halfway = (singles.astype(np.float64) + other.astype(np.float64)) / 2 == doubles
    for row in np.flatnonzero(inexact & (halfway | np.isinf(singles))):
        if int(row) in texts:
            singles[row] = _round_to_float32(texts[int(row)], float(doubles[row]))
    return singles
