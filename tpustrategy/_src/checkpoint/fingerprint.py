"""A checksum of each array's content that any sharding computes alike.

Container files cannot vouch for the values inside them (orbax's data files
end with their own CRC, so the CRC32C of every intact file is the same
constant, and a data file copied in from another checkpoint passes), so every
array saved gets a fingerprint of its bytes, recorded in the manifest and
checked after it is read back, before any object changes. It is computed
where it costs least, in one of two kinds (the manifest's string says which,
and a restore computes the kind recorded):

- ``crc32c:<8 hex>``: the CRC32C of the array's bytes in C order, computed on
  the host at memory speed (google-crc32c) -- for NumPy values and for
  ``jax.Array``s whose every shard is on this process's CPU devices, whose
  buffers are host memory already (no copy; shards split along the first
  axis are hashed one after the other, others are assembled first);
- 16 hex digits: the position-weighted sum below, computed by XLA on the
  devices where the array lies, without gathering it -- for arrays on
  accelerators (device memory is faster than a copy to the host) and for
  arrays spread over several processes.

The sum is two position-weighted sums over the array's words in
C order, ``sum_i (word_i + 1) * h_k(i)  (mod 2**32)`` with odd weights
``h_k(i)`` from a 32-bit mixer, where the words are the elements' bits
(types of 4 bytes or more: their 32-bit little-endian words; 1- and 2-byte
types: each element): a single changed word always changes it, and moved,
swapped or foreign data almost surely does. Being a sum, XLA computes it on
the array where it lies, however it is sharded (8 replicas or 4, one
process or several), without gathering it; a replicated array is summed on
one of its copies. NumPy arrays go through the same program as raw words (so
64-bit values are checked exactly with 64-bit types off).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

_SEEDS = (0x9E3779B9, 0x7F4A7C15)


def _mix(x: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finaliser."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x85EBCA6B)
    x = x ^ (x >> 13)
    x = x * jnp.uint32(0xC2B2AE35)
    return x ^ (x >> 16)


_WORD = {1: jnp.uint8, 2: jnp.uint16}


def _words_of(x: jax.Array) -> jax.Array:
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint8)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        x = jnp.stack([jnp.real(x), jnp.imag(x)], axis=-1)
    # 8-byte types: a trailing axis of their two 32-bit words, low word first (as in memory)
    return lax.bitcast_convert_type(x, _WORD.get(x.dtype.itemsize, jnp.uint32))


def _one(x: jax.Array) -> jax.Array:
    data = _words_of(x).astype(jnp.uint32) + jnp.uint32(1)
    shape = data.shape
    index = jnp.zeros(shape, jnp.uint32)
    stride = 1
    for axis in reversed(range(len(shape))):  # the C-order flat index, without a reshape
        index = index + lax.broadcasted_iota(jnp.uint32, shape, axis) * jnp.uint32(stride % (1 << 32))
        stride *= shape[axis]
    sums = [jnp.sum(data * (_mix(index + jnp.uint32(seed)) | jnp.uint32(1)), dtype=jnp.uint32)
            for seed in _SEEDS]
    return jnp.stack(sums)


@functools.lru_cache(maxsize=16)
def _program(devices: tuple[Any, ...]) -> Any:
    replicated = NamedSharding(Mesh(np.array(devices), ("d",)), P())
    return jax.jit(lambda xs: jnp.stack([_one(x) for x in xs]), out_shardings=replicated)


def _supported(dtype: Any) -> bool:
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return True
    sub_byte = any(t in dtype.name for t in ("int4", "int2", "float4"))
    return bool(jnp.issubdtype(dtype, jnp.number)) and not sub_byte


def _host_view(value: Any) -> np.ndarray | None:
    host = np.ascontiguousarray(np.asarray(value))
    if not _supported(host.dtype):
        return None
    size = host.dtype.itemsize
    return host.reshape(-1).view(np.uint8 if size == 1 else np.uint16 if size == 2 else np.uint32)


def _one_copy(value: jax.Array) -> jax.Array:
    """A replicated array's copy on one device (every copy is the same); others as they are."""
    if value.sharding.is_fully_replicated and len(value.sharding.device_set) > 1:
        return value.addressable_shards[0].data
    return value


CRC_PREFIX = "crc32c:"


