"""TFRecordWriter: writes records in TensorFlow's TFRecord format.

Each record is framed as ``uint64 length (LE) | uint32 masked crc32c(length) |
data | uint32 masked crc32c(data)``. Uncompressed output is byte-identical to
``tf.io.TFRecordWriter``. Compressed output uses TensorFlow's zlib settings
(default level, deflate, memLevel 9, window bits 31 for GZIP and 15 for ZLIB;
``flush()`` is a zlib partial flush, as in TensorFlow), so with the same zlib
build it is byte-identical too; a different zlib version may legitimately
produce different (equally valid) compressed bytes, which either library
reads back to the same records.
"""

from __future__ import annotations

import os
import struct
import zlib
from types import TracebackType

from tpustrategy._src.data.sources import _compression
from tpustrategy._src.data.sources._crc import crc32c, mask

_pack_len = struct.Struct("<Q").pack
_pack_crc = struct.Struct("<I").pack
_FLUSH_BYTES = 1 << 20


class TFRecordWriter:
    """Writes records (``bytes``) to a TFRecord file.

    Args:
      path: the file to create (truncated if it exists).
      compression_type: None or "" (uncompressed), "GZIP" or "ZLIB". For
        compatibility with ``tf.io.TFRecordWriter(path, options)`` the second
        positional argument may also be an object with a ``compression_type``
        attribute (such as ``tf.io.TFRecordOptions``).

    Example:
      >>> with TFRecordWriter("out.tfrecord") as w:
      ...     w.write(b"hello")
    """

    def __init__(self, path: str | os.PathLike[str], compression_type: object = None):
        if not isinstance(path, str | os.PathLike):
            raise TypeError(
                f"TFRecordWriter: path must be a str or os.PathLike. Received: path={path!r} "
                f"of type {type(path).__name__}."
            )
        if compression_type is not None and not isinstance(compression_type, str):
            compression_type = getattr(compression_type, "compression_type", compression_type)
        self._type = _compression.validate_compression_type(compression_type, api="TFRecordWriter")
        self._path = os.fspath(path)
        self._file = open(self._path, "wb")  # noqa: SIM115 - closed by close()
        self._compressor = _compression.make_compressor(self._type) if self._type else None
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._closed = False

    @property
    def path(self) -> str:
        """The file being written."""
        return self._path

    def write(self, record: bytes) -> None:
        """Appends one record.

        Args:
          record: the record; ``bytes`` (``bytearray``/``memoryview``/``str`` are
            converted; ``str`` is encoded as UTF-8, as TensorFlow does).

        Raises:
          ValueError: if the writer is closed.
          TypeError: if ``record`` is not bytes-like.
        """
        if self._closed:
            raise ValueError(
                f"TFRecordWriter.write: the writer for {self._path} is closed.\n"
                "Fix: write all records before close() or the end of the `with` block."
            )
        if type(record) is not bytes:
            record = _as_bytes(record)
        length = _pack_len(len(record))
        framed = b"".join(
            (length, _pack_crc(mask(crc32c(length))), record, _pack_crc(mask(crc32c(record))))
        )
        self._pending.append(framed)
        self._pending_bytes += len(framed)
        if self._pending_bytes >= _FLUSH_BYTES:
            self._drain()

    def _drain(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        self._pending_bytes = 0
        if self._compressor is not None:
            data = self._compressor.compress(data)
        self._file.write(data)

    def flush(self) -> None:
        """Writes buffered records to the file (a zlib partial flush if compressed)."""
        if self._closed:
            return
        self._drain()
        if self._compressor is not None:
            self._file.write(self._compressor.flush(zlib.Z_PARTIAL_FLUSH))
        self._file.flush()

    def close(self) -> None:
        """Finishes the file; further writes raise ``ValueError``. Idempotent."""
        if self._closed:
            return
        try:
            self._drain()
            if self._compressor is not None:
                self._file.write(self._compressor.flush(zlib.Z_FINISH))
        finally:
            self._closed = True
            self._file.close()

    def __enter__(self) -> TFRecordWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


def _as_bytes(record: object) -> bytes:
    if isinstance(record, bytes):
        return bytes(record)
    if isinstance(record, str):
        return record.encode("utf-8")
    if isinstance(record, bytearray | memoryview):
        return bytes(record)
    # NumPy bytes scalars (np.bytes_) are bytes subclasses, handled above.
    raise TypeError(
        f"TFRecordWriter.write: record must be bytes. Received: a {type(record).__name__} "
        f"({record!r:.80}).\nFix: serialize the record first, e.g. "
        "example.SerializeToString() or array.tobytes()."
    )
