"""Compression types of TensorFlow's record readers and writers.

TensorFlow names three: ``""`` (none), ``"GZIP"`` (a gzip member, zlib window
bits 31) and ``"ZLIB"`` (an RFC 1950 zlib stream, window bits 15), spelled
exactly so. Readers see a compressed file as its uncompressed byte stream;
offsets everywhere are positions in that stream.
"""

from __future__ import annotations

import io
import zlib
from typing import Protocol

from tpustrategy._src.errors import DataLossError

VALID_COMPRESSION_TYPES = ("", "GZIP", "ZLIB")

# TensorFlow's ZlibCompressionOptions: default level, deflate, memLevel 9.
_WBITS = {"GZIP": 31, "ZLIB": 15}
_MEM_LEVEL = 9


def validate_compression_type(compression_type: object, *, api: str) -> str:
    """Returns the canonical compression type ("" for none).

    Args:
      compression_type: None, "", "GZIP" or "ZLIB".
      api: the public function name, for the error message.

    Raises:
      ValueError: for any other value.
    """
    if compression_type is None:
        return ""
    if isinstance(compression_type, str) and compression_type in VALID_COMPRESSION_TYPES:
        return compression_type
    raise ValueError(
        f"{api}: compression_type must be one of None, '', 'GZIP' or 'ZLIB' (spelled "
        f"exactly so, as in TensorFlow). Received: compression_type={compression_type!r}.\n"
        "Fix: pass compression_type='GZIP' for .gz files, 'ZLIB' for zlib streams, "
        "or None for uncompressed files."
    )


def make_compressor(compression_type: str) -> zlib._Compress:
    """Returns a zlib compressor with TensorFlow's settings for ``compression_type``."""
    return zlib.compressobj(
        zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, _WBITS[compression_type], _MEM_LEVEL
    )


class ByteStream(Protocol):
    """The uncompressed byte stream of a file."""

    def read(self, n: int) -> bytes: ...

    def close(self) -> None: ...


class _ZlibStream:
    """Decompresses a GZIP/ZLIB file on the fly; concatenated members are read in turn."""

    def __init__(self, path: str, compression_type: str, block_size: int):
        self._path = path
        self._type = compression_type
        self._wbits = _WBITS[compression_type]
        self._file = open(path, "rb", buffering=0)  # noqa: SIM115 - closed by close()
        self._block = max(block_size, 1 << 16)
        self._dec = zlib.decompressobj(self._wbits)
        self._pending = b""  # compressed bytes not yet given to the decompressor
        self._started = False  # the current member has consumed input
        self._eof = False
        self._error: DataLossError | None = None  # raised once the data before it is read

    def _corrupt(self, why: str) -> DataLossError:
        pos = self._file.tell()
        return DataLossError(
            f"corrupted {self._type} stream in {self._path} near compressed byte {pos}: "
            f"{why}.\nFix: check that the file is complete and really is "
            f"{self._type}-compressed (compression_type={self._type!r}); pass the "
            "compression_type the file was written with.",
            filename=self._path,
        )

    def read(self, n: int) -> bytes:
        if self._error is not None:
            raise self._error
        out: list[bytes] = []
        try:
            self._fill(n, out)
        except DataLossError as e:
            if not out:
                raise
            self._error = e
        return b"".join(out)

    def _fill(self, n: int, out: list[bytes]) -> None:
        got = 0
        while got < n and not self._eof:
            dec = self._dec
            if dec.unconsumed_tail:
                data = dec.unconsumed_tail
            elif self._pending:
                data, self._pending = self._pending, b""
            else:
                data = self._file.read(self._block)
                if not data:
                    self._eof = True
                    if self._started and not dec.eof:
                        raise self._corrupt("the stream ends before its end marker")
                    break
            try:
                piece = dec.decompress(data, n - got)
            except zlib.error as e:
                raise self._corrupt(str(e)) from None
            self._started = True
            if piece:
                out.append(piece)
                got += len(piece)
            if dec.eof:
                rest = dec.unused_data
                self._dec = zlib.decompressobj(self._wbits)
                self._started = False
                self._pending = rest

    def close(self) -> None:
        self._file.close()


def open_stream(path: str, compression_type: str, *, block_size: int) -> ByteStream:
    """Opens ``path`` and returns its uncompressed byte stream.

    Raises:
      tps.errors.NotFoundError: (also a ``FileNotFoundError``) when ``path`` does not exist,
        with TensorFlow's text.
    """
    try:
        if compression_type:
            return _ZlibStream(path, compression_type, block_size)
        return open(path, "rb", buffering=0)  # noqa: SIM115 - the caller closes it
    except FileNotFoundError as e:
        from tpustrategy._src.errors import NotFoundError

        raise NotFoundError(
            None, None,
            f"{path}; No such file or directory\n(reading the dataset's file filenames={path!r}.) Fix: "
            "check the path; tpsd.Dataset.list_files(pattern) lists the files that exist.",
        ) from e


def seek_stream(stream: ByteStream, offset: int, compression_type: str) -> int:
    """Moves ``stream`` to ``offset``; returns how many bytes were actually skipped.

    An uncompressed file seeks; a compressed one decompresses and discards.
    """
    if offset == 0:
        return 0
    if not compression_type:
        assert isinstance(stream, io.RawIOBase)
        size = stream.seek(0, io.SEEK_END)
        return stream.seek(min(offset, size))
    skipped = 0
    while skipped < offset:
        piece = stream.read(min(offset - skipped, 1 << 22))
        if not piece:
            break
        skipped += len(piece)
    return skipped