def _on_host(value: Any) -> bool:
    """Whether ``value``'s bytes are in this process's memory: NumPy, or a CPU ``jax.Array`` of its own."""
    if not isinstance(value, jax.Array):
        return True
    return value.is_fully_addressable and all(d.platform == "cpu" for d in value.sharding.device_set)


def _crc_of(host: np.ndarray, crc: int = 0) -> int:
    import google_crc32c

    host = np.ascontiguousarray(host)
    if host.size == 0:
        return crc
    return google_crc32c.extend(crc, host.reshape(-1).view(np.uint8))


def _row_blocks(value: jax.Array) -> list[Any] | None:
    """The shards of ``value`` in order when they split it along its first axis only, else None."""
    blocks: dict[int, tuple[int, Any]] = {}
    for shard in value.addressable_shards:
        spans = [s.indices(n) for s, n in zip(shard.index, value.shape, strict=True)]
        if any(span != (0, n, 1) for span, n in zip(spans[1:], value.shape[1:], strict=True)):
            return None
        start, stop, step = spans[0]
        if step != 1:
            return None
        blocks.setdefault(start, (stop, shard))
    expected = 0
    ordered = []
    for start in sorted(blocks):  # contiguous, with no overlap or gap
        if start != expected:
            return None
        expected, shard = blocks[start]
        ordered.append(shard)
    return ordered if expected == value.shape[0] else None


def host_crc(value: Any) -> str:
    """``crc32c:<8 hex>`` of ``value``'s bytes in C order (NumPy or a CPU ``jax.Array`` of this process)."""
    if isinstance(value, jax.Array):
        value = _one_copy(value)
        if len(value.sharding.device_set) == 1 or value.ndim == 0:
            crc = _crc_of(np.asarray(value.addressable_shards[0].data))
        else:
            blocks = _row_blocks(value)
            if blocks is None:
                crc = _crc_of(np.asarray(value))
            else:
                crc = 0
                for shard in blocks:
                    crc = _crc_of(np.asarray(shard.data), crc)
    else:
        crc = _crc_of(np.asarray(value))
    return f"{CRC_PREFIX}{crc:08x}"


def _gathered_crc(value: jax.Array) -> str:
    """`host_crc` of an array spread over several processes (each process gathers it: rare)."""
    from jax.experimental import multihost_utils

    return host_crc(np.asarray(multihost_utils.process_allgather(value, tiled=True)))


def compute(values: dict[str, Any], like: dict[str, Any] | None = None) -> dict[str, str | None]:
    """The fingerprint of each array (module docstring); None where it cannot be computed.

    Without ``like`` each array gets the kind that costs least where it lies;
    with ``like`` (the fingerprints recorded at save), each gets the kind
    recorded for its name, so a checkpoint saved on CPU and restored on an
    accelerator (or the reverse) is checked alike. Every process of a job
    must call it with the same global arrays (it may run collectives).
    """
    groups: dict[tuple[tuple[str, int], ...], list[tuple[str, Any]]] = {}
    result: dict[str, str | None] = {}
    cpu = jax.devices("cpu")[0]
    for name, value in values.items():
        recorded = like.get(name) if like is not None else None
        wants_crc = (isinstance(recorded, str) and recorded.startswith(CRC_PREFIX)) if like is not None \
            else _on_host(value)
        if wants_crc:
            result[name] = host_crc(value) if _on_host(value) else _gathered_crc(value)
            continue
        if isinstance(value, jax.Array) and _supported(value.dtype):
            value = _one_copy(value)
            key = tuple(sorted((d.platform, d.id) for d in value.sharding.device_set))
            groups.setdefault(key, []).append((name, value))
            continue
        view = _host_view(value)
        if view is None:
            result[name] = None
            continue
        groups.setdefault(((cpu.platform, cpu.id),), []).append((name, jax.device_put(view, cpu)))
    for members in groups.values():
        names = [n for n, _ in members]
        devices = sorted(members[0][1].sharding.device_set, key=lambda d: d.id)
        out = _program(tuple(devices))([v for _, v in members])
        sums = np.asarray(out.addressable_data(0))
        for name, (a, b) in zip(names, sums.tolist(), strict=True):
            result[name] = f"{a:08x}{b:08x}"
    return result
