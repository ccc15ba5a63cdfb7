"""The health monitor: a lost, failed or stuck peer ends every process with a named error.

Plain JAX ends a job's survivors with a C++ fatal error (SIGABRT) when a peer
dies, and leaves them hanging when a peer is stuck. ``tps.initialize`` starts
one ``Monitor`` per process instead; it keeps a direct link to every peer
(``peerlink``) and, on the first fault:

1. tells the other peers (so each names the process that failed first, not
   one that was torn down after it);
2. raises the fault's ``tps.errors`` exception in the main thread (through a
   signal: it lands in Python code, in ``time.sleep``, and in JAX's wait for a
   result such as ``np.asarray`` on a compiled collective, which checks for
   signals while it waits);
3. after a short grace (``min(10, heartbeat_timeout / 2)`` seconds) prints the
   named error, with where the main thread was, and ends the process with
   ``os._exit`` and the fault's exit code (75: a peer was lost or failed; 76: a
   peer is stuck or never joined; see ``faults``), before JAX's own heartbeat
   (set to twice ``heartbeat_timeout``) would abort it.

A process whose own code raises tells its peers (``sys.excepthook``) and exits
with code 1; at a normal exit every process says goodbye and waits at one
barrier (``shutdown_timeout``) so no one leaves a peer waiting in a collective.
The execution core calls ``translate`` on a raw ``JaxRuntimeError`` it catches.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from typing import Any

from tpustrategy._src.cluster import current as current_monitor
from tpustrategy._src.cluster import exits, faults, peerlink
from tpustrategy._src.cluster.faults import Fault, Peer
from tpustrategy._src.errors import DeadlineExceededError, UnavailableError

_KEY = "tpustrategy/health"


def current() -> Monitor | None:
    """The monitor of this process (None without ``tps.initialize`` on several processes)."""
    monitor: Monitor | None = current_monitor.get()
    return monitor


class Monitor:
    """Watches the peers of one process. Created by ``tps.initialize`` before it joins.

    Args:
      task: this process's index.
      num_processes: the size of the job.
      heartbeat_timeout: seconds of silence after which a peer is stuck.
      shutdown_timeout: seconds a finished process waits for the others.
      peers: what the configuration says about every process (addresses, names).
      listen_address: where this process's link listener should be (its own
        configured address), if it can bind it.
      coordinator: the coordinator's address (the fallback listener uses the
        interface that reaches it).
    """

    def __init__(self, *, task: int, num_processes: int, heartbeat_timeout: float,
                 shutdown_timeout: float, peers: dict[int, Peer],
                 listen_address: str | None, coordinator: str | None):
        self.task = task
        self.num_processes = num_processes
        self.timeout = float(heartbeat_timeout)
        self.interval = max(0.2, min(1.0, self.timeout / 5))
        self.grace = min(10.0, max(1.0, self.timeout / 2))
        self.shutdown_timeout = float(shutdown_timeout)
        self.peers = {t: peers.get(t, Peer(task=t, num_processes=num_processes))
                      for t in range(num_processes)}
        self.token = secrets.token_hex(16)
        self._listener = peerlink.listen(listen_address, coordinator)
        host, port = self._listener.getsockname()[:2]
        self.link_address = peerlink.join_address(host, port)
        self._lock = threading.RLock()
        self._send_lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._links: dict[int, peerlink.Link] = {}
        self._new: list[peerlink.Link] = []
        self._departed: set[int] = set()
        # Peers whose probe reached this process while the job assembled (they were alive).
        self.probed_by: dict[int, float] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self.fault: Fault | None = None
        self._exit_at: float | None = None
        self._stopping = False
        self._delivered = False
        self.exiting = False
        self._signal_installed = False
        self._thread = threading.Thread(target=self._run, name="tpustrategy-health", daemon=True)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Starts the monitor thread (it answers probes while the job assembles)."""
        self._thread.start()

    def me(self) -> Peer:
        return self.peers[self.task]

    def join_links(self, client: Any, timeout: float) -> None:
        """Publishes this process's link, connects to every peer, waits for all links.

        Raises:
          UnavailableError: a peer did not publish or open its link in time
            (it ended right after joining).
        """
        deadline = time.monotonic() + timeout
        info = {"link": self.link_address, "token": self.token, "pid": os.getpid(),
                "host": socket.gethostname()}
        client.key_value_set(f"{_KEY}/{self.task}", json.dumps(info))
        records = {}
        for peer in range(self.num_processes):
            if peer == self.task:
                continue
            remaining = max(1, int((deadline - time.monotonic()) * 1000))
            try:
                records[peer] = json.loads(client.blocking_key_value_get(f"{_KEY}/{peer}",
                                                                         remaining))
            except Exception as err:  # noqa: BLE001 - any failure means the peer is gone
                self._fail_join(peer, f"joined the job but did not publish its health link "
                                      f"within {timeout:g} s ({type(err).__name__})")
            old = self.peers[peer]
            self.peers[peer] = Peer(task=peer, num_processes=self.num_processes,
                                    address=old.address or records[peer]["link"], name=old.name,
                                    pid=records[peer].get("pid"), host=records[peer].get("host"))
        mine = self.peers[self.task]
        self.peers[self.task] = Peer(task=self.task, num_processes=self.num_processes,
                                     address=mine.address or self.link_address, name=mine.name,
                                     pid=os.getpid(), host=info["host"])
        for peer in range(self.task):
            try:
                link = peerlink.connect(records[peer]["link"], hello=self.task,
                                        token=records[peer]["token"],
                                        timeout=max(1.0, deadline - time.monotonic()))
            except OSError as err:
                self._fail_join(peer, f"joined the job but its health link at "
                                      f"{records[peer]['link']} refused this process ({err})")
            link.peer = peer
            self._add(link)
        with self._changed:
            while len(self._links) < self.num_processes - 1 and self.fault is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            if self.fault is not None:
                raise self.fault.exception()
            absent = [p for p in range(self.task + 1, self.num_processes) if p not in self._links]
        if absent:
            self._fail_join(absent[0], f"joined the job but did not open its health link "
                                       f"within {timeout:g} s")

    def _fail_join(self, peer: int, detail: str) -> None:
        fault = self._fault(faults.LOST, [peer], detail)
        self.report(fault)
        raise fault.exception()

    def install(self) -> None:
        """Makes this the process's monitor: excepthook, exit barrier, main-thread signal."""
        current_monitor.put(self)
        self._signal_installed = exits.install()

    def stop(self) -> None:
        """Stops watching (after a clean end): links close without blaming anyone."""
        with self._lock:
            self._stopping = True
            links = list(self._links.values())
        for link in links:
            link.close(flush=True)
        self._wake()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=2)
        try:
            self._listener.close()
        except OSError:
            pass
        current_monitor.clear_if(self)

    # -- what other code asks -------------------------------------------------------------

    def report(self, fault: Fault, *, exit_at: float | None = None) -> bool:
        """Records the first fault, tells the peers, interrupts the main thread, arms the exit."""
        with self._changed:
            if self.fault is not None or self._stopping:
                return False
            self.fault = fault
            self._exit_at = time.monotonic() + self.grace if exit_at is None else exit_at
            links = [link for p, link in self._links.items() if p not in fault.culprits]
            self._changed.notify_all()
        self._send_all(links, {"fault": fault.to_wire()})
        if threading.current_thread() is threading.main_thread():
            self._delivered = True  # the main thread itself found it and is raising it
        elif self._signal_installed and not self.exiting:
            try:
                signal.pthread_kill(threading.main_thread().ident or 0, exits.SIGNAL)
            except (OSError, ValueError):
                pass
        self._wake()
        return True

    def explain(self, kind: str, wait: float = 2.0) -> Fault | None:
        """The peer fault behind a raw collective error of ``kind`` (``"lost"``/``"timeout"``)."""
        with self._changed:
            if kind == faults.LOST:
                self._changed.wait_for(lambda: self.fault is not None, timeout=wait)
            if self.fault is not None:
                return self.fault
            departed = sorted(self._departed)
            now = time.monotonic()
            silent = sorted(p for p, link in self._links.items()
                            if now - link.last_seen > 2 * self.interval)
        if kind == faults.LOST and departed:
            fault = self._fault(faults.LEFT, departed, "finished its program and exited while "
                                "this process still needed it in a collective")
        elif kind != faults.LOST and silent:
            fault = self._fault(faults.STUCK, silent, "did not reach a collective within the "
                                "collective timeout and has stopped answering this process")
        else:
            return None
        self.report(fault)
        return self.fault

    def _fault(self, kind: str, culprits: list[int], detail: str,
               peer_error: str | None = None) -> Fault:
        return Fault(kind=kind, culprits=tuple(culprits),
                     described=tuple(self.peers[p].describe() for p in culprits),
                     addresses=tuple(self.peers[p].address for p in culprits),
                     detail=detail, reporter=self.task, peer_error=peer_error)

    def own_error(self, error: BaseException) -> Fault:
        """The fault this process's own uncaught ``error`` is, for its peers."""
        first = (str(error).strip().splitlines() or [""])[0][:300]
        text = f"{type(error).__name__}: {first}" if first else type(error).__name__
        return self._fault(faults.ERROR, [self.task], f"failed: its own code raised {text}",
                           peer_error=text)

    def tell_peers(self, fault: Fault) -> None:
        with self._lock:
            links = list(self._links.values())
        self._send_all(links, {"fault": fault.to_wire()})

    def say_bye(self) -> None:
        with self._lock:
            links = list(self._links.values())
        self._send_all(links, {"bye": True})

    def not_finished(self) -> list[int]:
        """Peers that have not said goodbye."""
        with self._lock:
            return sorted(p for p, link in self._links.items()
                          if not link.said_bye and p not in self._departed)

    # -- ending the process ------------------------------------------------------------

    def end_process(self, fault: Fault | None, *, exception: BaseException | None = None,
                    printed: bool = False, code: int | None = None, forced: bool = False) -> None:
        """Prints the named error and ends the process now (never returns)."""
        if not exits.exit_lock.acquire(blocking=threading.current_thread() is not self._thread):
            return  # another thread is already ending the process
        self.exiting = True
        code = fault.exit_code if code is None and fault is not None else (code or 1)
        parts: list[str] = []
        if forced:
            parts.append(f"tpustrategy: process {self.task} of {self.num_processes} is ending "
                         f"with exit code {code}; its main thread was here:\n")
            frame = sys._current_frames().get(threading.main_thread().ident or 0)
            if frame is not None:
                parts.extend(traceback.format_stack(frame))
        if not printed:
            error = exception if exception is not None else (
                fault.exception() if fault is not None else None)
            if error is not None:
                parts.extend(traceback.format_exception(error) if error.__traceback__
                             or error.__cause__ else traceback.format_exception_only(error))
        if fault is not None:
            parts.append(fault.marker(code) + "\n")
        exits.write_and_exit(self, "".join(parts), code)

    def _close_links(self) -> None:
        with self._lock:
            self._stopping = True  # the links we close ourselves are no one's fault
            links = list(self._links.values())
        for link in links:
            link.close(flush=True)

    # -- the monitor thread ------------------------------------------------------------

    def _add(self, link: peerlink.Link) -> None:
        with self._lock:
            self._new.append(link)
            if link.peer is not None:
                self._links[link.peer] = link
                self._changed.notify_all()
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def _send_all(self, links: list[peerlink.Link], message: dict[str, Any] | None) -> None:
        with self._send_lock:
            for link in links:
                link.send(message)

    def _run(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._listener, selectors.EVENT_READ, "listen")
        selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        last_beat = previous = time.monotonic()
        while not self._stopping:
            try:
                events = selector.select(self.interval / 2)
            except (OSError, ValueError):
                events = []
            now = time.monotonic()
            if now - previous > 3 * self.interval:
                # This thread did not run (the process was stopped, or the GIL was held):
                # silence during our own pause says nothing about the peers.
                with self._lock:
                    for link in self._links.values():
                        link.last_seen += now - previous
            previous = now
            for key, _ in events:
                try:
                    self._on_event(selector, key.data)
                except Exception:  # noqa: BLE001 - the monitor must outlive a bad connection
                    pass
            with self._lock:
                new, self._new = self._new, []
            for link in new:
                try:
                    selector.register(link, selectors.EVENT_READ, link)
                except (KeyError, ValueError, OSError):
                    pass
            if now - last_beat >= self.interval:
                with self._lock:
                    links = list(self._links.values())
                self._send_all(links, None)
                last_beat = now
            self._check_silence(now)
            if self._exit_at is not None and now >= self._exit_at and not self._stopping:
                self.end_process(self.fault, forced=True)
        selector.close()

    def _on_event(self, selector: selectors.BaseSelector, data: Any) -> None:
        if data == "listen":
            try:
                sock, _ = self._listener.accept()
            except (BlockingIOError, OSError):
                return
            link = peerlink.Link(sock)
            selector.register(link, selectors.EVENT_READ, link)
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
                try:
                    self.report(Fault.from_wire(message["fault"]))
                except (TypeError, ValueError):
                    pass

    def _accept_hello(self, link: peerlink.Link, message: dict[str, Any]) -> bool:
        peer = message.get("hello")
        sender = message.get("from")
        if message.get("probe") and isinstance(sender, int) and 0 <= sender < self.num_processes:
            with self._lock:
                self.probed_by[sender] = time.monotonic()
        if (not isinstance(peer, int) or message.get("token") != self.token
                or not 0 <= peer < self.num_processes or peer == self.task):
            return False  # a probe, or not a member of this job
        link.peer = peer
        with self._changed:
            self._links[peer] = link
            self._changed.notify_all()
        return True

    def _on_end_of_link(self, link: peerlink.Link) -> None:
        peer = link.peer
        if peer is None or self._stopping:
            return
        with self._changed:
            if self._links.get(peer) is link:
                del self._links[peer]
            if link.said_bye:
                self._departed.add(peer)
                self._changed.notify_all()
                return
        if not self._stopping:
            self.report(self._fault(faults.LOST, [peer], "was lost: its connection to this "
                                    "process closed without a goodbye (it was killed, crashed, "
                                    "or its host went down)"))

    def _check_silence(self, now: float) -> None:
        if self.fault is not None or self._stopping:
            return
        with self._lock:
            silent = sorted(p for p, link in self._links.items()
                            if now - link.last_seen > self.timeout)
            seconds = max((now - self._links[p].last_seen for p in silent), default=0.0)
        if silent:
            self.report(self._fault(
                faults.STUCK, silent,
                f"has not answered for {seconds:.0f} s (heartbeat_timeout={self.timeout:g} s): "
                "it is stuck (stopped, or hung with the interpreter blocked), or its host is "
                "unreachable"))


