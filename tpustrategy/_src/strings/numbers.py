"""``tf.strings.to_number`` and ``tf.strings.as_string``: between strings and numbers.

``to_number`` parses as TensorFlow's ``safe_strto*`` do: surrounding whitespace
is allowed, integers are plain decimal (an optional sign, digits) and must fit
the type, floats also take ``inf`` / ``nan`` and hexadecimal. ``as_string``
formats with C's ``printf`` rules, which Python's ``%`` operator follows.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.strings.ragged import RaggedRows, is_ragged, ragged_map
from tpustrategy._src.strings.tensor import (
    map_strings,
    numeric_result,
    string_array,
    string_result,
    tf_type_name,
)

_INT = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)[ \t\n\v\f\r]*\Z")
_FLOAT = re.compile(rb"[ \t\n\v\f\r]*([+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
                    rb"|inf|infinity|nan))[ \t\n\v\f\r]*\Z", re.IGNORECASE)
_HEX = re.compile(rb"[ \t\n\v\f\r]*([+-]?0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?)[ \t\n\v\f\r]*\Z",
                  re.IGNORECASE)
_NUMBER_TYPES = ("float32", "float64", "int32", "int64", "uint32", "uint64")


def as_numpy_dtype(dtype: Any, api: str, arg: str, allowed: tuple[str, ...]) -> np.dtype:
    """A dtype argument (a NumPy dtype, its name, or an object with ``as_numpy_dtype``) checked against ``allowed``."""
    raw = getattr(dtype, "as_numpy_dtype", dtype)
    try:
        out: np.dtype = np.dtype(raw)
    except TypeError:
        raise TypeError(f"{api}: `{arg}` must be a dtype; received {dtype!r}.\nFix: pass one of {list(allowed)}.") from None
    if out.name not in allowed:
        listed = ", ".join(tf_type_name(np.dtype(a)) for a in allowed)
        raise InvalidArgumentError(
            f"Value for attr '{arg}' of {tf_type_name(out)} is not in the list of allowed values: {listed}\n"
            f"({api}: Fix: pass one of {list(allowed)}.)")
    return out


def _parse(s: bytes, dtype: np.dtype) -> Any:
    if dtype.kind in "iu":
        m = _INT.match(s)
        value = int(m.group(1)) if m else None
        info = np.iinfo(dtype)
        if value is not None and info.min <= value <= info.max:
            return value
    else:
        m = _FLOAT.match(s)
        if m:
            return float(m.group(1))
        m = _HEX.match(s)
        if m:
            text = m.group(1).decode()
            sign = -1.0 if text.startswith("-") else 1.0
            return sign * float.fromhex(text.lstrip("+-"))
    shown = s.decode("utf-8", "replace")
    raise InvalidArgumentError(
        f"StringToNumberOp could not correctly convert string: {shown}\n"
        f"(tps.strings.to_number: Fix: clean the input first, e.g. tps.strings.strip or regex_replace, "
        f"or pick out_type={'float32' if dtype.kind in 'iu' else dtype.name} for it.)")


def to_number(input: Any, out_type: Any = np.float32, name: str | None = None) -> Any:  # noqa: A002
    """Parses each string as a number (``tf.strings.to_number``).

    Args:
      input: a string scalar or tensor (or a `RaggedRows` of strings).
      out_type: float32 (default), float64, int32, int64, uint32 or uint64.
      name: ignored.

    Returns:
      Numbers of ``out_type`` and the input's shape.

    Raises:
      InvalidArgumentError: a string is not a number of ``out_type`` (TensorFlow's message).
    """
    api = "tps.strings.to_number"
    dtype = as_numpy_dtype(out_type, api, "out_type", _NUMBER_TYPES)
    if is_ragged(input):
        values = string_array(input.values, api)
        mask = np.arange(values.shape[-1]) < np.asarray(input.row_lengths)[..., None]
        out = np.zeros(values.shape, dtype=dtype)
        out[mask] = [_parse(s, dtype) for s in values[mask].tolist()]
        lengths = np.asarray(input.row_lengths)
        return RaggedRows(out, lengths, np.asarray(getattr(input, "shapes", lengths[..., None])))
    arr = string_array(input, api)
    with np.errstate(over="ignore"):
        return numeric_result(map_strings(lambda s: _parse(s, dtype), arr, dtype))


def as_string(input: Any, precision: int = -1, scientific: bool = False, shortest: bool = False,  # noqa: A002
              width: int = -1, fill: str = "", name: str | None = None) -> Any:
    """Formats each number as a string (``tf.strings.as_string``).

    Args:
      input: a numeric, bool or string tensor.
      precision: digits after the point for floats (-1: printf's default, 6).
      scientific: use ``%e`` notation for floats.
      shortest: use ``%g`` notation for floats.
      width: pad to this many characters (-1: no padding).
      fill: the padding character: ``""`` or ``" "`` (spaces), ``"0"`` (zeros), ``"-"`` (left-align).
      name: ignored.

    Returns:
      A string tensor of ``input``'s shape.

    Raises:
      InvalidArgumentError: ``scientific`` and ``shortest`` together, ``fill`` longer than one
        character, or ``precision`` / notation for a non-float type.
    """
    api = "tps.strings.as_string"
    if is_ragged(input):
        return ragged_map(input, lambda v: as_string(v, precision, scientific, shortest, width, fill))
    if isinstance(input, (bytes, str)) or (isinstance(input, np.ndarray) and input.dtype.kind in "OSU"):
        return string_result(string_array(input, api))
    arr = np.asarray(input)
    if arr.dtype.name == "bfloat16":  # ml_dtypes' bfloat16 formats through float32, as TensorFlow's does
        arr = arr.astype(np.float32)
    kind = arr.dtype.kind
    if kind in "fc" and scientific and shortest:
        raise InvalidArgumentError(f"Cannot select both scientific and shortest notation\n({api}: Fix: pick one.)")
    if kind not in "fc" and (scientific or shortest):
        raise InvalidArgumentError(f"scientific and shortest format not supported for datatype {arr.dtype.name}\n"
                                   f"({api}: Fix: these options apply to float tensors; cast first.)")
    if kind not in "fc" and precision > -1:
        raise InvalidArgumentError(f"precision not supported for datatype {arr.dtype.name}\n"
                                   f"({api}: Fix: precision applies to float tensors; cast first.)")
    if len(fill) > 1:
        raise InvalidArgumentError(f"Fill string must be one or fewer characters\n({api}: received fill={fill!r}.)")
    if fill and fill not in _FILLS:
        raise InvalidArgumentError(f'Fill argument not supported: "{fill}"\n'
                                   f"({api}: Fix: fill is a printf flag: one of {list(_FILLS)}.)")
    if kind == "b":
        return string_result(map_strings(lambda v: b"true" if v else b"false", arr.astype(object)))
    if kind not in "fciu":
        raise TypeError(f"{api}: `input` dtype {arr.dtype} cannot be formatted.\nFix: pass numbers, bools or strings.")
    spec = "%" + fill + (str(width) if width > -1 else "")
    if kind in "fc":
        spec += (f".{precision}" if precision > -1 else "") + ("e" if scientific else "g" if shortest else "f")
        fmt = lambda v: _c_float(spec, fill, width, v)  # noqa: E731
    else:
        spec += "d"
        fmt = lambda v: spec % int(v)  # noqa: E731
    if kind == "c":
        flat = [f"({fmt(v.real)},{fmt(v.imag)})".encode() for v in map(complex, arr.reshape(-1).tolist())]
    else:
        flat = [fmt(v).encode() for v in arr.reshape(-1).tolist()]
    out = np.empty(arr.shape, dtype=object)
    out.reshape(-1)[:] = flat
    return string_result(out)


_FILLS = (" ", "+", "-", "0", "#")


def _c_float(spec: str, fill: str, width: int, value: float) -> str:
    """``spec % value`` as C's printf writes it (inf / nan: no zero padding, the sign of nan kept)."""
    value = float(value)
    if math.isfinite(value):
        return spec % value
    text = ("-" if math.copysign(1.0, value) < 0 else "+" if fill == "+" else " " if fill == " " else "")
    text += "inf" if math.isinf(value) else "nan"
    pad = max(0, width - len(text))
    return text + " " * pad if fill == "-" else " " * pad + text


def _tf_name(dtype: np.dtype) -> str:
    return {"bool": "bool"}.get(dtype.name, dtype.name)


def float_text(value: float, dtype: np.dtype) -> str:
    """TensorFlow's shortest round-trip text of a float (``%.6g`` / ``%.9g``; ``%.15g`` / ``%.17g`` for doubles)."""
    if math.isnan(value):
        return "nan" if math.copysign(1.0, value) > 0 else "-nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if dtype == np.float64:
        text = f"{value:.15g}"
        return text if float(text) == value else f"{value:.17g}"
    text = f"{value:.6g}"
    return text if np.float32(float(text)) == np.float32(value) else f"{value:.9g}"
