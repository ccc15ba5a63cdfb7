"""Masked CRC32C checksums of the TFRecord format.

TFRecord stores ``mask(crc32c(x))`` rather than the raw checksum so that a
checksum of data that itself contains checksums stays well distributed. This
module holds the scalar helpers; the readers vectorise the mask with NumPy.
"""

from __future__ import annotations

import struct

import google_crc32c

#: Added (mod 2**32) after rotating the CRC right by 15 bits.
MASK_DELTA = 0xA282EAD8

#: ``google_crc32c.value`` takes ``bytes`` only (not memoryview/bytearray).
crc32c = google_crc32c.value

_U32 = 0xFFFFFFFF
_PACK_U64 = struct.Struct("<Q").pack


def mask(crc: int) -> int:
    """Returns the TFRecord masking of a raw CRC32C value."""
    return ((((crc >> 15) | (crc << 17)) & _U32) + MASK_DELTA) & _U32
