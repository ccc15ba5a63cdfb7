"""Faults of a multi-process job: who failed, how, the exception to raise and the exit code.

A ``Fault`` is what one process learns about another: it was *lost* (its
connection closed without a goodbye: killed, crashed, host gone), it *failed*
(its own code raised), it is *stuck* (silent for ``heartbeat_timeout``), it
*left* (finished and exited while the job still needed it) or it is *missing*
(never joined ``tps.initialize``). Every fault names the processes by index and
address, becomes one ``tps.errors`` exception, and has a documented exit code:

- ``EXIT_UNAVAILABLE`` (75): a peer was lost, failed or left
  (``tps.errors.UnavailableError``);
- ``EXIT_DEADLINE_EXCEEDED`` (76): a peer is stuck or never joined, or this
  process waited too long at the end for the others
  (``tps.errors.DeadlineExceededError``).

This module has no JAX and no threads: it is the vocabulary the health monitor,
the launcher and the tests share.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from tpustrategy._src.errors import DeadlineExceededError, UnavailableError

EXIT_UNAVAILABLE = 75
EXIT_DEADLINE_EXCEEDED = 76
# The last line a process prints when it ends because of a fault; the launcher reads it.
MARKER = "tpustrategy.fault:"

LOST, ERROR, LEFT, STUCK, MISSING = "lost", "error", "left", "stuck", "missing"
TIMEOUT = "timeout"  # what classify() says of a raw error that timed out (not a Fault kind)
_UNAVAILABLE_KINDS = (LOST, ERROR, LEFT)
_KINDS = (LOST, ERROR, LEFT, STUCK, MISSING)

# The only place raw runtime-error text (XLA's gloo collectives, gRPC, the coordination
# service) is read: each pattern with an example of the text it stands for (tests check
# every one). "Lost": the other side went away; "timeout": it did not answer in time.
LOST_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"connection (closed|reset)", "Gloo AllGather failed: [pair.cc:547] Connection closed by peer"),
    (r"broken pipe", "Gloo all-reduce failed: Write error: Broken pipe"),
    (r"socket closed", "Socket closed"),
    (r"connection refused", "failed to connect to all addresses; last error: Connection refused"),
    (r"end of file", "Read error: unexpected end of file"),
    (r"\bUNAVAILABLE\b", "UNAVAILABLE: Failed to send RPC to coordination service"),
    (r"is not connected", "Transport endpoint is not connected"),
)
TIMEOUT_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"timed out", "Gloo AllGather failed: Timed out waiting 30000ms for recv operation"),
    (r"deadline[ _]exceeded", "DEADLINE_EXCEEDED: Deadline Exceeded"),
    (r"timeout", "Barrier timeout. Barrier_id: tps/exit"),
)
_LOST = re.compile("|".join(p for p, _ in LOST_PATTERNS), re.IGNORECASE)
_TIMEOUT = re.compile("|".join(p for p, _ in TIMEOUT_PATTERNS), re.IGNORECASE)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Peer:
    """What is known about one process of the job, for messages.

    Attributes:
      task: the process index (``jax.process_index()`` there).
      num_processes: the size of the job.
      address: the address the job was configured with (``TF_CONFIG``, the
        launcher), else the address its health link listens on.
      name: its TensorFlow task name (``"worker:1"``), when ``TF_CONFIG`` gave one.
      pid: its OS process id, once it joined.
      host: its host name, once it joined.
    """

    task: int
    num_processes: int
    address: str | None = None
    name: str | None = None
    pid: int | None = None
    host: str | None = None

    def describe(self) -> str:
        """``"process 1 of 2 (worker:1, 127.0.0.1:2222, pid 4242 on vm)"``."""
        parts = [p for p in (self.name, self.address) if p]
        if self.pid is not None:
            parts.append(f"pid {self.pid}" + (f" on {self.host}" if self.host else ""))
        where = f" ({', '.join(parts)})" if parts else ""
        return f"process {self.task} of {self.num_processes}{where}"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Fault:
    """One fault, as seen by ``reporter``.

    Attributes:
      kind: ``"lost"``, ``"error"``, ``"left"``, ``"stuck"`` or ``"missing"``.
      culprits: the processes at fault.
      described: ``Peer.describe()`` of each culprit.
      addresses: each culprit's address (or None).
      detail: why, in words (ends without a period).
      reporter: the process that noticed it.
      peer_error: ``"ValueError: boom"`` for kind ``"error"``.
      fix: the advice that ends the message.
    """

    kind: str
    culprits: tuple[int, ...]
    described: tuple[str, ...]
    addresses: tuple[str | None, ...]
    detail: str
    reporter: int
    peer_error: str | None = None
    fix: str = ""

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"Fault: kind must be one of {_KINDS}. Received: {self.kind!r}.")

    @property
    def exit_code(self) -> int:
        """75 (``EXIT_UNAVAILABLE``) or 76 (``EXIT_DEADLINE_EXCEEDED``)."""
        return EXIT_UNAVAILABLE if self.kind in _UNAVAILABLE_KINDS else EXIT_DEADLINE_EXCEEDED

    def message(self) -> str:
        who = " and ".join(self.described) or "A peer process"
        fix = self.fix or DEFAULT_FIX[self.kind]
        return f"{who} {self.detail}.\n{fix}"

    def exception(self) -> RuntimeError:
        """The ``tps.errors`` exception that stands for this fault."""
        if self.kind in _UNAVAILABLE_KINDS:
            return UnavailableError(self.message(), task=self.culprits[0],
                                    address=self.addresses[0], peer_error=self.peer_error)
        return DeadlineExceededError(self.message(), missing=self.culprits,
                                     addresses=self.addresses)

    def marker(self, exit_code: int | None = None) -> str:
        """The one-line machine-readable summary printed last (read by the launcher)."""
        record = {"kind": self.kind, "culprits": list(self.culprits), "reporter": self.reporter,
                  "exit_code": self.exit_code if exit_code is None else exit_code}
        if self.peer_error:
            record["error"] = self.peer_error
        return f"{MARKER} {json.dumps(record)}"

    def to_wire(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_wire(cls, record: dict[str, Any]) -> Fault:
        """Rebuilds a fault sent by a peer (lists become tuples)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        values = {k: tuple(v) if isinstance(v, list) else v
                  for k, v in record.items() if k in fields}
        return cls(**values)


