"""The messages between the parent and a map worker: one Unix socket per worker, shared memory
for big buffers (`Channel`), and a worker's exception carried back with its traceback
(`RemoteError`). See `processes` for the pool that uses them.

A message is pickled with protocol 5; NumPy buffers of `SHM_MIN_BYTES` or more (and a pickle
longer than `INLINE_MAX_BYTES`) go into the sender's shared-memory arena: an anonymous ``memfd``
of `DEPTH` slots, mapped once by each side (its descriptor travels over the socket when the
arena is made or grown). The receiver copies the buffers out and unpickles; nothing is left in
``/dev/shm`` even if a process dies.
"""

from __future__ import annotations

import array
import io
import mmap
import os
import pickle
import signal
import socket
import struct
import sys
import traceback
from typing import Any

import numpy as np

SHM_MIN_BYTES = 1024  # NumPy buffers at least this big travel through shared memory
INLINE_MAX_BYTES = 32 << 10  # a longer pickle travels through shared memory too
DEPTH = 2  # chunks a worker may hold (one mapped, one waiting)
_HDR = struct.Struct("<QQII")  # body length, shared-memory length, buffers, payload-in-shm flag

# Messages and bytes this process received through shared memory (for tests and benchmarks).
STATS = {"shm_messages": 0, "shm_bytes": 0, "worker_map_s": 0.0, "worker_elements": 0, "pools": 0,
         "pool_start_s": 0.0}

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

    Each end owns an *arena* for what it sends: one ``memfd`` of `DEPTH`
    slots, mapped once (its pages stay faulted in). Message ``m`` uses slot
    ``m % DEPTH``; the protocol (a worker holds at most `DEPTH` chunks, and
    the parent waits for ``ready``) guarantees the receiver copied message
    ``m`` out before message ``m + DEPTH`` is written. A message that does not
    fit makes a new, larger arena, whose descriptor travels with it (the
    receiver maps it then and drops its old mapping); the receiver maps the
    peer's arena read-only, copies each buffer out and unpickles.
    """

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._out: mmap.mmap | None = None  # my arena
        self._slot = 0  # its slot size
        self._sent = 0
        self._in: mmap.mmap | None = None  # the peer's arena, mapped read-only

    def send(self, obj: Any) -> None:
        """Sends ``obj``: pickle protocol 5; buffers of `SHM_MIN_BYTES`+ (and a long pickle) in shared memory."""
        bufs: list[memoryview] = []

        def out_of_band(pb: pickle.PickleBuffer) -> bool:
            m = pb.raw()
            if m.nbytes < SHM_MIN_BYTES:
                return True  # in the pickle
            bufs.append(m)
            return False

        f = io.BytesIO()
        _Pickler(f, protocol=5, buffer_callback=out_of_band).dump(obj)
        payload = f.getbuffer()
        in_shm = len(payload) > INLINE_MAX_BYTES
        parts = bufs + [memoryview(payload)] if in_shm else bufs
        table: list[int] = []
        fd = -1
        new_size = 0
        if parts:
            need = sum((m.nbytes + 63) & ~63 for m in parts)
            if need > self._slot:
                self._slot = max(1 << 20, -(-2 * need // mmap.PAGESIZE) * mmap.PAGESIZE)
                new_size = DEPTH * self._slot
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
            off = (self._sent % DEPTH) * self._slot
            view = memoryview(self._out)
            try:
                for m in parts:
                    view[off : off + m.nbytes] = m
                    table += (off, m.nbytes)
                    off += (m.nbytes + 63) & ~63
            finally:
                view.release()
        body = struct.pack(f"<{len(table)}Q", *table) + (b"" if in_shm else payload)
        head = _HDR.pack(len(body), new_size, len(bufs), int(in_shm))
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

    def recv(self) -> Any:
        """Receives one message; EOFError when the peer is gone."""
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
            body_len, new_size, nbufs, in_shm = _HDR.unpack(head)
            if fd >= 0:
                if self._in is not None:
                    self._in.close()
                self._in = mmap.mmap(fd, new_size, prot=mmap.PROT_READ)
        finally:
            if fd >= 0:
                os.close(fd)
        body = _recv_exact(sock, body_len)
        ntab = 2 * (nbufs + in_shm)
        table = struct.unpack_from(f"<{ntab}Q", body)
        payload: Any = memoryview(body)[8 * ntab :]
        buffers: list[bytearray] = []
        if ntab:
            assert self._in is not None
            view = memoryview(self._in)
            try:
                for i in range(0, ntab, 2):
                    off = table[i]
                    buffers.append(bytearray(view[off : off + table[i + 1]]))
            finally:
                view.release()
            STATS["shm_messages"] += 1
            STATS["shm_bytes"] += sum(table[1::2])
            if in_shm:
                payload = buffers.pop()
        return pickle.loads(payload, buffers=buffers)

    def close(self) -> None:
        for mm in (self._out, self._in):
            if mm is not None:
                mm.close()
        self._out = self._in = None
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
