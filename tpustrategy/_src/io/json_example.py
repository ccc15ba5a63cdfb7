"""``decode_json_example``: ``tf.train.Example`` in protobuf's JSON mapping to its wire bytes.

The JSON is protobuf's canonical mapping (``{"features": {"feature": {"age": {"int64List":
{"value": ["7"]}}}}}``; the proto field names ``int64_list`` ... are accepted too). The bytes
are those TensorFlow's ``tf.io.decode_json_example`` writes: map entries in the JSON's order,
repeated numbers unpacked (one field per value, as protobuf's JSON-to-binary stream writes
them), so ``parse_example`` reads them and they match TensorFlow's bytes.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.io import _wire
from tpustrategy._src.io._tensors import string_array

_API = "tps.io.decode_json_example"
_WHERE = "invalid JSON in type.googleapis.com/tensorflow.Example"
_F32_MAX = float(np.finfo(np.float32).max)
_KINDS = {"bytesList": 1, "bytes_list": 1, "floatList": 2, "float_list": 2,
          "int64List": 3, "int64_list": 3}
_JSON_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?\Z")


class _Number(str):
    """A JSON number, kept as its text (int64 and float need the exact text)."""


class _JsonError(Exception):
    def __init__(self, path: str, what: str, detail: str) -> None:
        super().__init__(detail)
        self.path, self.what, self.detail = path, what, detail


class _Object(list[tuple[str, Any]]):
    """A JSON object as its (key, value) pairs: a map's order and repeated keys matter."""


