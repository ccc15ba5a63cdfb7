"""Joining the job: ``jax.distributed.initialize`` under tpustrategy's own deadline.

JAX aborts the process (SIGABRT) when the job does not assemble within its
``initialization_timeout``, without saying who is missing. ``tps.initialize``
gives JAX a slightly longer deadline, runs the join on a helper thread, and at
its own deadline raises ``DeadlineExceededError`` naming the processes that do
not answer at their configured addresses (every process listens on its own
address from ``TF_CONFIG`` or the launcher while it joins). The process then
ends with exit code 76 before JAX's deadline, whether or not the error is
caught. After a successful join, the health monitor connects to every peer.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from tpustrategy._src.cluster import coordinator, exits, faults, health, peerlink
from tpustrategy._src.cluster.faults import Fault, Peer

logger = logging.getLogger("tpustrategy")
# How long before the start-up deadline the peers are looked at (see ``join``).
EARLY_LOOK_S = 5.0


def jax_initialization_timeout(seconds: int) -> int:
    """JAX's own start-up deadline: later than tpustrategy's, so ours is the one users see."""
    return seconds + max(10, seconds // 5)


def jax_heartbeat_timeout(seconds: int) -> int:
    """JAX's heartbeat: twice tpustrategy's, so a stuck peer is named before JAX aborts."""
    return 2 * seconds


def start_monitor(values: dict[str, Any], peers: dict[int, Peer], *, heartbeat_timeout: int,
                  shutdown_timeout: int) -> health.Monitor | None:
    """The monitor of this process, listening before the join (None if the job is unknown)."""
    task, num = values["process_id"], values["num_processes"]
    if task is None or num is None:
        return None
    own = peers.get(task)
    monitor = health.Monitor(
        task=task, num_processes=num, heartbeat_timeout=heartbeat_timeout,
        shutdown_timeout=shutdown_timeout, peers=peers,
        listen_address=own.address if own is not None and task != 0 else None,
        coordinator=values["coordinator_address"])
    monitor.start()
    return monitor


def join(kwargs: dict[str, Any], values: dict[str, Any], monitor: health.Monitor | None,
         timeout: int) -> None:
    """Calls ``jax.distributed.initialize(**kwargs)``; raises named errors on the deadline.

    Raises:
      DeadlineExceededError: the job did not assemble within ``timeout`` seconds.
      whatever ``jax.distributed.initialize`` raised.
    """
    import jax

    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            with coordinator.hosted(True):
                jax.distributed.initialize(**kwargs)
        except BaseException as err:  # noqa: BLE001 - handed to the calling thread
            outcome["error"] = err

    started = time.monotonic()
    thread = threading.Thread(target=run, name="tpustrategy-join", daemon=True)
    thread.start()
    # A few seconds before the deadline, see who is up: with 3+ processes a survivor whose
    # deadline comes first ends before the others look, and must not be blamed for it.
    early = min(EARLY_LOOK_S, timeout / 3)
    thread.join(max(0.0, timeout - early))
    seen = _answering(values, monitor) if thread.is_alive() else set()
    thread.join(max(0.0, started + timeout - time.monotonic()))
    if thread.is_alive():
        jax_deadline = started + kwargs.get("initialization_timeout", timeout)
        fault = _missing_fault(values, monitor, timeout, seen)
        if monitor is not None:
            monitor.install()
            monitor.report(fault, exit_at=jax_deadline - 2)
        else:
            exits.arm(fault, jax_deadline - 2)
        raise fault.exception()
    if "error" in outcome:
        if monitor is not None:
            monitor.stop()
        raise outcome["error"]


def connect_peers(monitor: health.Monitor | None, values: dict[str, Any], *,
                  heartbeat_timeout: int, shutdown_timeout: int, timeout: int) -> None:
    """After the join: the monitor links to every peer (or is dropped when JAX is a stand-in)."""
    from tpustrategy._src.jax_shims import coordination

    client, job = coordination.client(), coordination.running_job()
    if client is None or job is None or job.num_processes < 2:
        if monitor is not None:
            monitor.stop()
        return
    if monitor is None:
        monitor = start_monitor(
            {**values, "process_id": job.process_id, "num_processes": job.num_processes},
            {}, heartbeat_timeout=heartbeat_timeout, shutdown_timeout=shutdown_timeout)
        assert monitor is not None
    monitor.install()
    monitor.join_links(client, min(timeout, 120))


def _where(peer: int, values: dict[str, Any], monitor: health.Monitor | None) -> str | None:
    peers = monitor.peers if monitor is not None else {}
    return values["coordinator_address"] if peer == 0 else (
        peers[peer].address if peer in peers else None)


def _answering(values: dict[str, Any], monitor: health.Monitor | None) -> set[int]:
    """The peers that answer at their configured addresses now."""
    task, num = values["process_id"], values["num_processes"]
    found = set()
    for peer in range(num or 0):
        where = _where(peer, values, monitor)
        if peer != task and where is not None and peerlink.probe(where, timeout=1.0, sender=task):
            found.add(peer)
    return found


def _missing_fault(values: dict[str, Any], monitor: health.Monitor | None,
                   timeout: int, seen: set[int] | frozenset[int] = frozenset()) -> Fault:
    task, num = values["process_id"], values["num_processes"]
    address = values["coordinator_address"]
    peers = monitor.peers if monitor is not None else {}
    missing: list[int] = []
    unknown: list[int] = []
    for peer in range(num or 0):
        if peer == task:
            continue
        where = _where(peer, values, monitor)
        if peer in seen or peer in getattr(monitor, "probed_by", {}):
            continue  # it was up while joining (it may have ended since, after its own deadline)
        if where is None:
            unknown.append(peer)
        elif not peerlink.probe(where, timeout=1.0, sender=task):
            missing.append(peer)
    if num is None and address is not None and not peerlink.probe(address, timeout=1.0):
        missing, unknown = [0], []
    who = f"process {task} of {num}" if task is not None else "this process"
    wait = f"within initialization_timeout={timeout} s (waited by {who})"
    if not missing and len(unknown) == 1:
        return Fault(
            kind=faults.MISSING, culprits=(unknown[0],),
            described=(_describe(unknown[0], num, peers, address),), addresses=(None,),
            detail=(f"did not join the job {wait}; every other process did (not started, "
                    "died before calling tps.initialize, or given another coordinator "
                    "address)"),
            reporter=task if task is not None else -1)
    if missing:
        return Fault(
            kind=faults.MISSING, culprits=tuple(missing),
            described=tuple(_describe(p, num, peers, address) for p in missing),
            addresses=tuple(address if p == 0 else peers[p].address if p in peers else None
                            for p in missing),
            detail=(f"did not join the job {wait}: nothing answers at "
                    f"{'its address' if len(missing) == 1 else 'their addresses'} (not "
                    "started, died before calling tps.initialize, or given another address)"),
            reporter=task if task is not None else -1)
    if unknown:
        detail = (f"did not all join the job {wait}; the coordinator at {address} is up, but "
                  f"which of processes {', '.join(map(str, unknown))} are missing is not known "
                  "here (start the job with TF_CONFIG or python -m tpustrategy.launch to have "
                  "them named)")
    else:
        detail = (f"did not all join the job {wait}, although every process answers at its "
                  "address: one was given another coordinator_address, num_processes or "
                  "process_id")
    return Fault(kind=faults.MISSING, culprits=tuple(unknown),
                 described=("Some processes of the job",), addresses=(), detail=detail,
                 reporter=task if task is not None else -1)


def _describe(peer: int, num: int | None, peers: dict[int, Peer], coordinator: str | None) -> str:
    if peer in peers:
        text = peers[peer].describe()
    else:
        text = Peer(task=peer, num_processes=num or 0, address=coordinator).describe()
    return text + (" (the coordinator)" if peer == 0 else "")
