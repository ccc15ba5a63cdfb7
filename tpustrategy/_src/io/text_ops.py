"""Element-wise string codecs of ``tf.io``: web-safe base64 and zlib/gzip decompression."""

from __future__ import annotations

import base64
import zlib
from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.io._tensors import string_array


def _map(strings: np.ndarray, fn: Any) -> Any:
    out = np.empty(strings.shape, object)
    for index, s in np.ndenumerate(strings):
        out[index] = fn(s)
    return out[()] if out.ndim == 0 else out


def encode_base64(input: Any, pad: bool = False, name: str | None = None) -> Any:  # noqa: A002
    """Web-safe base64 (``-`` and ``_``), unpadded unless ``pad`` (``tf.io.encode_base64``)."""
    del name

    def enc(s: bytes) -> bytes:
        out = base64.urlsafe_b64encode(s)
        return out if pad else out.rstrip(b"=")

    return _map(string_array(input, api="tps.io.encode_base64", arg="input"), enc)


def decode_base64(input: Any, name: str | None = None) -> Any:  # noqa: A002
    """Decodes web-safe base64, padded or not (``tf.io.decode_base64``).

    Raises:
      tps.errors.InvalidArgumentError: ``Invalid character found in base64.`` and friends.
    """
    del name

    def dec(s: bytes) -> bytes:
        body = s.rstrip(b"=")
        if any(c not in b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
               for c in body):
            raise InvalidArgumentError("Invalid character found in base64.")
        if len(body) % 4 == 1:
            raise InvalidArgumentError("Invalid base64 data: incomplete last group.")
        return base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))

    return _map(string_array(input, api="tps.io.decode_base64", arg="input"), dec)


def decode_compressed(bytes: Any, compression_type: str = "",  # noqa: A002
                      name: str | None = None) -> Any:
    """Decompresses each string: ``""`` (none), ``"ZLIB"`` or ``"GZIP"`` (``tf.io.decode_compressed``)."""
    del name
    if compression_type not in ("", "ZLIB", "GZIP"):
        raise InvalidArgumentError(
            f"Only ZLIB, GZIP or NONE are supported compressions, got {compression_type!r}")
    wbits = {"": None, "ZLIB": zlib.MAX_WBITS, "GZIP": 16 + zlib.MAX_WBITS}[compression_type]

    def dec(s: bytes) -> bytes:
        if wbits is None:
            return s
        try:
            return zlib.decompress(s, wbits)
        except zlib.error as e:
            raise InvalidArgumentError(f"decode_compressed: {e}") from None

    return _map(string_array(bytes, api="tps.io.decode_compressed", arg="bytes"), dec)
