"""TensorFlow's stateless random numbers (``tf.random.stateless_uniform``) in NumPy.

TensorFlow specifies these values: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as
easy as 1, 2, 3", SC 2011) keyed from the ``seed=[a, b]`` pair the way its CPU kernels do with the
default ``alg="auto_select"``:

1. the seed is scrambled: one Philox block with key ``0x02461E293EC8F720`` and counter
   ``(a, b)`` (as two 64-bit words) gives four words; the first two are the new key, the last two
   the high 64 bits of the new counter (its low 64 bits are 0);
2. block ``i`` of the stream is Philox of counter ``start + i`` (a 128-bit increment); its four
   32-bit words are outputs ``4i .. 4i + 3``;
3. a float32 in ``[0, 1)`` is ``bits(0x3F800000 | (word & 0x7FFFFF)) - 1``; an int32 in
   ``[lo, hi)`` is ``lo + word % (hi - lo)``.

The tests compare these against values recorded from TensorFlow 2.21.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_SCRAMBLE_KEY = 0x02461E293EC8F720
_MASK32 = np.uint64(0xFFFFFFFF)


def _blocks(key: tuple[int, int], counter: np.ndarray) -> np.ndarray:
    """Philox-4x32-10 of ``counter`` ([n, 4] uint32) under ``key``: [n, 4] uint32."""
    c = counter.astype(np.uint32).copy()
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    with np.errstate(over="ignore"):
        for _ in range(10):
            p0 = _M0 * c[:, 0].astype(np.uint64)
            p1 = _M1 * c[:, 2].astype(np.uint64)
            hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), (p0 & _MASK32).astype(np.uint32)
            hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), (p1 & _MASK32).astype(np.uint32)
            c = np.stack([hi1 ^ c[:, 1] ^ k0, lo1, hi0 ^ c[:, 3] ^ k1, lo0], axis=1)
            k0, k1 = np.uint32(k0 + _W0), np.uint32(k1 + _W1)
    return c


def _words64(value: int) -> list[int]:
    value &= (1 << 64) - 1
    return [value & 0xFFFFFFFF, value >> 32]


def check_seed(seed: Any, api: str) -> tuple[int, int]:
    """``seed`` as two ints: TensorFlow's shape-[2] int32/int64 stateless seed."""
    try:
        array = np.asarray(seed)
    except Exception as error:
        raise ValueError(f"{api}: seed must be a shape [2] integer tensor; received {seed!r}.") from error
    if array.shape != (2,) or array.dtype.kind not in "iu":
        raise ValueError(
            f"{api}: seed must be a shape [2] integer tensor (int32 or int64); received "
            f"{seed!r}.\nFix: pass seed=(1, 2), or a pair from "
            "tf.random.split-style seed arithmetic; one int is not accepted by stateless ops.")
    return int(array[0]), int(array[1])


def key_counter(seed: tuple[int, int]) -> tuple[tuple[int, int], list[int]]:
    """The Philox key and start counter that TensorFlow derives from a stateless seed."""
    counter = np.array([_words64(seed[0]) + _words64(seed[1])], np.uint32)
    low, high = _words64(_SCRAMBLE_KEY)
    mix = _blocks((low, high), counter)[0]
    return (int(mix[0]), int(mix[1])), [0, 0, int(mix[2]), int(mix[3])]


def random_bits(seed: tuple[int, int], count: int) -> np.ndarray:
    """The first ``count`` uint32 words of the stateless stream of ``seed``."""
    key, start = key_counter(seed)
    n = -(-count // 4)
    base = (start[0] | start[1] << 32) + ((start[2] | start[3] << 32) << 64)
    counters = np.array([[(v >> s) & 0xFFFFFFFF for s in (0, 32, 64, 96)]
                         for v in ((base + i) % (1 << 128) for i in range(n))], np.uint32).reshape(n, 4)
    return _blocks(key, counters).reshape(-1)[:count]


def stateless_uniform(shape: Any, seed: tuple[int, int], minval: float = 0.0,
                      maxval: float = 1.0) -> np.ndarray:
    """float32 values in ``[minval, maxval)``, TensorFlow's ``stateless_random_uniform``."""
    shape = tuple(int(s) for s in np.atleast_1d(np.asarray(shape, np.int64))) if np.ndim(shape) else ()
    count = int(np.prod(shape, dtype=np.int64))
    bits = random_bits(seed, count)
    unit = ((bits & np.uint32(0x7FFFFF)) | np.uint32(0x3F800000)).view(np.float32) - np.float32(1)
    lo, hi = np.float32(minval), np.float32(maxval)
    return (unit * (hi - lo) + lo).astype(np.float32).reshape(shape)


def stateless_uniform_int32(shape: Any, seed: tuple[int, int], minval: int, maxval: int) -> np.ndarray:
    """int32 values in ``[minval, maxval)``, TensorFlow's ``stateless_random_uniform`` for int32."""
    shape = tuple(int(s) for s in np.atleast_1d(np.asarray(shape, np.int64))) if np.ndim(shape) else ()
    count = int(np.prod(shape, dtype=np.int64))
    span = np.uint32((maxval - minval) & 0xFFFFFFFF)
    bits = random_bits(seed, count)
    return ((bits % span).astype(np.int64) + minval).astype(np.int32).reshape(shape)
