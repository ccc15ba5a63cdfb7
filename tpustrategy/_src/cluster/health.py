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

The monitor is the fault state of the process (the first fault, when the process
must end) and joins three modules, one concern each: ``links`` (the peer links
and the thread that serves them), ``diagnosis`` (what a symptom or a raw error
says about the peers, and ``translate``) and ``exits`` (the main-thread signal,
the excepthook, the exit barrier and ``end_process``).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from typing import Any

from tpustrategy._src.cluster import current as current_monitor
from tpustrategy._src.cluster import diagnosis, exits, faults
from tpustrategy._src.cluster.diagnosis import translate as translate
from tpustrategy._src.cluster.faults import Fault, Peer
from tpustrategy._src.cluster.links import LinkSet

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

    Attributes:
      fault: the first fault found (by this process or told by a peer), else None.
      links: the process's ``links.LinkSet``.
      exiting: the exit path (``exits``) is ending the process.
      delivered: the main thread has raised (or is raising) the fault's exception.
      signal_installed: ``exits.SIGNAL``'s handler is ours (``install``), so the
        monitor thread may interrupt the main thread with it.
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
        self._changed = threading.Condition(threading.RLock())
        self.links = LinkSet(task=task, num_processes=num_processes, interval=self.interval,
                             changed=self._changed, listen_address=listen_address,
                             coordinator=coordinator, on_lost=self._on_lost,
                             on_fault=self._on_fault, on_tick=self._on_tick)
        self.token = self.links.token
        self.link_address = self.links.address
        self.fault: Fault | None = None
        self._exit_at: float | None = None
        self.delivered = False
        self.exiting = False
        self.signal_installed = False

    @property
    def stopping(self) -> bool:
        """The monitor stopped (or the process is ending): faults are no longer recorded."""
        return self.links.stopping

    @property
    def probed_by(self) -> dict[int, float]:
        """Peers whose probe reached this process while the job assembled (they were alive)."""
        return self.links.probed_by

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Starts the monitor thread (it answers probes while the job assembles)."""
        self.links.start()

    def me(self) -> Peer:
        return self.peers[self.task]

    def join_links(self, client: Any, timeout: float) -> None:
        """Publishes this process's link, connects to every peer, waits for all links.

        Raises:
          UnavailableError: a peer did not publish or open its link in time
            (it ended right after joining).
        """
        deadline = time.monotonic() + timeout
        info: dict[str, Any] = {"link": self.link_address, "token": self.token, "pid": os.getpid(),
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
                self.links.connect(peer, records[peer]["link"], records[peer]["token"],
                                   timeout=max(1.0, deadline - time.monotonic()))
            except OSError as err:
                self._fail_join(peer, f"joined the job but its health link at "
                                      f"{records[peer]['link']} refused this process ({err})")
        with self._changed:
            while len(self.links.links) < self.num_processes - 1 and self.fault is None:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            if self.fault is not None:
                raise self.fault.exception()
            absent = [p for p in range(self.task + 1, self.num_processes)
                      if p not in self.links.links]
        if absent:
            self._fail_join(absent[0], f"joined the job but did not open its health link "
                                       f"within {timeout:g} s")

    def _fail_join(self, peer: int, detail: str) -> None:
        fault = diagnosis.fault(self.peers, self.task, faults.LOST, [peer], detail)
        self.report(fault)
        raise fault.exception()

    def install(self) -> None:
        """Makes this the process's monitor: excepthook, exit barrier, main-thread signal."""
        current_monitor.put(self)
        self.signal_installed = exits.install()

    def stop(self) -> None:
        """Stops watching (after a clean end): links close without blaming anyone."""
        self.links.stop()
        current_monitor.clear_if(self)

    # -- what other code asks -------------------------------------------------------------

    def report(self, fault: Fault, *, exit_at: float | None = None) -> bool:
        """Records the first fault, tells the peers, interrupts the main thread, arms the exit."""
        with self._changed:
            if self.fault is not None or self.stopping:
                return False
            self.fault = fault
            self._exit_at = time.monotonic() + self.grace if exit_at is None else exit_at
            links = self.links.open_links(skip=fault.culprits)
            self._changed.notify_all()
        self.links.send(links, {"fault": fault.to_wire()})
        exits.deliver(self)
        self.links.wake()
        return True

    def explain(self, kind: str, wait: float = 2.0) -> Fault | None:
        """The peer fault behind a raw collective error of ``kind`` (``"lost"``/``"timeout"``)."""
        with self._changed:
            if kind == faults.LOST:
                self._changed.wait_for(lambda: self.fault is not None, timeout=wait)
            if self.fault is not None:
                return self.fault
            departed = sorted(self.links.departed)
            quiet = sorted(self.links.silent(2 * self.interval, time.monotonic()))
        found = diagnosis.behind_collective(self.peers, self.task, kind, departed, quiet)
        if found is None:
            return None
        self.report(found)
        return self.fault

    def own_error(self, error: BaseException) -> Fault:
        """The fault this process's own uncaught ``error`` is, for its peers."""
        return diagnosis.own_error(self.peers, self.task, error)

    def tell_peers(self, fault: Fault) -> None:
        self.links.broadcast({"fault": fault.to_wire()})

    def say_bye(self) -> None:
        self.links.broadcast({"bye": True})

    def not_finished(self) -> list[int]:
        """Peers that have not said goodbye."""
        return self.links.not_finished()

    def end_process(self, fault: Fault | None, *, exception: BaseException | None = None,
                    printed: bool = False, code: int | None = None, forced: bool = False) -> None:
        """Prints the named error and ends the process now (never returns); see ``exits``."""
        exits.end_process(self, fault, exception=exception, printed=printed, code=code,
                          forced=forced)

    # -- what the link set tells ---------------------------------------------------------

    def _on_lost(self, peer: int) -> None:
        self.report(diagnosis.lost(self.peers, self.task, peer))

    def _on_fault(self, record: dict[str, Any]) -> None:
        try:
            fault = Fault.from_wire(record)
        except (TypeError, ValueError):
            return
        self.report(fault)

    def _on_tick(self, now: float) -> None:
        self._check_silence(now)
        if self._exit_at is not None and now >= self._exit_at and not self.stopping:
            self.end_process(self.fault, forced=True)

    def _check_silence(self, now: float) -> None:
        if self.fault is not None or self.stopping:
            return
        seconds = self.links.silent(self.timeout, now)
        if seconds:
            self.report(diagnosis.silent(self.peers, self.task, seconds, self.timeout))
