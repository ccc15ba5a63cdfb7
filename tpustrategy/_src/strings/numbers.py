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

from tpustrategy._src.strings.ragged import RaggedRows, is_ragged
from tpustrategy._src.strings.tensor import map_strings, numeric_result, string_array, string_result

_INT = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)[ \t\n\v\f\r]*\Z")
_FLOAT = re.compile(rb"[ \t\n\v\f\r]*([+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
                    rb"|inf|infinity|nan))[ \t\n\v\f\r]*\Z", re.IGNORECASE)
_HEX = re.compile(rb"[ \t\n\v\f\r]*([+-]?0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?)[ \t\n\v\f\r]*\Z",
                  re.IGNORECASE)
_NUMBER_TYPES = ("float32", "float64", "int32", "int64")


def as_numpy_dtype(dtype: Any, api: str, arg: str, allowed: tuple[str, ...]) -> np.dtype:
    """A dtype argument (a NumPy dtype, its name, or an object with ``as_numpy_dtype``) checked against ``allowed``."""
    from tpustrategy._src.errors import InvalidArgumentError

    raw = getattr(dtype, "as_numpy_dtype", dtype)
    try:
        out = np.dtype(raw)
    except TypeError:
        raise TypeError(f"{api}: `{arg}` must be a dtype; received {dtype!r}.\nFix: pass one of {list(allowed)}.") from None
    if out.name not in allowed:
        listed = ", ".join(allowed)
        raise InvalidArgumentError(
            f"Value for attr '{arg}' of {out.name} is not in the list of allowed values: {listed}\n"
            f"({api}: Fix: pass one of {list(allowed)}.)")
    return out


def _parse(s: bytes, dtype: np.dtype) -> Any:
    from tpustrategy._src.errors import InvalidArgumentError

    if dtype.kind == "i":
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
        f"or pick out_type={'float32' if dtype.kind == 'i' else dtype.name} for it.)")


def to_number(string_tensor: Any, out_type: Any = np.float32, name: str | None = None) -> Any:
    """Parses each string as a number (``tf.strings.to_number``).

    Args:
      string_tensor: a string scalar or tensor (or a `RaggedRows` of strings).
      out_type: float32 (default), float64, int32 or int64.
      name: ignored.

    Returns:
      Numbers of ``out_type`` and the input's shape.

    Raises:
      InvalidArgumentError: a string is not a number of ``out_type`` (TensorFlow's message).
    """
    api = "tps.strings.to_number"
    dtype = as_numpy_dtype(out_type, api, "out_type", _NUMBER_TYPES)
    if is_ragged(string_tensor):
        mask = string_tensor.mask()
        values = string_array(string_tensor.values, api, "string_tensor")
        out = np.zeros(values.shape, dtype=dtype)
        out[mask] = [_parse(s, dtype) for s in values[mask].tolist()]
        lengths = np.asarray(string_tensor.row_lengths)
        return RaggedRows(out, lengths, np.asarray(string_tensor.shapes))
    arr = string_array(string_tensor, api, "string_tensor")
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
    from tpustrategy._src.errors import InvalidArgumentError

    api = "tps.strings.as_string"
    if isinstance(input, (bytes, str)) or (isinstance(input, np.ndarray) and input.dtype.kind in "OSU"):
        return string_result(string_array(input, api))
    arr = np.asarray(input)
    if scientific and shortest:
        raise InvalidArgumentError(f"Cannot select both scientific and shortest notation\n({api}: Fix: pick one.)")
    if len(fill) > 1:
        raise InvalidArgumentError(f"Fill string must be one or fewer characters\n({api}: received fill={fill!r}.)")
    kind = arr.dtype.kind
    if kind not in "fc" and (precision > -1 or scientific or shortest):
        what = "precision" if precision > -1 else "scientific" if scientific else "shortest"
        raise InvalidArgumentError(f"{what} not supported for datatype {_tf_name(arr.dtype)}\n"
                                   f"({api}: Fix: these options apply to float tensors; cast first.)")
    spec = "%" + fill + (str(width) if width > -1 else "")
    if kind in "fc":
        spec += (f".{precision}" if precision > -1 else "") + ("e" if scientific else "g" if shortest else "f")
    elif kind in "iu":
        spec += "d"
    elif kind == "b":
        return string_result(map_strings(lambda v: b"true" if v else b"false", arr.astype(object)))
    else:
        raise TypeError(f"{api}: `input` dtype {arr.dtype} cannot be formatted.\nFix: pass numbers, bools or strings.")
    try:
        spec % 1.0
    except (ValueError, TypeError):
        raise InvalidArgumentError(f"{api}: fill={fill!r} makes the invalid format {spec!r}.\n"
                                   "Fix: use fill '', ' ', '0' or '-'.") from None
    if kind == "c":
        fmt = lambda v: f"({spec % v.real},{spec % v.imag})".encode()  # noqa: E731
        flat = [fmt(complex(v)) for v in arr.reshape(-1).tolist()]
    elif kind == "f":
        # C's printf pads inf / nan with spaces even under the "0" flag; Python's % would put zeros.
        plain = spec.replace("%0", "%", 1)
        flat = [((spec if math.isfinite(v) else plain) % v).encode() for v in map(float, arr.reshape(-1).tolist())]
    else:
        flat = [(spec % int(v)).encode() for v in arr.reshape(-1).tolist()]
    out = np.empty(arr.shape, dtype=object)
    out.reshape(-1)[:] = flat
    return string_result(out)


def _tf_name(dtype: np.dtype) -> str:
    return {"bool": "bool"}.get(dtype.name, dtype.name)


def float_text(value: float, dtype: np.dtype) -> str:
    """TensorFlow's shortest round-trip text of a float (``%.6g`` / ``%.9g``; ``%.15g`` / ``%.17g`` for doubles)."""
    if math.isnan(value):
        return "nan" if math.copysign(1.0, value) > 0 else "-nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if dtype == np.float64:
        text = "%.15g" % value
        return text if float(text) == value else "%.17g" % value
    text = "%.6g" % value
    return text if np.float32(float(text)) == np.float32(value) else "%.9g" % value