# -- translation of raw runtime errors ---------------------------------------------------


def translate(error: BaseException) -> BaseException:
    """Returns the ``tps.errors`` exception that a raw JAX runtime error stands for.

    Call it where a compiled program's result or a cross-process collective is
    awaited: ``except jax.errors.JaxRuntimeError as e: raise translate(e) from e``.
    A connection closed or reset by a peer becomes ``UnavailableError`` naming
    the lost process; a collective timeout becomes ``DeadlineExceededError``
    naming the processes that stopped answering. Errors that say nothing about
    peers (a shape error, an out-of-memory) come back unchanged.

    Args:
      error: the caught exception.

    Returns:
      The named exception (its ``__cause__`` is ``error``), or ``error`` itself.
    """
    if isinstance(error, (UnavailableError, DeadlineExceededError)):
        return error
    if not faults.is_runtime_error(error):
        return error
    kind = faults.classify(error)
    if kind is None:
        return error
    monitor = current()
    fault = monitor.explain(kind) if monitor is not None else None
    if fault is not None:
        named = fault.exception()
    elif kind == faults.LOST:
        named = UnavailableError(
            "A collective across processes failed: the connection to a peer process closed "
            f"or was refused ({_first_line(error)}). Which process is not known here "
            "(tps.initialize was not used, or the peer had already said goodbye).\nFix: read "
            "the other processes' logs for the one that ended first; start the job with "
            "tps.initialize so that faults name the process.")
    else:
        named = DeadlineExceededError(
            "A collective across processes timed out (tps.initialize(collective_timeout=...)) "
            f"({_first_line(error)}), but every peer process is alive and answering: one of "
            "them runs different code (another number of steps or collectives) or is much "
            "slower.\nFix: make every process run the same steps in the same order; raise "
            "collective_timeout if a process is legitimately busy that long (compiling, "
            "loading data, writing a checkpoint).")
    named.__cause__ = error
    return named


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
