"""The messages between the parent and a map worker: one Unix socket per worker, shared memory
for big buffers (`Channel`), and a worker's exception carried back with its traceback
(`RemoteError`). See `processes` for the pool that uses them.

A message is pickled with protocol 5; NumPy buffers of `SHM_MIN_BYTES` or more (and a pickle
longer than `INLINE_MAX_BYTES`) go into the sender's shared-memory arena: an anonymous ``memfd``
of `DEPTH` slots, mapped once by each side (its descriptor travels over the socket when the
arena is made or grown). Nothing is left in ``/dev/shm`` even if a process dies.

A worker's results are *lent*, not copied: the parent names, in each request, the slot of the
worker's arena the result goes to (`Channel.next_slot`), and the arrays it unpickles are views of
that slot, which goes back to the free ones when the last of them is garbage-collected. Copying
each result out cost the parent 1.3 µs a 3 KB image record on 2 busy cores -- as much as the
worker's parse -- and held batched reading at one core's speed. At most `LEND` slots per worker
are lent at once (a consumer that keeps many batches: a shuffle buffer, ``cache()``); a result
arriving beyond that is copied, so a worker always finds a free slot and never waits for the
consumer.
"""

from __future__ import annotations

import array
import ctypes
import io
import mmap
import os
import pickle
import signal
import socket
import struct
import sys
import traceback
import weakref
from typing import Any

import numpy as np

SHM_MIN_BYTES = 1024  # NumPy buffers at least this big travel through shared memory
INLINE_MAX_BYTES = 32 << 10  # a longer pickle travels through shared memory too
DEPTH = 2  # chunks a worker may hold (one mapped, one waiting)
LEND = 4  # a worker's result slots whose arrays the consumer may hold at once (more are copied)
RESULT_SLOTS = DEPTH + LEND  # a worker's arena: the lent slots, and one for each chunk it may hold
# body length, shared-memory length (a new arena), buffers, payload-in-shm flag, slot (-1: round robin)
_HDR = struct.Struct("<QQIIi")

# Messages and bytes this process received through shared memory (for tests and benchmarks).
STATS = {"shm_messages": 0, "shm_bytes": 0, "worker_map_s": 0.0, "worker_elements": 0, "pools": 0,
         "pool_start_s": 0.0, "lent": 0, "copied": 0}

AVAILABLE = hasattr(os, "memfd_create") and hasattr(socket, "CMSG_SPACE") and sys.platform.startswith("linux")


# --------------------------------------------------------------------------- strings in bulk

_PACK_MIN = 8  # strings from which a list or an object array of them travels packed


