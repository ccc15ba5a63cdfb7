"""The sorted string table of a checkpoint's ``.index`` file (LevelDB's table format).

TensorFlow's tensor bundle index is a table as LevelDB writes it, without
compression (``BundleWriter`` sets ``kNoCompression``):

- data blocks of entries ``varint shared | varint unshared | varint value
  length | key suffix | value``, the key sharing ``shared`` bytes with the
  previous key; every 16th entry (a restart point) stores its whole key;
  then the restart offsets (``uint32`` each) and their count;
- after every block a 5-byte trailer: the compression type and the masked
  CRC32C of the block and that byte;
- a metaindex block (empty) and an index block mapping a separator key >=
  each data block's last key to its ``varint offset | varint size`` handle;
- a 48-byte footer: the metaindex and index handles, zero padding, and the
  magic number ``0xdb4775248b80fb57``.

Blocks are cut at 256 KiB (TensorFlow's ``table::Options::block_size``).
`read_table` checks every checksum; `write_table` writes bytes identical to
TensorFlow's for the same entries.
"""

from __future__ import annotations

import struct

from tpustrategy._src.checkpoint.tf_format.wire import WireError, read_varint, varint
from tpustrategy._src.data.sources._crc import crc32c, mask

MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_SIZE = 262144
RESTART_INTERVAL = 16
_NO_COMPRESSION = 0
_SNAPPY = 1


class TableError(ValueError):
    """A damaged table; the message says what is wrong."""


def _handle(data: bytes, pos: int) -> tuple[int, int, int]:
    offset, pos = read_varint(data, pos)
    size, pos = read_varint(data, pos)
    return offset, size, pos


def _block(data: bytes, offset: int, size: int, what: str) -> bytes:
    end = offset + size
    if offset < 0 or end + 5 > len(data):
        raise TableError(f"the {what} block (offset {offset}, {size} bytes) runs past the end of the "
                         f"file ({len(data)} bytes)")
    contents = data[offset:end]
    kind = data[end]
    stored = struct.unpack_from("<I", data, end + 1)[0]
    if mask(crc32c(data[offset:end + 1])) != stored:
        raise TableError(f"checksum mismatch in the {what} block at offset {offset}")
    if kind == _SNAPPY:
        raise TableError(f"the {what} block at offset {offset} is snappy-compressed, which "
                         "TensorFlow's checkpoints never are (not a tensor bundle index?)")
    if kind != _NO_COMPRESSION:
        raise TableError(f"the {what} block at offset {offset} has unknown compression type {kind}")
    return contents


def block_entries(block: bytes) -> list[tuple[bytes, bytes]]:
    """The ``(key, value)`` entries of one block, in order."""
    if len(block) < 4:
        raise TableError("a block shorter than its restart count")
    restarts = struct.unpack_from("<I", block, len(block) - 4)[0]
    limit = len(block) - 4 - 4 * restarts
    if limit < 0:
        raise TableError(f"a block's restart count ({restarts}) does not fit in it")
    entries: list[tuple[bytes, bytes]] = []
    key = b""
    pos = 0
    try:
        while pos < limit:
            shared, pos = read_varint(block, pos)
            unshared, pos = read_varint(block, pos)
            length, pos = read_varint(block, pos)
            if shared > len(key) or pos + unshared + length > limit:
                raise TableError("a block entry runs past its block")
            key = key[:shared] + block[pos:pos + unshared]
            pos += unshared
            entries.append((key, block[pos:pos + length]))
            pos += length
    except WireError as e:
        raise TableError(f"a block entry is not readable ({e})") from None
    return entries


