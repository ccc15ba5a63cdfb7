"""The protocol buffer wire format, the part TensorFlow's ``TensorProto`` and ``Example`` use.

Written out by hand so that ``serialize_tensor`` / ``parse_tensor`` / ``decode_json_example``
need no ``protobuf`` package (it is an extra; the core depends on jax, numpy and
google-crc32c only). Encoders return ``bytes``; :func:`read_fields` walks one message.
"""

from __future__ import annotations

from collections.abc import Iterator

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class WireFormatError(ValueError):
    """The bytes are not a valid protocol buffer message."""


def varint(value: int) -> bytes:
    """Base-128 varint; negative numbers as their 64-bit two's complement (as protobuf does)."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire_type: int) -> bytes:
    return varint((number << 3) | wire_type)


def length_delimited(number: int, payload: bytes) -> bytes:
    return tag(number, LENGTH) + varint(len(payload)) + payload


def read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise WireFormatError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result & ((1 << 64) - 1), pos
        shift += 7


def read_fields(data: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """``(field number, wire type, number, payload)`` per field: varints give their value in
    ``number`` (payload ``b""``), the other wire types their bytes in ``payload`` (number 0)."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = read_varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if number == 0:
            raise WireFormatError("field number 0")
        if wire_type == VARINT:
            value, pos = read_varint(data, pos)
            yield number, wire_type, value, b""
            continue
        if wire_type == LENGTH:
            size, pos = read_varint(data, pos)
        elif wire_type in (FIXED64, FIXED32):
            size = 8 if wire_type == FIXED64 else 4
        else:
            raise WireFormatError(f"unsupported wire type {wire_type}")
        if pos + size > end:
            raise WireFormatError("truncated field")
        yield number, wire_type, 0, data[pos:pos + size]
        pos += size


def signed(value: int, bits: int = 64) -> int:
    """A varint read back as a signed integer of ``bits`` bits."""
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value
