"""The wire format of TensorFlow's ``TopologyProto``, without protobuf.

A serialized topology is what ``tf.tpu.experimental.initialize_tpu_system()``
returns and what ``Topology.serialized()`` gives back. The message is small
(``tensorflow/core/protobuf/tpu/topology.proto``)::

    repeated int32 mesh_shape = 1;
    int32 num_tasks = 2;
    int32 num_tpu_devices_per_task = 3;
    repeated int32 device_coordinates = 4;
    TPUHardwareFeature tpu_hardware_feature = 5;   // skipped here

so it is read and written with a few lines of varint code rather than a
dependency on ``protobuf``. Repeated fields are accepted packed or unpacked,
as every protobuf parser does; unknown fields are skipped.
"""

from __future__ import annotations

from typing import NamedTuple

from tpustrategy._src.data.parsing.wire import WireError, read_varint, varint

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


class TopologyFields(NamedTuple):
    mesh_shape: list[int]
    num_tasks: int
    num_tpu_devices_per_task: int
    device_coordinates: list[int]


def _int32(raw: int) -> int:
    # int32 values are sign-extended to 64 bits on the wire.
    raw &= 0xFFFFFFFF
    return raw - (1 << 32) if raw >= 1 << 31 else raw


def _write_varint(value: int, out: bytearray) -> None:
    out += varint(value)  # negative int32s travel as ten-byte varints


def parse(serialized: bytes) -> TopologyFields:
    """Decodes a serialized ``TopologyProto``.

    Raises:
      ValueError: the bytes are not a well-formed protobuf message.
    """
    buf = bytes(serialized)
    repeated: dict[int, list[int]] = {1: [], 4: []}
    scalars = {2: 0, 3: 0}
    i = 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, i = read_varint(buf, i)
            if field in repeated:
                repeated[field].append(_int32(value))
            elif field in scalars:
                scalars[field] = _int32(value)
        elif wire == _LEN:
            length, i = read_varint(buf, i)
            end = i + length
            if end > len(buf):
                raise WireError(f"field {field} claims {length} bytes but the message ends first")
            if field in repeated:  # a packed run of varints
                while i < end:
                    value, i = read_varint(buf, i)
                    repeated[field].append(_int32(value))
                if i != end:
                    raise WireError(f"packed field {field} overruns its length")
            i = end
        elif wire == _I64:
            i += 8
        elif wire == _I32:
            i += 4
        else:
            raise WireError(f"unsupported wire type {wire} for field {field}")
        if i > len(buf):
            raise WireError("a fixed-width field runs past the end of the message")
    return TopologyFields(repeated[1], scalars[2], scalars[3], repeated[4])


def serialize(fields: TopologyFields) -> bytes:
    """Encodes a ``TopologyProto`` as protobuf does (packed repeated fields, defaults omitted)."""
    out = bytearray()
    _packed(1, fields.mesh_shape, out)
    for field, value in ((2, fields.num_tasks), (3, fields.num_tpu_devices_per_task)):
        if value:
            _write_varint(field << 3 | _VARINT, out)
            _write_varint(int(value), out)
    _packed(4, fields.device_coordinates, out)
    return bytes(out)


def _packed(field: int, values: list[int], out: bytearray) -> None:
    if not values:
        return
    payload = bytearray()
    for v in values:
        _write_varint(int(v), payload)
    _write_varint(field << 3 | _LEN, out)
    _write_varint(len(payload), out)
    out += payload
