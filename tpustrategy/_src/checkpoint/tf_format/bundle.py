"""TensorFlow's tensor bundle: ``prefix.index`` (a table of entries) + ``prefix.data-K-of-N``.

The index (`sstable`) maps each key to a ``BundleEntryProto`` (`wire`): the
tensor's dtype, shape, data file (shard), byte offset, size and masked
CRC32C; the empty key holds the ``BundleHeaderProto`` (shard count, byte
order, version). Data files hold the tensors' bytes back to back:

- numbers and bools: their little-endian bytes in row-major order;
- strings: a varint length per element, the masked CRC32C of the lengths
  (each as a ``uint32``, or ``uint64`` past 4 GiB), then the bytes; the
  entry's checksum covers the lengths (as those integers), that checksum
  and the bytes;
- a sliced tensor (``tf.compat.v1`` partitioned variables): the full key's
  entry lists its slices (``TensorSliceProto``) and holds no bytes; each
  slice is its own entry under an ``OrderedCode`` key made of the name and
  the slice's starts and lengths.

`BundleReader` checks every checksum and raises ``tps.errors.DataLossError``
naming the file; `write_bundle` writes what ``BundleWriter`` writes.
"""

from __future__ import annotations

import os
import struct
from typing import Any

import numpy as np

from tpustrategy._src.checkpoint.tf_format import sstable, wire
from tpustrategy._src.data.sources._crc import crc32c, mask
from tpustrategy._src.errors import DataLossError, NotFoundError, UnimplementedError

HEADER_KEY = b""
VERSION = 1
_VARIANT, _RESOURCE, _STRING = 21, 20, 7


def _dtypes() -> dict[int, np.dtype]:
    import ml_dtypes

    return {1: np.dtype(np.float32), 2: np.dtype(np.float64), 3: np.dtype(np.int32),
            4: np.dtype(np.uint8), 5: np.dtype(np.int16), 6: np.dtype(np.int8),
            _STRING: np.dtype(object), 8: np.dtype(np.complex64), 9: np.dtype(np.int64),
            10: np.dtype(np.bool_), 14: np.dtype(ml_dtypes.bfloat16), 17: np.dtype(np.uint16),
            18: np.dtype(np.complex128), 19: np.dtype(np.float16), 22: np.dtype(np.uint32),
            23: np.dtype(np.uint64), 24: np.dtype(ml_dtypes.float8_e5m2),
            25: np.dtype(ml_dtypes.float8_e4m3fn)}


_NAMES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string",
          8: "complex64", 9: "int64", 10: "bool", 11: "qint8", 12: "quint8", 13: "qint32",
          14: "bfloat16", 15: "qint16", 16: "quint16", 17: "uint16", 18: "complex128",
          19: "float16", 20: "resource", 21: "variant", 22: "uint32", 23: "uint64",
          24: "float8_e5m2", 25: "float8_e4m3fn"}


def numpy_dtype(code: int) -> np.dtype:
    """The NumPy dtype of a TensorFlow ``DataType`` code (strings: ``object``)."""
    table = _dtypes()
    if code not in table:
        raise UnimplementedError(
            f"TensorFlow dtype {_NAMES.get(code, code)} (DataType {code}) has no NumPy counterpart "
            "here; such a value cannot be read.")
    return table[code]


def dtype_code(dtype: Any) -> int:
    """The TensorFlow ``DataType`` code of a NumPy dtype (``object``/``bytes``/``str``: string)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return _STRING
    for code, candidate in _dtypes().items():
        if candidate == dtype and code != _STRING:
            return code
    raise TypeError(f"dtype {dtype} has no TensorFlow checkpoint counterpart")


def data_filename(prefix: str, shard: int, num_shards: int) -> str:
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


# OrderedCode keys of tensor slices ---------------------------------------------------------
_HEADER_BITS = [(0, 0), (0x80, 0), (0xC0, 0), (0xE0, 0), (0xF0, 0), (0xF8, 0), (0xFC, 0), (0xFE, 0),
                (0xFF, 0), (0xFF, 0x80), (0xFF, 0xC0)]
_BITS_TO_LENGTH = [1] * 7 + [2] * 7 + [3] * 7 + [4] * 7 + [5] * 7 + [6] * 7 + [7] * 7 + [8] * 7 + [9] * 7 + [10]


def _num_increasing(value: int) -> bytes:
    if value == 0:
        return b"\x00"
    body = value.to_bytes((value.bit_length() + 7) // 8, "big")
    return bytes([len(body)]) + body


def _signed_increasing(value: int) -> bytes:
    x = ~value if value < 0 else value
    if x < 64:
        return bytes([(0x80 ^ value) & 0xFF])
    buf = bytearray((b"\xff\xff" if value < 0 else b"\0\0") + (value & (2**64 - 1)).to_bytes(8, "big"))
    length = _BITS_TO_LENGTH[x.bit_length()]
    begin = buf[10 - length:]
    begin[0] ^= _HEADER_BITS[length][0]
    begin[1] ^= _HEADER_BITS[length][1]
    return bytes(begin)


def slice_key(name: bytes, extents: list[tuple[int, int]]) -> bytes:
    """TensorFlow's ``EncodeTensorNameSlice``: the key of one saved slice of ``name``."""
    escaped = name.replace(b"\xff", b"\xff\x00").replace(b"\x00", b"\x00\xff")
    out = _num_increasing(0) + escaped + b"\x00\x01" + _num_increasing(len(extents))
    for start, length in extents:
        out += _signed_increasing(start) + _signed_increasing(length)
    return out


