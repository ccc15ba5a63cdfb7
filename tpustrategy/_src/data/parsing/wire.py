"""The protobuf wire format's varints: the one reader and writer of the library.

Example parsing (`_example_layout`, `_batch_scan`), TensorFlow's checkpoint
messages (``checkpoint/tf_format``) and the ``TopologyProto``
(``devices/topology_proto``) all read and write varints through this module:
one varint at a time (:func:`read_varint`), or many at once over a NumPy byte
buffer (:func:`read_varints`, for the vectorised batch parser). It imports
nothing of ours (a leaf), so any layer above ``data`` may use it.
"""

from __future__ import annotations

import numpy as np

#: Zero bytes a buffer given to ``read_varints`` must carry after its data.
VARINT_PAD = 10


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


def read_varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The varints starting at each of ``pos`` in ``buf``, read all at once.

    Args:
      buf: ``uint8`` bytes followed by at least ``VARINT_PAD`` zero bytes (so a
        read never leaves the array; a varint that runs into the padding ends
        there, and the caller's bounds check on the returned positions catches it).
      pos: ``int64`` start positions.

    Returns:
      ``(values, after)``: the ``uint64`` values (bits past the 64th dropped, as
      protobuf does) and the ``int64`` positions after each varint.

    Raises:
      WireError: a varint has more than 10 bytes.
    """
    byte = buf[pos]
    cont = byte >= 0x80
    if not cont.any():
        return byte.astype(np.uint64), pos + 1
    values = (byte & 0x7F).astype(np.uint64)
    after = pos + 1
    todo = np.flatnonzero(cont)  # varints with more bytes; one step per byte position
    shift = 7
    while todo.size:
        if shift > 63:
            raise WireError("a varint longer than 64 bits (more than 10 bytes)")
        at = after[todo]
        byte = buf[at]
        values[todo] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[todo] = at + 1
        todo = todo[byte >= 0x80]
        shift += 7
    return values, after


def varint(value: int) -> bytes:
    """The varint encoding of ``value`` (a negative number as its 10-byte two's complement)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
