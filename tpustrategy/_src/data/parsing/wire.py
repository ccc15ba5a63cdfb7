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


_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
# The low 8w bits set, for a varint of w bytes (w = 0..8); wider ones keep all 64.
_WIDTH_MASK = np.array([(1 << (8 * w)) - 1 for w in range(8)] + [(1 << 64) - 1] * 3, dtype=np.uint64)
# Both masks at once: the 7-bit groups of a varint's first 8 bytes, of its w bytes.
_LOW7_WIDTH = _LOW7 & _WIDTH_MASK
# The three steps packing a word's 7-bit groups together: pairs, quads, the whole word
# (the high part of each pair / quad / half moves down by ``shift`` onto the low part).
_PACK_STEPS = (
    (np.uint64(0x7F007F007F007F00), np.uint64(0x007F007F007F007F), np.uint64(1)),
    (np.uint64(0x3FFF00003FFF0000), np.uint64(0x00003FFF00003FFF), np.uint64(2)),
    (np.uint64(0x0FFFFFFF00000000), np.uint64(0x000000000FFFFFFF), np.uint64(4)),
)
# Of the two bytes after the first eight: nothing, the 9th's 7 bits, and the 10th's too.
_HIGH_MASK = np.array([0] * 9 + [0x7F, 0x7F7F], dtype=np.uint64)


def read_packed_varints(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every varint of ``data``, a run of whole varints (a packed repeated field).

    Each varint's first 8 bytes are read as one little-endian word (an
    unaligned view of the bytes at every offset) and its 7-bit groups are
    packed together with three shift-and-mask steps (pairs, quads, the whole
    word); the 9th and 10th bytes of wider varints (negative int64s) are
    added after.

    Args:
      data: ``uint8`` bytes.

    Returns:
      ``(values, last)``: the ``uint64`` values, and the index in ``data`` of
      each varint's last byte.

    Raises:
      WireError: ``data`` ends inside a varint, or a varint has more than 10 bytes.
    """
    size = data.size
    last = np.flatnonzero(data < 0x80)
    if not size:
        return np.zeros(0, np.uint64), last
    if last.size == size:
        return data.astype(np.uint64), last
    if not last.size or last[-1] != size - 1:
        raise WireError("the packed varints end inside a varint")
    first = np.empty_like(last)
    first[0] = 0
    first[1:] = last[:-1] + 1
    widths = last - first + 1
    widest = int(widths.max())
    if widest > 10:
        raise WireError("a varint longer than 64 bits (more than 10 bytes)")
    padded = np.zeros(size + 16, np.uint8)
    padded[:size] = data
    # Every byte offset as an (unaligned) little-endian 8-byte word: bytes i..i+7.
    words = np.ndarray((size,), "<u8", padded, strides=(1,))
    x = words[first]
    x &= _LOW7_WIDTH[widths]
    for high_bits, low_bits, shift in _PACK_STEPS:  # in place: no temporary per step but one
        part = x & high_bits
        part >>= shift
        x &= low_bits
        x |= part
    if widest > 8:  # the 9th byte's 7 bits go to 56..62, the 10th byte's lowest to 63
        high = np.ndarray((size,), "<u8", padded, offset=8, strides=(1,))[first]
        high &= _HIGH_MASK[widths]
        part = high & np.uint64(0x7F)
        part <<= np.uint64(56)
        x |= part
        high >>= np.uint64(8)
        high <<= np.uint64(63)
        x |= high
    return x.astype(np.uint64, copy=False), last


def varint(value: int) -> bytes:
    """The varint encoding of ``value`` (a negative number as its 10-byte two's complement)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
