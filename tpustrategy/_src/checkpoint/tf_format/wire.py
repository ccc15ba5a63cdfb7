"""The protocol-buffer messages of TensorFlow's checkpoints, hand-decoded and hand-encoded.

No ``protobuf`` dependency: these few messages use only varints, 64-bit and
32-bit fixed fields and length-delimited fields, so a small reader and
writer of the wire format is enough. Field numbers are TensorFlow's
(``tensor_bundle.proto``, ``tensor_shape.proto``, ``tensor_slice.proto``,
``trackable_object_graph.proto``). Encoders emit fields in field-number
order, as protobuf's C++ serializer does, so the bytes match TensorFlow's.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterator

# The one varint reader / writer (and its error) of the library; re-exported for sstable / bundle.
from tpustrategy._src.data.parsing.wire import WireError, read_varint, varint


# Primitive reading --------------------------------------------------------------------------
def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of every field of a message, in order."""
    pos = 0
    while pos < len(data):
        tag, pos = read_varint(data, pos)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, pos = read_varint(data, pos)
        elif wire_type == 1:
            if pos + 8 > len(data):
                raise WireError("truncated 64-bit field")
            value = struct.unpack_from("<Q", data, pos)[0]
            pos += 8
        elif wire_type == 2:
            length, pos = read_varint(data, pos)
            if pos + length > len(data):
                raise WireError("truncated length-delimited field")
            value = bytes(data[pos:pos + length])
            pos += length
        elif wire_type == 5:
            if pos + 4 > len(data):
                raise WireError("truncated 32-bit field")
            value = struct.unpack_from("<I", data, pos)[0]
            pos += 4
        else:
            raise WireError(f"unsupported wire type {wire_type}")
        if number == 0:
            raise WireError("field number 0")
        yield number, wire_type, value


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _signed32(value: int) -> int:
    return _signed64(value & ((1 << 64) - 1))  # a negative int32 is written sign-extended to 64 bits


# Primitive writing --------------------------------------------------------------------------
def _tag(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def int_field(number: int, value: int) -> bytes:
    """A varint field; empty for 0 (proto3 omits default values)."""
    return _tag(number, 0) + varint(value) if value else b""


def bytes_field(number: int, value: bytes, always: bool = False) -> bytes:
    """A length-delimited field; empty for empty bytes unless ``always`` (a set sub-message)."""
    if not value and not always:
        return b""
    return _tag(number, 2) + varint(len(value)) + value


def fixed32_field(number: int, value: int) -> bytes:
    return _tag(number, 5) + struct.pack("<I", value) if value else b""


# TensorShapeProto / TensorSliceProto --------------------------------------------------------
def decode_shape(data: bytes) -> list[int]:
    """``TensorShapeProto`` -> the list of dimension sizes (``unknown_rank`` is an error)."""
    dims: list[int] = []
    for number, _, value in fields(data):
        if number == 2:
            size = 0
            for n, _, v in fields(value):  # type: ignore[arg-type]
                if n == 1:
                    size = _signed64(v)  # type: ignore[arg-type]
            dims.append(size)
        elif number == 3 and value:
            raise WireError("a shape of unknown rank")
    return dims


def encode_shape(shape: tuple[int, ...] | list[int]) -> bytes:
    return b"".join(bytes_field(2, int_field(1, int(d)), always=True) for d in shape)


def decode_slice(data: bytes) -> list[tuple[int, int]]:
    """``TensorSliceProto`` -> ``[(start, length)]`` per dimension (length -1: all of it)."""
    extents: list[tuple[int, int]] = []
    for number, _, value in fields(data):
        if number == 1:
            start, length = 0, -1
            for n, _, v in fields(value):  # type: ignore[arg-type]
                if n == 1:
                    start = _signed64(v)  # type: ignore[arg-type]
                elif n == 2:
                    length = _signed64(v)  # type: ignore[arg-type]
            extents.append((start, length))
    return extents


# BundleHeaderProto / BundleEntryProto -------------------------------------------------------
@dataclasses.dataclass
class BundleHeader:
    """``BundleHeaderProto``: shard count, byte order (0 little), format version."""

    num_shards: int = 0
    endianness: int = 0
    producer: int = 0
    min_consumer: int = 0


def decode_header(data: bytes) -> BundleHeader:
    header = BundleHeader()
    for number, _, value in fields(data):
        if number == 1:
            header.num_shards = _signed32(value)  # type: ignore[arg-type]
        elif number == 2:
            header.endianness = value  # type: ignore[assignment]
        elif number == 3:
            for n, _, v in fields(value):  # type: ignore[arg-type]
                if n == 1:
                    header.producer = _signed32(v)  # type: ignore[arg-type]
                elif n == 2:
                    header.min_consumer = _signed32(v)  # type: ignore[arg-type]
    return header


def encode_header(header: BundleHeader) -> bytes:
    version = int_field(1, header.producer) + int_field(2, header.min_consumer)
    return (int_field(1, header.num_shards) + int_field(2, header.endianness)
            + bytes_field(3, version, always=True))


@dataclasses.dataclass
class BundleEntry:
    """``BundleEntryProto``: where one tensor's bytes are and their checksum.

    ``slices`` lists the saved parts of a sliced tensor (then the entry holds
    no bytes itself).
    """

    dtype: int = 0
    shape: list[int] = dataclasses.field(default_factory=list)
    shard_id: int = 0
    offset: int = 0
    size: int = 0
    crc32c: int = 0
    slices: list[list[tuple[int, int]]] = dataclasses.field(default_factory=list)


def decode_entry(data: bytes) -> BundleEntry:
    entry = BundleEntry()
    for number, _, value in fields(data):
        if number == 1:
            entry.dtype = value  # type: ignore[assignment]
        elif number == 2:
            entry.shape = decode_shape(value)  # type: ignore[arg-type]
        elif number == 3:
            entry.shard_id = _signed32(value)  # type: ignore[arg-type]
        elif number == 4:
            entry.offset = _signed64(value)  # type: ignore[arg-type]
        elif number == 5:
            entry.size = _signed64(value)  # type: ignore[arg-type]
        elif number == 6:
            entry.crc32c = value  # type: ignore[assignment]
        elif number == 7:
            entry.slices.append(decode_slice(value))  # type: ignore[arg-type]
    return entry


def encode_entry(entry: BundleEntry) -> bytes:
    return (int_field(1, entry.dtype) + bytes_field(2, encode_shape(entry.shape), always=True)
            + int_field(3, entry.shard_id) + int_field(4, entry.offset) + int_field(5, entry.size)
            + fixed32_field(6, entry.crc32c))


# TrackableObjectGraph -----------------------------------------------------------------------
@dataclasses.dataclass
class SerializedTensor:
    """One saved value of an object: its attribute ``name`` and ``checkpoint_key``."""

    name: str
    full_name: str
    checkpoint_key: str


@dataclasses.dataclass
class SlotReference:
    """An optimizer slot: ``slot_name`` of the variable at ``original`` is node ``slot``."""

    original: int
    slot_name: str
    slot: int


@dataclasses.dataclass
class TrackableObject:
    """One node of the object graph: named edges to children, saved values, slots."""

    children: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    attributes: list[SerializedTensor] = dataclasses.field(default_factory=list)
    slot_variables: list[SlotReference] = dataclasses.field(default_factory=list)
    registered_saver: str = ""
    has_checkpoint_values: bool = True


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="surrogateescape")


