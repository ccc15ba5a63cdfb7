"""The protobuf wire format's varints: the one reader and writer of the library.

Example parsing (`_example_layout`), TensorFlow's checkpoint messages
(``checkpoint/tf_format``) and the ``TopologyProto`` (``devices/topology_proto``)
all read and write varints through this module. It imports nothing of ours
(a leaf), so any layer above ``data`` may use it.
"""

from __future__ import annotations


class WireError(ValueError):
    """Bytes that are not a valid protobuf message (truncated or overlong varint, bad field)."""


def read_varint(data: bytes, pos: int, end: int | None = None) -> tuple[int, int]:
    """The varint at ``data[pos:end]`` and the position after it.

    Raises:
      WireError: the varint runs past ``end`` (default: the end of ``data``) or is longer
        than 64 bits.
    """
    if end is None:
        end = len(data)
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise WireError(f"a varint runs past the end of the message at byte {pos}"
                            if pos >= end else f"a varint longer than 64 bits ends at byte {pos}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def varint(value: int) -> bytes:
    """The varint encoding of ``value`` (a negative number as its 10-byte two's complement)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
