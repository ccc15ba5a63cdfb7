"""The link set: one process's open links to its peers, and the thread that serves them.

A ``LinkSet`` owns the listening socket, every ``peerlink.Link`` of the process
and one thread (``tpustrategy-health``) that waits on all of them with a
selector. That thread accepts incoming links and checks their hello (a link is
accepted only with this process's token), answers probes, sends a heartbeat
every ``interval`` seconds and reads what the peers send: heartbeats (they
refresh ``Link.last_seen``), goodbyes, and faults.

It knows nothing about what a fault means or how a process ends: it tells its
owner (``health.Monitor``) through three callbacks — a link closed without a
goodbye (``on_lost``), a peer sent a fault (``on_fault``), and one turn of the
loop passed (``on_tick``, where the owner checks for silence and its exit
deadline).
"""

from __future__ import annotations

import secrets
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from tpustrategy._src.cluster import peerlink


class LinkSet:
    """The links of process ``task`` to the other processes of a job.

    Args:
      task: this process's index.
      num_processes: the size of the job.
      interval: seconds between heartbeats (the loop wakes twice as often).
      changed: the owner's condition; its lock guards the links, and it is notified
        whenever a link opens or a peer departs.
      listen_address: where the listener should be (the process's configured address),
        if this host can bind it.
      coordinator: the coordinator's address (the fallback listener binds the
        interface that reaches it).
      on_lost: called with a peer whose link closed without a goodbye.
      on_fault: called with the record of a fault a peer sent (``Fault.to_wire()``).
      on_tick: called with ``time.monotonic()`` after each turn of the loop.

    Attributes:
      token: the secret a peer must send in its hello (published by the owner).
      address: where the listener is (``"host:port"``).
      links: the open links by peer index.
      departed: peers that said goodbye and closed their link.
      probed_by: peers whose probe reached this process while the job assembled
        (they were alive then), with when.
      stopping: the owner is ending the links: a link that closes now is no one's fault.
    """

    def __init__(self, *, task: int, num_processes: int, interval: float,
                 changed: threading.Condition, listen_address: str | None,
                 coordinator: str | None, on_lost: Callable[[int], object],
                 on_fault: Callable[[dict[str, Any]], object],
                 on_tick: Callable[[float], object]):
        self.task = task
        self.num_processes = num_processes
        self.interval = interval
        self.token = secrets.token_hex(16)
        self._changed = changed
        self._send_lock = threading.Lock()
        self._listener = peerlink.listen(listen_address, coordinator)
        host, port = self._listener.getsockname()[:2]
        self.address = peerlink.join_address(host, port)
        self.links: dict[int, peerlink.Link] = {}
        self.departed: set[int] = set()
        self.probed_by: dict[int, float] = {}
        self.stopping = False
        self._new: list[peerlink.Link] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._on_lost = on_lost
        self._on_fault = on_fault
        self._on_tick = on_tick
        self._thread = threading.Thread(target=self._run, name="tpustrategy-health", daemon=True)

    # -- what the owner asks ------------------------------------------------------------

    def start(self) -> None:
        """Starts the thread (it answers probes while the job assembles)."""
        self._thread.start()

    def on_thread(self) -> bool:
        """Whether the caller is this link set's thread."""
        return threading.current_thread() is self._thread

    def connect(self, peer: int, address: str, token: str, timeout: float) -> None:
        """Opens the link to ``peer`` listening at ``address`` (``OSError`` if refused)."""
        link = peerlink.connect(address, hello=self.task, token=token, timeout=timeout)
        link.peer = peer
        with self._changed:
            self._new.append(link)
            self.links[peer] = link
            self._changed.notify_all()
        self.wake()

    def open_links(self, *, skip: Iterable[int] = ()) -> list[peerlink.Link]:
        """The open links, but those to the peers in ``skip``."""
        skipped = set(skip)
        with self._changed:
            return [link for p, link in self.links.items() if p not in skipped]

    def send(self, links: list[peerlink.Link], message: dict[str, Any] | None) -> None:
        """Sends ``message`` (None: a heartbeat) on each of ``links``, one sender at a time."""
        with self._send_lock:
            for link in links:
                link.send(message)

    def broadcast(self, message: dict[str, Any] | None) -> None:
        """Sends ``message`` to every linked peer."""
        self.send(self.open_links(), message)

    def silent(self, longer_than: float, now: float) -> dict[int, float]:
        """The linked peers not heard from for more than ``longer_than`` s: peer -> seconds."""
        with self._changed:
            return {p: now - link.last_seen for p, link in sorted(self.links.items())
                    if now - link.last_seen > longer_than}

    def not_finished(self) -> list[int]:
        """Linked peers that have not said goodbye."""
        with self._changed:
            return sorted(p for p, link in self.links.items()
                          if not link.said_bye and p not in self.departed)

    def wake(self) -> None:
        """Makes the thread look at its links now (a link was added, or the owner stops)."""
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def close(self) -> None:
        """Closes every link after what was sent arrives (the process is ending)."""
        with self._changed:
            self.stopping = True  # the links we close ourselves are no one's fault
            links = list(self.links.values())
        for link in links:
            link.close(flush=True)

    def stop(self) -> None:
        """Closes every link and the listener and ends the thread (a clean end)."""
        self.close()
        self.wake()
        if self._thread.is_alive() and not self.on_thread():
            self._thread.join(timeout=2)
        try:
            self._listener.close()
        except OSError:
            pass

    def abandon(self) -> None:
        """Closes every socket at once, saying nothing (a forked child drops its parent's)."""
        self.stopping = True
        for sock in [self._listener, self._wake_r, self._wake_w,
                     *(link.sock for link in self.links.values())]:
            try:
                sock.close()
            except OSError:
                pass

    # -- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, "listen")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        last_beat = previous = time.monotonic()
        while not self.stopping:
            try:
                events = selector.select(self.interval / 2)
            except (OSError, ValueError):
                events = []
            now = time.monotonic()
            if now - previous > 3 * self.interval:
                # This thread did not run (the process was stopped, or the GIL was held):
                # silence during our own pause says nothing about the peers.
                with self._changed:
                    for link in self.links.values():
                        link.last_seen += now - previous
            previous = now
            for key, _ in events:
                try:
                    self._on_event(selector, key.data)
                except Exception:  # noqa: BLE001 - the thread must outlive a bad connection
                    pass
            with self._changed:
                new, self._new = self._new, []
            for link in new:
                try:
                    selector.register(link, selectors.EVENT_READ, link)
                except (KeyError, ValueError, OSError):
                    pass
            if now - last_beat >= self.interval:
                self.broadcast(None)
                last_beat = now
            self._on_tick(now)
        selector.close()

    def _on_event(self, selector: selectors.BaseSelector, data: Any) -> None:
        if data == "listen":
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, OSError):
                return
            incoming = peerlink.Link(sock)
            selector.register(incoming, selectors.EVENT_READ, incoming)
            return
        if data == "wake":
            try:
                self._wake_r.recv(4096)
            except OSError:
                pass
            return
        link: peerlink.Link = data
        messages = link.receive()
        if messages is None:
            selector.unregister(link)
            link.close()
            self._on_end_of_link(link)
            return
        for message in messages:
            if message is None:
                continue
            if link.peer is None:
                if not self._accept_hello(link, message):
                    selector.unregister(link)
                    link.close()
                    return
            elif message.get("bye"):
                link.said_bye = True
            elif isinstance(message.get("fault"), dict):
                self._on_fault(message["fault"])

    def _accept_hello(self, link: peerlink.Link, message: dict[str, Any]) -> bool:
        peer = message.get("hello")
        sender = message.get("from")
        if message.get("probe") and isinstance(sender, int) and 0 <= sender < self.num_processes:
            with self._changed:
                self.probed_by[sender] = time.monotonic()
        if (not isinstance(peer, int) or message.get("token") != self.token
                or not 0 <= peer < self.num_processes or peer == self.task):
            return False  # a probe, or not a member of this job
        link.peer = peer
        with self._changed:
            self.links[peer] = link
            self._changed.notify_all()
        return True

    def _on_end_of_link(self, link: peerlink.Link) -> None:
        peer = link.peer
        if peer is None or self.stopping:
            return
        with self._changed:
            if self.links.get(peer) is link:
                del self.links[peer]
            if link.said_bye:
                self.departed.add(peer)
                self._changed.notify_all()
                return
        if not self.stopping:
            self._on_lost(peer)