def read_table(data: bytes) -> list[tuple[bytes, bytes]]:
    """Every ``(key, value)`` of a table file's bytes, in key order.

    Raises:
      TableError: a bad footer or magic number, a checksum mismatch, a block
        that does not parse, or keys out of order.
    """
    if len(data) < FOOTER_SIZE:
        raise TableError(f"the file is {len(data)} bytes, shorter than a table's {FOOTER_SIZE}-byte footer")
    footer = data[-FOOTER_SIZE:]
    if struct.unpack_from("<Q", footer, FOOTER_SIZE - 8)[0] != MAGIC:
        raise TableError("the footer's magic number is not a table's (not an index file, or truncated)")
    try:
        _, _, pos = _handle(footer, 0)
        index_offset, index_size, _ = _handle(footer, pos)
    except WireError as e:
        raise TableError(f"the footer is not readable ({e})") from None
    entries: list[tuple[bytes, bytes]] = []
    for _separator, handle in block_entries(_block(data, index_offset, index_size, "index")):
        try:
            offset, size, _ = _handle(handle, 0)
        except WireError as e:
            raise TableError(f"a block handle is not readable ({e})") from None
        entries.extend(block_entries(_block(data, offset, size, "data")))
    for (a, _), (b, _) in zip(entries, entries[1:]):
        if a >= b:
            raise TableError(f"keys out of order: {a!r} before {b!r}")
    return entries


# Writing ------------------------------------------------------------------------------------
class _BlockBuilder:
    def __init__(self, restart_interval: int):
        self.interval = restart_interval
        self.reset()

    def reset(self) -> None:
        self.buffer = bytearray()
        self.restarts = [0]
        self.counter = 0
        self.last = b""

    def add(self, key: bytes, value: bytes) -> None:
        shared = 0
        if self.counter < self.interval:
            limit = min(len(key), len(self.last))
            while shared < limit and key[shared] == self.last[shared]:
                shared += 1
        else:
            self.restarts.append(len(self.buffer))
            self.counter = 0
        self.buffer += varint(shared) + varint(len(key) - shared) + varint(len(value))
        self.buffer += key[shared:] + value
        self.last = key
        self.counter += 1

    def size_estimate(self) -> int:
        return len(self.buffer) + 4 * len(self.restarts) + 4

    def finish(self) -> bytes:
        out = bytes(self.buffer) + b"".join(struct.pack("<I", r) for r in self.restarts)
        return out + struct.pack("<I", len(self.restarts))

    def empty(self) -> bool:
        return not self.buffer


def _shortest_separator(start: bytes, limit: bytes) -> bytes:
    """LevelDB's bytewise ``FindShortestSeparator``: a short key in ``[start, limit)``."""
    n = min(len(start), len(limit))
    i = 0
    while i < n and start[i] == limit[i]:
        i += 1
    if i < n:
        byte = start[i]
        if byte < 0xFF and byte + 1 < limit[i]:
            return start[:i] + bytes([byte + 1])
    return start


def _short_successor(key: bytes) -> bytes:
    for i, byte in enumerate(key):
        if byte != 0xFF:
            return key[:i] + bytes([byte + 1])
    return key


def write_table(entries: list[tuple[bytes, bytes]]) -> bytes:
    """The bytes of a table holding ``entries`` (sorted by key, unique), as TensorFlow writes it."""
    out = bytearray()
    data = _BlockBuilder(RESTART_INTERVAL)
    index = _BlockBuilder(1)
    pending: tuple[int, int] | None = None
    last = b""

    def write_block(builder: _BlockBuilder) -> tuple[int, int]:
        contents = builder.finish()
        handle = (len(out), len(contents))
        trailer = bytes([_NO_COMPRESSION])
        out.extend(contents + trailer + struct.pack("<I", mask(crc32c(contents + trailer))))
        builder.reset()
        return handle

    for key, value in entries:
        if pending is not None:
            index.add(_shortest_separator(last, key), varint(pending[0]) + varint(pending[1]))
            pending = None
        data.add(key, value)
        last = key
        if data.size_estimate() >= BLOCK_SIZE:
            pending = write_block(data)
    if not data.empty():
        pending = write_block(data)
    if pending is not None:
        index.add(_short_successor(last), varint(pending[0]) + varint(pending[1]))
    meta = write_block(_BlockBuilder(RESTART_INTERVAL))
    index_handle = write_block(index)
    footer = varint(meta[0]) + varint(meta[1]) + varint(index_handle[0]) + varint(index_handle[1])
    footer += b"\0" * (FOOTER_SIZE - 8 - len(footer)) + struct.pack("<Q", MAGIC)
    return bytes(out + footer)
