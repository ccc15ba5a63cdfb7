"""Peer links: one TCP connection between every two processes of a job, to tell lost from stuck.

The coordination service only sees heartbeats stop, which looks the same for
a killed process and a stopped one. A direct connection tells them apart at
once: the kernel closes a dead process's sockets (end of file on the other
side), while a stopped or hung process keeps its socket open and goes silent.

Wire format: newline-terminated lines. An empty line is a heartbeat; any other
line is a JSON object (``{"hello": 3, "token": ...}`` to open a link,
``{"probe": true}`` to check that a process is up, ``{"bye": true}`` before a
normal exit, ``{"fault": {...}}`` to tell a peer why this process is ending).
A link is accepted only with the token the receiving process published in the
job's coordination service, so a stray connection cannot end the job.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

_MAX_LINE = 1 << 16


def split_address(address: str) -> tuple[str, int]:
    """``"host:port"`` / ``"[v6]:port"`` -> ``(host, port)``."""
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def local_ip_toward(address: str | None) -> str:
    """The IP of the interface this host uses to reach ``address`` (no packet is sent)."""
    if address is None:
        return "127.0.0.1"
    host, port = split_address(address)
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_DGRAM)[0][0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))
            return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"


def listen(preferred: str | None, toward: str | None) -> socket.socket:
    """A listening socket on ``preferred`` if this host can bind it, else an ephemeral port.

    Args:
      preferred: the address the job gave this process (``TF_CONFIG``, the launcher).
      toward: the coordinator's address; the fallback binds the interface used to reach it
        (never every interface).
    """
    candidates = []
    if preferred:
        candidates.append(split_address(preferred))
    candidates.append((local_ip_toward(toward), 0))
    error: OSError | None = None
    for host, port in candidates:
        try:
            family, _, _, _, sockaddr = socket.getaddrinfo(
                host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as err:
            error = err
            continue
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(sockaddr)
            sock.listen(64)
            sock.setblocking(False)
            return sock
        except OSError as err:
            sock.close()
            error = err
    raise OSError(f"tps.initialize: could not open the health link listener ({error}).")


def probe(address: str, timeout: float = 2.0, sender: int | None = None) -> bool:
    """Whether a process accepts connections at ``address`` (it has started).

    ``sender`` (this process's index) lets the probed process know that this one
    was alive and joining, even if this one has ended by the time it probes back.
    """
    message = {"probe": True} if sender is None else {"probe": True, "from": sender}
    try:
        with socket.create_connection(split_address(address), timeout=timeout) as sock:
            sock.sendall(json.dumps(message).encode() + b"\n")
        return True
    except OSError:
        return False


class Link:
    """One open connection to a peer (or a not yet identified incoming one).

    Attributes:
      peer: the peer's process index (None until its hello arrives).
      last_seen: ``time.monotonic()`` of the last bytes received.
      said_bye: the peer announced a normal exit.
    """

    def __init__(self, sock: socket.socket, peer: int | None = None):
        sock.settimeout(2.0)  # a send to a stuck peer with a full buffer must not hang
        self.sock = sock
        self.peer = peer
        self.last_seen = time.monotonic()
        self.opened = self.last_seen
        self.said_bye = False
        self.closed = False
        self._buffer = bytearray()

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict[str, Any] | None = None) -> bool:
        """Sends a message (None: a heartbeat); returns False if the link is broken."""
        if self.closed:
            return False
        data = b"\n" if message is None else json.dumps(message).encode() + b"\n"
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def receive(self) -> list[dict[str, Any] | None] | None:
        """Reads what arrived: the messages (None for a heartbeat), or None at end of file."""
        try:
            data = self.sock.recv(65536)
        except (TimeoutError, BlockingIOError, InterruptedError):
            return []
        except OSError:
            return None
        if not data:
            return None
        self.last_seen = time.monotonic()
        self._buffer += data
        messages: list[dict[str, Any] | None] = []
        while b"\n" in self._buffer:
            line, _, rest = bytes(self._buffer).partition(b"\n")
            self._buffer = bytearray(rest)
            if not line.strip():
                messages.append(None)
                continue
            try:
                record = json.loads(line)
            except ValueError:
                return None  # not one of ours: drop the connection
            if isinstance(record, dict):
                messages.append(record)
        if len(self._buffer) > _MAX_LINE:
            return None
        return messages

    def close(self, *, flush: bool = False) -> None:
        """Closes the link; ``flush`` first half-closes so sent data arrives before the end."""
        if self.closed:
            return
        self.closed = True
        try:
            if flush:
                self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.sock.close()


def connect(address: str, *, hello: int, token: str, timeout: float) -> Link:
    """Opens the link to the peer listening at ``address`` and says who this process is."""
    sock = socket.create_connection(split_address(address), timeout=timeout)
    link = Link(sock)
    if not link.send({"hello": hello, "token": token}):
        link.close()
        raise OSError(f"the connection to {address} closed during the hello")
    return link