def _load(text: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_Object, parse_float=_Number, parse_int=_Number,
                          parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":
            raise _JsonError("", "", "extraneous characters after end of JSON object") from None
        if e.pos >= len(text.rstrip()):
            raise _JsonError("", "", "unexpected EOF") from None
        raise _JsonError("", "", f"{e.msg} at {e.lineno}:{e.colno} (offset {e.pos})") from None
    except ValueError as e:
        raise _JsonError("", "", f"unexpected character: {e}") from None


def _show(value: Any) -> str:
    """A parsed JSON value as (the start of) its text."""
    if isinstance(value, _Number):
        return str(value)
    return "[...]" if isinstance(value, list) else json.dumps(value)[:40]


def _fields(obj: Any, path: str, what: str, known: dict[str, Any]) -> list[tuple[str, Any]]:
    """An object's (field, value) pairs, each a known field of message ``what``."""
    if obj is None:
        return []
    if not isinstance(obj, _Object):
        raise _JsonError(path, what, f"expected an object, got {_show(obj)}")
    out = []
    for key, value in obj:
        if key not in known:
            raise _JsonError(path, what, f"no such field: '{key}'")
        if value is not None:
            out.append((key, value))
    return out


def _float(value: Any, path: str) -> bytes:
    if isinstance(value, _Number):
        number = float(value)
    elif isinstance(value, str):
        special = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
        if value in special:
            number = special[value]
        elif _JSON_NUMBER.match(value.strip()) and value.strip() == value:
            number = float(value)
        else:
            raise _JsonError(path, "float", "non-number characters in quoted number")
    else:
        raise _JsonError(path, "float", f"expected a number, got {_show(value)}")
    if abs(number) > _F32_MAX and abs(number) != float("inf"):
        raise _JsonError(path, "float", "float out of range")
    return struct.pack("<f", number)


def _int64(value: Any, path: str) -> int:
    if not isinstance(value, str) or (not isinstance(value, _Number)
                                      and not _JSON_NUMBER.match(value)):
        what = "non-number characters in quoted number" if isinstance(value, str) else (
            f"expected a number, got {_show(value)}")
        raise _JsonError(path, "int64", what)
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise _JsonError(path, "int64", "non-number characters in quoted number") from None
    if number != number.to_integral_value():
        raise _JsonError(path, "int64", "expected integer, but JSON number had fractional part")
    if not -(2 ** 63) <= number < 2 ** 63:
        raise _JsonError(path, "int64", "JSON number out of range for int")
    return int(number)


def _bytes(value: Any, path: str) -> bytes:
    if not isinstance(value, str) or isinstance(value, _Number):
        raise _JsonError(path, "bytes", f"expected a base64 string, got {value}")
    text = value.replace("-", "+").replace("_", "/").rstrip("=")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise _JsonError(path, "bytes", "corrupt base64") from None


def _kind(kind: str, body: Any, path: str) -> bytes:
    """A BytesList / FloatList / Int64List message."""
    what = {1: "tensorflow.BytesList", 2: "tensorflow.FloatList", 3: "tensorflow.Int64List"}[
        _KINDS[kind]]
    out = b""
    for _key, values in _fields(body, path, what, {"value": None}):
        for i, item in enumerate(values if isinstance(values, list) else [values]):
            where = f"{path}.value[{i}]"
            if _KINDS[kind] == 1:
                out += _wire.length_delimited(1, _bytes(item, where))
            elif _KINDS[kind] == 2:
                out += _wire.tag(1, _wire.FIXED32) + _float(item, where)
            else:
                out += _wire.tag(1, _wire.VARINT) + _wire.varint(_int64(item, where))
    return out


def _example(doc: Any) -> bytes:
    if not isinstance(doc, _Object):
        shown = _show(doc)[:1]
        raise _JsonError("", "", f"unexpected character: '{shown}'; expected '{{'")
    out = b""
    for _key, features in _fields(doc, "", "tensorflow.Example", {"features": None}):
        entries = b""
        for _k, feature_map in _fields(features, "features", "tensorflow.Features",
                                       {"feature": None}):
            if not isinstance(feature_map, _Object):
                raise _JsonError("features.feature", "", "expected an object (a map)")
            seen: set[str] = set()
            for index, (name, feature) in enumerate(feature_map):
                path = f"features.feature[{index}]"
                if name in seen:
                    raise _JsonError(path, "message tensorflow.Features.FeatureEntry",
                                     f"got unexpectedly-repeated repeated map key: '{name}'")
                seen.add(name)
                body, set_kind = b"", None
                for kind, value in _fields(feature, path,
                                           "message tensorflow.Features.FeatureEntry", _KINDS):
                    if set_kind is not None:
                        raise _JsonError(f"{path}.{kind}", f"message tensorflow.{kind[0].upper()}"
                                         f"{kind[1:].replace('_list', 'List')}",
                                         f"'{kind}' has already been set (either directly or "
                                         "as part of a oneof)")
                    set_kind = kind
                    body = _wire.length_delimited(_KINDS[kind], _kind(kind, value, f"{path}.{kind}"))
                entry = _wire.length_delimited(1, name.encode("utf-8"))
                entry += _wire.length_delimited(2, body)
                entries += _wire.length_delimited(1, entry)
        out += _wire.length_delimited(1, entries)
    return out


def _decode_one(text: bytes) -> bytes:
    try:
        return _example(_load(text.decode("utf-8")))
    except UnicodeDecodeError:
        detail = "invalid UTF-8"
        path = ""
    except _JsonError as e:
        detail, path = e.detail, (f" @ {e.path}: {e.what}".rstrip(": ") if e.path else "")
        if e.detail in ("unexpected EOF", "extraneous characters after end of JSON object"):
            raise InvalidArgumentError(
                f"Error while parsing JSON: {e.detail}\n{_API}: the input is not one complete "
                "JSON object.") from None
    raise InvalidArgumentError(
        f"Error while parsing JSON: {_WHERE}{path}: {detail}\n{_API}: the input must be a "
        'tf.train.Example in protobuf\'s JSON mapping, e.g. {"features": {"feature": {"x": '
        '{"int64List": {"value": ["1"]}}}}}.')


def decode_json_example(json_examples: Any, name: str | None = None) -> Any:
    """Converts JSON-encoded ``Example`` records to binary protocol buffer strings
    (``tf.io.decode_json_example``).

    Args:
      json_examples: a string tensor of any shape (``bytes``/``str`` or an array of them),
        each a ``tf.train.Example`` in protobuf's JSON mapping.
      name: unused (TensorFlow's op name).

    Returns:
      The serialized ``Example`` bytes, TensorFlow's bytes exactly: ``bytes`` for a scalar
      input, else an object array of ``bytes`` of the same shape. Feed them to
      ``tpsd.parse_example`` / ``parse_single_example``.

    Raises:
      tps.errors.InvalidArgumentError: ``Error while parsing JSON: ...`` for text that is not
        such an Example (unknown field, two kinds in one feature, a repeated map key, a
        float out of float32's range, an int64 with a fractional part, corrupt base64).
    """
    del name
    strings = string_array(json_examples, api=_API, arg="json_examples")
    out = np.empty(strings.shape, object)
    for index, text in np.ndenumerate(strings):
        out[index] = _decode_one(text)
    return out[()] if out.ndim == 0 else out