DEFAULT_FIX = {
    LOST: ("Fix: read that process's own log (and the launcher's or the scheduler's) for why "
           "it ended; then restart the job, from a checkpoint if you have one."),
    ERROR: ("Fix: the traceback is in that process's log; fix the error there and restart "
            "the job. This process ends because every collective of the job needs all "
            "processes."),
    LEFT: ("Fix: make every process run the same steps (same number of batches, same "
           "collectives) so that they reach the end of the program together."),
    STUCK: ("Fix: see what that process is doing (its log; `py-spy dump --pid PID`); if it "
            "is legitimately busy that long, raise tps.initialize(heartbeat_timeout=...)."),
    MISSING: ("Fix: start every process of the job with the same coordinator address and "
              "number of processes and a distinct process id; raise "
              "tps.initialize(initialization_timeout=...) if processes start slowly."),
}


def parse_marker(line: str) -> dict[str, Any] | None:
    """The record of a ``tpustrategy.fault:`` line (None for any other line)."""
    text = line.strip()
    index = text.find(MARKER)
    if index < 0:
        return None
    try:
        record = json.loads(text[index + len(MARKER):])
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def classify(error: BaseException) -> str | None:
    """``"lost"``, ``"timeout"`` or None: what a raw runtime error says about the peers."""
    text = str(error)
    if _LOST.search(text):
        return LOST
    if _TIMEOUT.search(text):
        return TIMEOUT
    return None


def is_runtime_error(error: BaseException) -> bool:
    """Whether ``error`` is JAX's ``JaxRuntimeError`` (without importing JAX)."""
    return any(c.__name__ in ("JaxRuntimeError", "XlaRuntimeError") for c in type(error).__mro__)