def _pack(items: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Byte strings as one buffer and their lengths (two arrays: out of band, through shared memory)."""
    lengths = np.fromiter(map(len, items), np.int64, len(items))
    return np.frombuffer(b"".join(items), np.uint8), lengths


def _unpack(data: np.ndarray, lengths: np.ndarray) -> list[bytes]:
    raw = data.tobytes()
    out = []
    start = 0
    for end in np.cumsum(lengths).tolist():
        out.append(raw[start:end])
        start = end
    return out


def _unpack_array(shape: tuple[int, ...], data: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    out = np.empty(len(lengths), dtype=object)
    out[:] = _unpack(data, lengths)
    return out.reshape(shape)


class PackedBytes:
    """A list of byte strings (serialized records) that travels as one buffer and its lengths.

    Pickling 256 records of 3 KB one by one costs milliseconds; joined, they
    are one copy into shared memory. Unpickles to a plain ``list`` of ``bytes``.
    """

    __slots__ = ("items",)

    def __init__(self, items: list[bytes]):
        self.items = items

    def __reduce__(self) -> Any:
        return _unpack, _pack(self.items)


def pack_elements(elems: list[Any]) -> Any:
    """``elems`` as `PackedBytes` when they are all byte strings (and enough of them), else unchanged."""
    if len(elems) >= _PACK_MIN and all(type(x) is bytes for x in elems):
        return PackedBytes(elems)
    return elems


class _Pickler(pickle.Pickler):
    """Protocol 5; NumPy arrays of byte strings (a batch of records) travel packed."""

    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is np.ndarray and obj.dtype == object and obj.size >= _PACK_MIN:
            items = obj.ravel().tolist()
            if all(type(x) is bytes for x in items):
                return (_unpack_array, (obj.shape, *_pack(items)))
        return NotImplemented


# --------------------------------------------------------------------------- messages


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise EOFError
        got += k
    return buf


class Channel:
    """One end of a worker's socket, with the shared memory its messages use.

    Each end owns an *arena* for what it sends: one ``memfd`` of ``slots``
    slots, mapped once (its pages stay faulted in). A message that does not
    fit makes a new, larger arena, whose descriptor travels with it (the
    receiver maps it then and drops its old mapping).

    * Round robin (``send(obj)``): message ``m`` uses slot ``m % DEPTH``; the
      protocol (a worker holds at most `DEPTH` chunks, and the parent waits for
      ``ready``) guarantees the receiver copied message ``m`` out before message
      ``m + DEPTH`` is written. The parent's requests travel so.
    * Named slots (``send(obj, slot)``): the receiver chose the slot
      (`next_slot`, sent with the request) and may lend it: ``recv(lend=True)``
      unpickles arrays that are views of the slot, which is free again once the
      last of them is gone. The worker's results travel so (``slots`` =
      `RESULT_SLOTS`).
    """

    def __init__(self, sock: socket.socket, slots: int = DEPTH):
        self.sock = sock
        self._nslots = slots
        self._out: mmap.mmap | None = None  # my arena
        self._slot = 0  # its slot size
        self._sent = 0
        self._in: mmap.mmap | None = None  # the peer's arena
        self._gen = 0  # how many arenas the peer made (a slot is lent within one)
        self._lent: set[int] = set()  # the peer's slots whose arrays the consumer holds
        self._assigned: set[int] = set()  # slots named in requests not answered yet
        self._returned: list[tuple[int, int]] = []  # (arena, slot) freed by the last array's finaliser

    # ------------------------------------------------------------------ sending

    def send(self, obj: Any, slot: int | None = None) -> None:
        """Sends ``obj``: pickle protocol 5; buffers of `SHM_MIN_BYTES`+ (and a long pickle) in shared
        memory -- slot ``slot`` of the arena, or the next round-robin one. An end whose arena has
        named slots sends a message without one inline (no slot of its may be free)."""
        bufs: list[memoryview] = []
        inline = slot is None and self._nslots > DEPTH

        def out_of_band(pb: pickle.PickleBuffer) -> bool:
            m = pb.raw()
            if inline or m.nbytes < SHM_MIN_BYTES:
                return True  # in the pickle
            bufs.append(m)
            return False

        f = io.BytesIO()
        _Pickler(f, protocol=5, buffer_callback=out_of_band).dump(obj)
        payload = f.getbuffer()
        in_shm = len(payload) > INLINE_MAX_BYTES and not inline
        parts = bufs + [memoryview(payload)] if in_shm else bufs
        table: list[int] = []
        fd = -1
        new_size = 0
        index = -1
        if parts:
            need = sum((m.nbytes + 63) & ~63 for m in parts)
            if need > self._slot:
                self._slot = max(1 << 20, -(-2 * need // mmap.PAGESIZE) * mmap.PAGESIZE)
                new_size = self._nslots * self._slot
                fd = os.memfd_create("tpsd-map", os.MFD_CLOEXEC)
                try:
                    os.ftruncate(fd, new_size)
                    arena = mmap.mmap(fd, new_size)
                except BaseException:
                    os.close(fd)
                    raise
                if self._out is not None:
                    self._out.close()
                self._out = arena
            assert self._out is not None
            index = slot if slot is not None else self._sent % DEPTH
            off = index * self._slot
            view = memoryview(self._out)
            try:
                for m in parts:
                    view[off : off + m.nbytes] = m
                    table += (off, m.nbytes)
                    off += (m.nbytes + 63) & ~63
            finally:
                view.release()
        body = struct.pack(f"<{len(table)}Q", *table) + (b"" if in_shm else payload)
        head = _HDR.pack(len(body), new_size, len(bufs), int(in_shm), -1 if slot is None else slot)
        try:
            if fd >= 0:
                anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
                sent = self.sock.sendmsg([head], anc)
                if sent < len(head):
                    self.sock.sendall(head[sent:])
            else:
                self.sock.sendall(head)
            self.sock.sendall(body)
        finally:
            if fd >= 0:
                os.close(fd)
        self._sent += 1

    # ------------------------------------------------------------------ receiving

    def next_slot(self) -> int:
        """A slot of the peer's arena for the answer to the next request (free: not lent, not named
        in a request in flight). There always is one: at most `LEND` are lent, `DEPTH` in flight."""
        while self._returned:
            gen, slot = self._returned.pop()
            if gen == self._gen:
                self._lent.discard(slot)
        busy = self._lent | self._assigned
        free = [i for i in range(RESULT_SLOTS) if i not in busy]
        if not free:  # a bug: more requests in flight than DEPTH
            raise RuntimeError(f"tpsd map channel: no free result slot (lent {sorted(self._lent)}, "
                               f"in flight {sorted(self._assigned)})")
        self._assigned.add(free[0])
        return free[0]

    def unassign(self, slot: int) -> None:
        """Forgets a slot from `next_slot` whose request was not sent."""
        self._assigned.discard(slot)

    def recv(self, lend: bool = False) -> Any:
        """Receives one message; EOFError when the peer is gone. ``lend``: a message in a named slot
        unpickles to views of the slot (up to `LEND` slots at once) instead of copies."""
        sock = self.sock
        head, anc, _flags, _addr = sock.recvmsg(_HDR.size, socket.CMSG_SPACE(4), socket.MSG_WAITALL)
        fd = -1
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds = array.array("i")
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
                for extra in fds[1:]:
                    os.close(extra)
                fd = fds[0] if fds else -1
        try:
            if not head:
                raise EOFError
            if len(head) < _HDR.size:
                head += _recv_exact(sock, _HDR.size - len(head))
            body_len, new_size, nbufs, in_shm, slot = _HDR.unpack(head)
            if fd >= 0:
                self._drop_arena()
                self._in = mmap.mmap(fd, new_size)
        finally:
            if fd >= 0:
                os.close(fd)
        body = _recv_exact(sock, body_len)
        if slot >= 0:
            self._assigned.discard(slot)
        ntab = 2 * (nbufs + in_shm)
        table = struct.unpack_from(f"<{ntab}Q", body)
        payload: Any = memoryview(body)[8 * ntab :]
        if not ntab:
            return pickle.loads(payload)
        assert self._in is not None
        STATS["shm_messages"] += 1
        STATS["shm_bytes"] += sum(table[1::2])
        if in_shm:
            off, n = table[-2:]
            payload = self._in[off : off + n]
            table = table[:-2]
        if lend and slot >= 0 and len(self._lent) < LEND:
            buffers = self._lend(slot, table)
        else:
            buffers = self._copy(table)
        return pickle.loads(payload, buffers=buffers)

    def _lend(self, slot: int, table: tuple[int, ...]) -> list[Any]:
        """Views of the slot's buffers; the slot is free again when the last of them is gone."""
        start = min(table[0::2])
        end = max(off + n for off, n in zip(table[0::2], table[1::2]))
        holder = (ctypes.c_char * (end - start)).from_buffer(self._in, start)
        weakref.finalize(holder, self._returned.append, (self._gen, slot))
        self._lent.add(slot)
        STATS["lent"] += 1
        return [np.frombuffer(holder, np.uint8, n, off - start) for off, n in zip(table[0::2], table[1::2])]

    def _copy(self, table: tuple[int, ...]) -> list[Any]:
        """Copies of the buffers: one allocation, each 64-byte aligned (a bytearray per buffer cost
        0.9 µs per 3 KB record received, fresh pages every time; this 0.37)."""
        assert self._in is not None
        sizes = table[1::2]
        dst = np.empty(sum((n + 63) & ~63 for n in sizes), dtype=np.uint8)
        src = np.frombuffer(self._in, dtype=np.uint8)
        buffers = []
        pos = 0
        for off, n in zip(table[0::2], sizes):
            part = dst[pos : pos + n]
            part[...] = src[off : off + n]
            buffers.append(part)
            pos += (n + 63) & ~63
        STATS["copied"] += 1
        return buffers

    def _drop_arena(self) -> None:
        """Forgets the peer's arena (a new one came): slots lent from it stay mapped until their arrays go."""
        old, self._in = self._in, None
        self._gen += 1
        self._lent.clear()
        if old is not None:
            try:
                old.close()
            except BufferError:
                pass  # lent arrays still use it: it is unmapped with the last of them

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
        self._out = None
        self._drop_arena()
        self.sock.close()


# --------------------------------------------------------------------------- errors across processes


class RemoteError:
    """An exception raised by the map function in a worker, with its traceback text."""

    __slots__ = ("error", "kind", "message", "tb")

    def __init__(self, error: BaseException):
        self.tb = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        self.kind = f"{type(error).__module__}.{type(error).__qualname__}"
        self.message = str(error)
        try:
            self.error: bytes | None = pickle.dumps(error, protocol=5)
            pickle.loads(self.error)
        except Exception:
            self.error = None

    def rebuild(self, worker: int, pid: int) -> BaseException:
        """The original exception (its type and message), the worker's traceback as a note."""
        err: BaseException | None = None
        if self.error is not None:
            try:
                err = pickle.loads(self.error)
            except Exception:
                err = None
        if err is None:
            err = RuntimeError(f"{self.kind}: {self.message}")
        if hasattr(err, "add_note"):
            err.add_note(f"Raised by the map function in tpsd map worker {worker} (pid {pid}):\n{self.tb.rstrip()}")
        return err


def _signal_name(code: int | None) -> str:
    if code is None or code >= 0:
        return ""
    try:
        return f" (killed by {signal.Signals(-code).name})"
    except ValueError:
        return f" (killed by signal {-code})"
