"""``tf.strings.to_hash_bucket*``: strings to bucket ids with TensorFlow's own hash functions.

- ``to_hash_bucket_fast``: FarmHash ``Fingerprint64`` (the ``pyfarmhash`` package,
  extra ``strings``), the hash TensorFlow recommends and keeps stable.
- ``to_hash_bucket``: TensorFlow's legacy ``Hash64`` (MurmurHash64A with seed
  ``0xDECAFCAFFE``), kept for programs that used it.
- ``to_hash_bucket_strong``: SipHash-2-4 keyed with ``key`` (two uint64).

Each gives ``hash % num_buckets`` as int64, bit for bit TensorFlow's value.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError
from tpustrategy._src.strings.ragged import is_ragged, ragged_map
from tpustrategy._src.strings.tensor import numeric_result, string_array

_MASK = (1 << 64) - 1
_M = 0xC6A4A7935BD1E995
_SEED = 0xDECAFCAFFE


def _num_buckets(num_buckets: Any, api: str) -> int:
    if isinstance(num_buckets, bool) or not isinstance(num_buckets, (int, np.integer)):
        raise TypeError(f"{api}: `num_buckets` must be an int; received {num_buckets!r}.\n"
                        "Fix: e.g. num_buckets=1000.")
    if num_buckets < 1:
        raise InvalidArgumentError(
            f"Value for attr 'num_buckets' of {int(num_buckets)} must be at least minimum 1\n"
            f"({api}: Fix: pass num_buckets >= 1.)")
    return int(num_buckets)


def hash64(data: bytes, seed: int = _SEED) -> int:
    """TensorFlow's legacy ``Hash64`` (MurmurHash64A, little-endian 8-byte blocks)."""
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK
    full = n - n % 8
    for i in range(0, full, 8):
        k = int.from_bytes(data[i : i + 8], "little")
        k = (k * _M) & _MASK
        k ^= k >> 47
        k = (k * _M) & _MASK
        h ^= k
        h = (h * _M) & _MASK
    tail = data[full:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * _M) & _MASK
    h ^= h >> 47
    h = (h * _M) & _MASK
    h ^= h >> 47
    return h


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & _MASK


def siphash24(k0: int, k1: int, data: bytes) -> int:
    """SipHash-2-4 of ``data`` under the 128-bit key ``(k0, k1)`` (the reference algorithm)."""
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573

    def rounds(v0: int, v1: int, v2: int, v3: int, n: int) -> tuple[int, int, int, int]:
        for _ in range(n):
            v0 = (v0 + v1) & _MASK
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & _MASK
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & _MASK
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & _MASK
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)
        return v0, v1, v2, v3

    n = len(data)
    full = n - n % 8
    for i in range(0, full, 8):
        m = int.from_bytes(data[i : i + 8], "little")
        v3 ^= m
        v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    last = ((n & 0xFF) << 56) | int.from_bytes(data[full:], "little")
    v3 ^= last
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 2)
    v0 ^= last
    v2 ^= 0xFF
    v0, v1, v2, v3 = rounds(v0, v1, v2, v3, 4)
    return v0 ^ v1 ^ v2 ^ v3


def _fingerprint64() -> Any:
    try:
        import farmhash
    except ImportError:
        raise ImportError(
            "tps.strings.to_hash_bucket_fast needs FarmHash's Fingerprint64, from the `pyfarmhash` package.\n"
            "Fix: pip install 'tpustrategy[strings]' (or pip install pyfarmhash)."
        ) from None
    return farmhash.fingerprint64


def _buckets(input: Any, num_buckets: Any, api: str, hash_fn: Any) -> Any:  # noqa: A002
    if is_ragged(input):
        return ragged_map(input, lambda v: _buckets(v, num_buckets, api, hash_fn))
    arr = string_array(input, api)
    n = _num_buckets(num_buckets, api)
    flat = [hash_fn(s) % n for s in arr.reshape(-1).tolist()]
    return numeric_result(np.array(flat, dtype=np.int64).reshape(arr.shape))


def to_hash_bucket_fast(input: Any, num_buckets: int, name: str | None = None) -> Any:  # noqa: A002
    """Each string's bucket: FarmHash ``Fingerprint64(s) % num_buckets`` (``tf.strings.to_hash_bucket_fast``).

    Args:
      input: a string scalar or tensor.
      num_buckets: the number of buckets, at least 1.
      name: ignored.

    Returns:
      int64 bucket ids of ``input``'s shape (a NumPy scalar for a scalar).

    Raises:
      InvalidArgumentError: ``num_buckets`` < 1.
      ImportError: ``pyfarmhash`` is not installed (extra ``strings``).
    """
    fp = _fingerprint64()
    return _buckets(input, num_buckets, "tps.strings.to_hash_bucket_fast", fp)


def to_hash_bucket(input: Any, num_buckets: int, name: str | None = None) -> Any:  # noqa: A002
    """Each string's bucket by TensorFlow's legacy ``Hash64`` (``tf.strings.to_hash_bucket``).

    TensorFlow keeps this op for old programs; ``to_hash_bucket_fast`` is its recommended
    replacement (the buckets differ).

    Args:
      input: a string scalar or tensor.
      num_buckets: the number of buckets, at least 1.
      name: ignored.

    Returns:
      int64 bucket ids of the input's shape.
    """
    return _buckets(input, num_buckets, "tps.strings.to_hash_bucket", hash64)


def to_hash_bucket_strong(input: Any, num_buckets: int, key: Any, name: str | None = None) -> Any:  # noqa: A002
    """Each string's bucket by SipHash-2-4 keyed with ``key`` (``tf.strings.to_hash_bucket_strong``).

    Args:
      input: a string scalar or tensor.
      num_buckets: the number of buckets, at least 1.
      key: two non-negative ints, the 128-bit SipHash key.
      name: ignored.

    Returns:
      int64 bucket ids of ``input``'s shape.

    Raises:
      InvalidArgumentError: ``key`` does not have 2 elements.
    """
    api = "tps.strings.to_hash_bucket_strong"
    keys = list(np.asarray(key).reshape(-1).tolist()) if not isinstance(key, (list, tuple)) else list(key)
    if len(keys) != 2:
        raise InvalidArgumentError(f"Key must have 2 elements\n({api}: received key={key!r}. Fix: e.g. key=[123, 345].)")
    k0, k1 = (int(k) & _MASK for k in keys)
    return _buckets(input, num_buckets, api, lambda s: siphash24(k0, k1, s))