# Reading ------------------------------------------------------------------------------------
def _damaged(path: str, what: str, api: str) -> DataLossError:
    return DataLossError(
        f"{api}: the TensorFlow checkpoint file {path} is damaged: {what}.\nFix: restore an earlier "
        "checkpoint (tps.train.CheckpointManager(...).checkpoints lists them) or write this one again.",
        filename=path)


class BundleReader:
    """The tensors of one TensorFlow checkpoint (``prefix.index`` + data files).

    Args:
      prefix: the checkpoint path without ``.index`` (``".../ckpt-3"``).
      api: the public call, for messages.

    Raises:
      tps.errors.NotFoundError: no ``prefix.index``.
      tps.errors.DataLossError: a damaged index (naming the file).
    """

    def __init__(self, prefix: str, api: str = "tps.train.load_checkpoint"):
        self.prefix, self._api = prefix, api
        self.index_path = prefix + ".index"
        try:
            with open(self.index_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise NotFoundError(f"{api}: there is no TensorFlow checkpoint {self.index_path}.") from None
        try:
            table = sstable.read_table(data)
        except sstable.TableError as e:
            raise _damaged(self.index_path, str(e), api) from None
        if not table or table[0][0] != HEADER_KEY:
            raise _damaged(self.index_path, "the table has no header entry", api)
        try:
            self.header = wire.decode_header(table[0][1])
            self.entries: dict[str, wire.BundleEntry] = {}
            self._slice_entries: dict[bytes, wire.BundleEntry] = {}
            for key, value in table[1:]:
                entry = wire.decode_entry(value)
                if key[:1] == b"\x00":
                    self._slice_entries[key] = entry
                else:
                    self.entries[key.decode("utf-8", errors="surrogateescape")] = entry
        except wire.WireError as e:
            raise _damaged(self.index_path, f"an entry does not parse ({e})", api) from None
        if self.header.endianness not in (0, 1):
            raise _damaged(self.index_path, f"unknown byte order {self.header.endianness}", api)
        if self.header.num_shards < 1:
            raise _damaged(self.index_path, f"num_shards is {self.header.num_shards}", api)
        self._files: dict[int, bytes] = {}

    def keys(self) -> list[str]:
        return sorted(self.entries)

    def _shard(self, shard: int, key: str) -> tuple[str, bytes]:
        path = data_filename(self.prefix, shard, self.header.num_shards)
        if not 0 <= shard < self.header.num_shards:
            raise _damaged(self.index_path, f"{key!r} names data shard {shard} of "
                           f"{self.header.num_shards}", self._api)
        if shard not in self._files:
            try:
                with open(path, "rb") as f:
                    self._files[shard] = f.read()
            except FileNotFoundError:
                raise DataLossError(
                    f"{self._api}: the TensorFlow checkpoint {self.prefix} is missing its data file "
                    f"{path} (holding {key!r}).\nFix: copy every {os.path.basename(self.prefix)}"
                    ".data-* file with the .index file.", filename=path) from None
        return path, self._files[shard]

    def get(self, key: str) -> np.ndarray:
        """The value of ``key`` as a NumPy array (strings: an ``object`` array of ``bytes``)."""
        entry = self.entries[key]
        if entry.slices:
            return self._assemble(key, entry)
        return self._read(key, entry)

    def _read(self, key: str, entry: wire.BundleEntry) -> np.ndarray:
        if entry.dtype in (_VARIANT, _RESOURCE):
            raise UnimplementedError(
                f"{self._api}: {key!r} in {self.prefix} is a TensorFlow {_NAMES[entry.dtype]} "
                "tensor (a dataset iterator's or a resource's state), which cannot be read without "
                "TensorFlow.\nFix: restore with expect_partial() to skip it.")
        dtype = numpy_dtype(entry.dtype)
        path, data = self._shard(entry.shard_id, key)
        raw = data[entry.offset:entry.offset + entry.size]
        if entry.offset < 0 or len(raw) != entry.size:
            raise _damaged(path, f"{key!r} ({entry.size} bytes at offset {entry.offset}) runs past the "
                           f"end of the file ({len(data)} bytes)", self._api)
        count = int(np.prod(entry.shape, dtype=np.int64))
        if entry.dtype == _STRING:
            return self._strings(key, path, raw, entry, count)
        if mask(crc32c(raw)) != entry.crc32c:
            raise _damaged(path, f"checksum mismatch for {key!r}", self._api)
        if entry.size != count * dtype.itemsize:
            raise _damaged(self.index_path, f"{key!r} holds {entry.size} bytes, not the "
                           f"{count * dtype.itemsize} of a {dtype} tensor of shape {entry.shape}", self._api)
        order = ">" if self.header.endianness == 1 else "<"
        array = np.frombuffer(raw, dtype.newbyteorder(order) if dtype.itemsize > 1 else dtype)
        return array.astype(dtype).reshape(entry.shape)

    def _strings(self, key: str, path: str, raw: bytes, entry: wire.BundleEntry, count: int) -> np.ndarray:
        pos = 0
        lengths = []
        try:
            for _ in range(count):
                length, pos = wire.read_varint(raw, pos)
                lengths.append(length)
        except wire.WireError:
            raise _damaged(path, f"the string lengths of {key!r} do not parse", self._api) from None
        packed = b"".join(struct.pack("<I", n) if n <= 0xFFFFFFFF else struct.pack("<Q", n) for n in lengths)
        checksum = raw[pos:pos + 4]
        body = raw[pos + 4:]
        if (len(checksum) != 4 or struct.unpack("<I", checksum)[0] != mask(crc32c(packed))
                or sum(lengths) != len(body) or mask(crc32c(packed + checksum + body)) != entry.crc32c):
            raise _damaged(path, f"checksum mismatch for {key!r}", self._api)
        out = np.empty(count, dtype=object)
        start = 0
        for i, length in enumerate(lengths):
            out[i] = body[start:start + length]
            start += length
        return out.reshape(entry.shape)

    def _assemble(self, key: str, entry: wire.BundleEntry) -> np.ndarray:
        dtype = numpy_dtype(entry.dtype)
        out = np.zeros(entry.shape, dtype)
        for extents in entry.slices:
            name = slice_key(key.encode("utf-8", errors="surrogateescape"), extents)
            part = self._slice_entries.get(name)
            if part is None:
                raise _damaged(self.index_path, f"{key!r} lists a slice {extents} whose entry is missing",
                               self._api)
            index = tuple(slice(None) if length == -1 else slice(start, start + length)
                          for start, length in extents)
            value = self._read(f"{key} (slice {extents})", part)
            try:
                out[index] = value
            except ValueError:
                raise _damaged(self.index_path, f"slice {extents} of {key!r} has shape {value.shape}",
                               self._api) from None
        return out


# Writing ------------------------------------------------------------------------------------
def _tensor_bytes(value: np.ndarray) -> tuple[bytes, int]:
    """The data bytes of ``value`` and their (unmasked) CRC32C."""
    if value.dtype.kind in "OSU":
        items = [v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in value.reshape(-1)]
        lengths = b"".join(wire.varint(len(v)) for v in items)
        packed = b"".join(struct.pack("<I", len(v)) if len(v) <= 0xFFFFFFFF else struct.pack("<Q", len(v))
                          for v in items)
        checksum = struct.pack("<I", mask(crc32c(packed)))
        body = b"".join(items)
        return lengths + checksum + body, crc32c(packed + checksum + body)
    raw = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"), copy=False).tobytes()
    return raw, crc32c(raw)


def encode_shard(tensors: dict[str, np.ndarray], shard: int) -> tuple[bytes, dict[str, wire.BundleEntry]]:
    """The data file of shard ``shard`` holding ``tensors`` in the order given, and their index entries."""
    data = bytearray()
    entries: dict[str, wire.BundleEntry] = {}
    for key, value in tensors.items():
        value = np.asarray(value)
        raw, crc = _tensor_bytes(value)
        entries[key] = wire.BundleEntry(dtype_code(value.dtype), list(value.shape), shard, len(data), len(raw),
                                        mask(crc))
        data += raw
    return bytes(data), entries


def index_bytes(entries: dict[str, wire.BundleEntry], num_shards: int) -> bytes:
    """The ``.index`` table of ``entries`` (sorted by key, after TensorFlow's header)."""
    rows = sorted((key.encode("utf-8", errors="surrogateescape"), wire.encode_entry(entry))
                  for key, entry in entries.items())
    header = wire.encode_header(wire.BundleHeader(num_shards=num_shards, endianness=0, producer=VERSION))
    return sstable.write_table([(HEADER_KEY, header), *rows])


def put_file(path: str, content: bytes) -> None:
    """Writes ``path`` beside its place, flushed, then renamed into place."""
    tmp = path + ".tps-tmp"
    with open(tmp, "wb") as f:
        f.write(content)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_bundle(prefix: str, tensors: dict[str, np.ndarray]) -> list[str]:
    """Writes ``tensors`` as ``prefix.index`` + ``prefix.data-00000-of-00001``; returns both paths.

    The data file holds the tensors in the order given (TensorFlow writes them
    in object-graph order, the graph last), the index lists them by key: the
    bytes are those TensorFlow's ``BundleWriter`` writes for the same tensors
    added in that order (one shard, no alignment padding). The data file is
    written first and the index last (the index makes the checkpoint
    visible), each beside its place, flushed and renamed into place.
    """
    data, entries = encode_shard(tensors, 0)
    data_path, index_path = data_filename(prefix, 0, 1), prefix + ".index"
    put_file(data_path, data)
    put_file(index_path, index_bytes(entries, 1))
    return [index_path, data_path]
