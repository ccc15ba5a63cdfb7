"""``tf.train.Example`` protocol buffers, without TensorFlow.

The message classes are built at import time from a descriptor written in
code (no ``protoc`` step) with the package, message names and field numbers
of TensorFlow's ``feature.proto`` and ``example.proto``, so their wire format
and full names (``tensorflow.Example`` ...) are those of ``tf.train.*``. They
live in a private descriptor pool, so importing this module next to real
TensorFlow does not clash with TensorFlow's own registration.

:func:`make_example` builds an ``Example`` from a dict of Python or NumPy
values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _field(
    msg: descriptor_pb2.DescriptorProto,
    name: str,
    number: int,
    ftype: int,
    *,
    label: int = _F.LABEL_OPTIONAL,
    type_name: str = "",
    packed: bool = False,
    oneof_index: int | None = None,
) -> None:
    f = msg.field.add(name=name, number=number, type=ftype, label=label)
    if type_name:
        f.type_name = type_name
    if packed:
        f.options.packed = True
    if oneof_index is not None:
        f.oneof_index = oneof_index
    f.json_name = "".join(p.capitalize() if i else p for i, p in enumerate(name.split("_")))


def _map_field(msg: descriptor_pb2.DescriptorProto, name: str, value_type: str) -> None:
    entry_name = "".join(p.capitalize() for p in name.split("_")) + "Entry"
    entry = msg.nested_type.add(name=entry_name)
    entry.options.map_entry = True
    _field(entry, "key", 1, _F.TYPE_STRING)
    _field(entry, "value", 2, _F.TYPE_MESSAGE, type_name=value_type)
    _field(
        msg,
        name,
        1,
        _F.TYPE_MESSAGE,
        label=_F.LABEL_REPEATED,
        type_name=f".tensorflow.{msg.name}.{entry_name}",
    )


def _build_pool() -> descriptor_pool.DescriptorPool:
    rep = _F.LABEL_REPEATED
    feature = descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/example/feature.proto", package="tensorflow", syntax="proto3"
    )
    _field(feature.message_type.add(name="BytesList"), "value", 1, _F.TYPE_BYTES, label=rep)
    _field(
        feature.message_type.add(name="FloatList"),
        "value",
        1,
        _F.TYPE_FLOAT,
        label=rep,
        packed=True,
    )
    _field(
        feature.message_type.add(name="Int64List"),
        "value",
        1,
        _F.TYPE_INT64,
        label=rep,
        packed=True,
    )
    feat = feature.message_type.add(name="Feature")
    feat.oneof_decl.add(name="kind")
    for number, (name, kind) in enumerate(
        (("bytes_list", "BytesList"), ("float_list", "FloatList"), ("int64_list", "Int64List")),
        start=1,
    ):
        _field(feat, name, number, _F.TYPE_MESSAGE, type_name=f".tensorflow.{kind}", oneof_index=0)
    _map_field(feature.message_type.add(name="Features"), "feature", ".tensorflow.Feature")
    flist = feature.message_type.add(name="FeatureList")
    _field(flist, "feature", 1, _F.TYPE_MESSAGE, label=rep, type_name=".tensorflow.Feature")
    _map_field(
        feature.message_type.add(name="FeatureLists"), "feature_list", ".tensorflow.FeatureList"
    )

    example = descriptor_pb2.FileDescriptorProto(
        name="tensorflow/core/example/example.proto",
        package="tensorflow",
        syntax="proto3",
        dependency=["tensorflow/core/example/feature.proto"],
    )
    ex = example.message_type.add(name="Example")
    _field(ex, "features", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    seq = example.message_type.add(name="SequenceExample")
    _field(seq, "context", 1, _F.TYPE_MESSAGE, type_name=".tensorflow.Features")
    _field(seq, "feature_lists", 2, _F.TYPE_MESSAGE, type_name=".tensorflow.FeatureLists")

    pool = descriptor_pool.DescriptorPool()
    pool.Add(feature)
    pool.Add(example)
    return pool


_POOL = _build_pool()


def _message_class(name: str) -> Any:
    return message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"tensorflow.{name}"))


BytesList = _message_class("BytesList")
FloatList = _message_class("FloatList")
Int64List = _message_class("Int64List")
Feature = _message_class("Feature")
Features = _message_class("Features")
FeatureList = _message_class("FeatureList")
FeatureLists = _message_class("FeatureLists")
Example = _message_class("Example")
SequenceExample = _message_class("SequenceExample")


def bytes_feature(values: bytes | str | Iterable[bytes | str]) -> Any:
    """Returns a ``Feature`` with a ``bytes_list`` (``str`` is encoded as UTF-8)."""
    if isinstance(values, bytes | str | np.bytes_ | np.str_):
        values = [values]
    return Feature(
        bytes_list=BytesList(value=[v.encode() if isinstance(v, str) else bytes(v) for v in values])
    )


def float_feature(values: float | Iterable[float] | np.ndarray) -> Any:
    """Returns a ``Feature`` with a ``float_list`` (values stored as float32)."""
    arr = np.asarray(values, dtype=np.float32).reshape(-1)
    return Feature(float_list=FloatList(value=arr.tolist()))


def int64_feature(values: int | Iterable[int] | np.ndarray) -> Any:
    """Returns a ``Feature`` with an ``int64_list``."""
    arr = np.asarray(values, dtype=np.int64).reshape(-1)
    return Feature(int64_list=Int64List(value=arr.tolist()))


def _to_feature(key: str, value: object) -> Any:
    if isinstance(value, Feature):
        return value
    if isinstance(value, bytes | str | np.bytes_ | np.str_):
        return bytes_feature(value)
    if isinstance(value, list | tuple) and value and all(isinstance(v, bytes | str) for v in value):
        return bytes_feature(value)  # np.asarray would drop trailing zero bytes
    arr = np.asarray(value) if not isinstance(value, np.ndarray) else value
    if arr.size == 0 and arr.dtype in (np.float64, np.object_):
        raise ValueError(
            f"make_example: feature {key!r} is an empty {type(value).__name__}, whose "
            "kind (bytes, float or int64) cannot be inferred.\nFix: pass "
            "bytes_feature([]), float_feature([]) or int64_feature([]) for it, or an "
            "empty NumPy array with an explicit dtype."
        )
    kind = arr.dtype.kind
    if kind == "f":
        return float_feature(arr)
    if kind in "iub":
        return int64_feature(arr)
    if kind in "SU":
        return bytes_feature(arr.reshape(-1).tolist())
    if kind == "O" and all(isinstance(v, bytes | str) for v in arr.reshape(-1)):
        return bytes_feature(arr.reshape(-1).tolist())
    raise TypeError(
        f"make_example: feature {key!r} has a value of type {type(value).__name__} "
        f"(dtype {arr.dtype}) that maps to none of bytes_list, float_list or int64_list.\n"
        "Fix: pass bytes/str, ints, floats, a NumPy array of one of those, or a Feature."
    )


def make_example(features: Mapping[str, object]) -> Any:
    """Builds an ``Example`` from a dict of values.

    Args:
      features: feature name -> value. ``bytes``/``str`` (or arrays/lists of
        them) become a ``bytes_list``; floats and float arrays a ``float_list``
        (float32); ints, bools and integer arrays an ``int64_list``; arrays are
        flattened; a ``Feature`` is used as is.

    Returns:
      An ``Example``.

    Raises:
      TypeError: for a value of no supported kind.
      ValueError: for an empty list whose kind cannot be inferred.

    Example:
      >>> ex = make_example({"x": np.arange(3.0), "label": 3, "name": b"abc"})
      >>> ex.features.feature["label"].int64_list.value[0]
      3
    """
    if not isinstance(features, Mapping):
        raise TypeError(
            f"make_example: features must be a dict of name -> value. Received: "
            f"{type(features).__name__}."
        )
    return Example(
        features=Features(feature={str(k): _to_feature(str(k), v) for k, v in features.items()})
    )