def decode_object_graph(data: bytes) -> list[TrackableObject]:
    """``TrackableObjectGraph`` -> its nodes (node 0 is the root)."""
    nodes = []
    for number, _, node_bytes in fields(data):
        if number != 1:
            continue
        node = TrackableObject()
        for n, _, v in fields(node_bytes):  # type: ignore[arg-type]
            if n == 1:
                node_id, name = 0, ""
                for m, _, w in fields(v):  # type: ignore[arg-type]
                    if m == 1:
                        node_id = _signed32(w)  # type: ignore[arg-type]
                    elif m == 2:
                        name = _text(w)  # type: ignore[arg-type]
                node.children.append((name, node_id))
            elif n == 2:
                parts = {1: "", 2: "", 3: ""}
                for m, _, w in fields(v):  # type: ignore[arg-type]
                    if m in parts:
                        parts[m] = _text(w)  # type: ignore[arg-type]
                node.attributes.append(SerializedTensor(parts[1], parts[2], parts[3]))
            elif n == 3:
                ref = {1: 0, 2: "", 3: 0}
                for m, _, w in fields(v):  # type: ignore[arg-type]
                    ref[m] = _text(w) if m == 2 else _signed32(w)  # type: ignore[arg-type]
                node.slot_variables.append(SlotReference(ref[1], ref[2], ref[3]))  # type: ignore[arg-type]
            elif n == 4:
                for m, _, w in fields(v):  # type: ignore[arg-type]
                    if m == 1:
                        node.registered_saver = _text(w)  # type: ignore[arg-type]
            elif n == 5:
                node.has_checkpoint_values = any(m == 1 and w for m, _, w in fields(v))  # type: ignore[arg-type]
        nodes.append(node)
    return nodes


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


def encode_object_graph(nodes: list[TrackableObject]) -> bytes:
    out = bytearray()
    for node in nodes:
        body = bytearray()
        for name, node_id in node.children:
            body += bytes_field(1, int_field(1, node_id) + bytes_field(2, _utf8(name)), always=True)
        for attr in node.attributes:
            body += bytes_field(2, bytes_field(1, _utf8(attr.name)) + bytes_field(2, _utf8(attr.full_name))
                                + bytes_field(3, _utf8(attr.checkpoint_key)), always=True)
        for slot in node.slot_variables:
            body += bytes_field(3, int_field(1, slot.original) + bytes_field(2, _utf8(slot.slot_name))
                                + int_field(3, slot.slot), always=True)
        body += bytes_field(5, int_field(1, int(node.has_checkpoint_values)), always=True)
        out += bytes_field(1, bytes(body), always=True)
    return bytes(out)
