"""The local launcher: run a job of N processes on 127.0.0.1 and supervise it.

``python -m tpustrategy.launch -n 2 --devices-per-process 4 script.py [args]``
starts ``script.py`` N times with ``TPS_COORDINATOR_ADDRESS`` (a free loopback
port), ``TPS_NUM_PROCESSES``, ``TPS_PROCESS_ID`` and ``TPS_PROCESS_ADDRESSES``
(every process's own loopback address, so faults name processes) set, so
``tps.initialize()`` needs no arguments, and with ``--devices-per-process`` fake
CPU devices each. Every output line is prefixed with ``[p<i>]``.

When a process fails, the others get ``--fault-grace`` seconds to end on their
own (tpustrategy ends them with a named error), then the rest are stopped
(SIGTERM, then SIGKILL). The launcher names the process that failed *first* and
why (its signal, exit code, or exception), not the ones torn down after it, and
exits with that process's code (128 + signal number for a signal). Children
die with the launcher, even when it is SIGKILLed (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from tpustrategy._src.cluster import faults

_DEVICE_FLAG = "--xla_force_host_platform_device_count"
EXIT_TIMEOUT = 124
_PR_SET_PDEATHSIG = 1
_SECONDARY = (faults.EXIT_UNAVAILABLE, faults.EXIT_DEADLINE_EXCEEDED)
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b.*)$")


def free_port(host: str = "127.0.0.1") -> int:
    """Returns a TCP port on ``host`` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def process_env(base: dict[str, str], *, process_id: int, num_processes: int,
                coordinator: str, devices_per_process: int | None,
                addresses: Sequence[str] = ()) -> dict[str, str]:
    """Returns the environment of one process of the job."""
    env = {k: v for k, v in base.items() if not k.lower().endswith("_proxy")}
    env.update(TPS_COORDINATOR_ADDRESS=coordinator, TPS_NUM_PROCESSES=str(num_processes),
               TPS_PROCESS_ID=str(process_id), PYTHONUNBUFFERED="1",
               TPS_LAUNCHER_PID=str(os.getpid()))
    if addresses:
        env["TPS_PROCESS_ADDRESSES"] = ",".join(addresses)
    if devices_per_process is not None:
        flags = re.sub(rf"{_DEVICE_FLAG}=\S*", "", env.get("XLA_FLAGS", "")).split()
        env["XLA_FLAGS"] = " ".join([*flags, f"{_DEVICE_FLAG}={devices_per_process}"])
        env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def describe_exit(returncode: int) -> str:
    """Returns ``"exited with code 3"`` or ``"was killed by SIGABRT"``."""
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def _die_with_parent(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get SIGKILL when the launcher dies (Linux)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os._exit(1)

    return preexec


def _state(pid: int) -> str:
    """The process state letter from ``/proc`` (``"T"``: stopped; ``""``: unknown)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return ""


class Job:
    """N supervised processes; ``run()`` returns the launcher's exit code.

    Args:
      command: the program and its arguments (run once per process).
      num_processes: N.
      devices_per_process: fake CPU devices per process (None: leave XLA_FLAGS).
      timeout: seconds the whole job may run (None: no limit).
      grace: seconds between SIGTERM and SIGKILL when stopping processes.
      fault_grace: seconds the other processes get to end on their own after
        the first failure, before they are stopped.
      port: the coordinator's port on 127.0.0.1 (None: a free one).
      out: where prefixed stdout lines go; err: where stderr lines and reports go.
    """

    def __init__(self, command: Sequence[str], num_processes: int, *,
                 devices_per_process: int | None = None, timeout: float | None = None,
                 grace: float = 3.0, fault_grace: float = 10.0, port: int | None = None,
                 out: IO[str] | None = None, err: IO[str] | None = None):
        self.command = list(command)
        self.num_processes = num_processes
        self.devices_per_process = devices_per_process
        self.timeout = timeout
        self.grace = grace
        self.fault_grace = fault_grace
        self.port = port
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._lock = threading.Lock()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._threads: list[threading.Thread] = []
        self._tails: list[collections.deque[str]] = []
        self._markers: list[dict[str, Any] | None] = []
        self._exited: dict[int, tuple[float, int]] = {}
        self._stopped_by_us: set[int] = set()
        self._seen_stopped: set[int] = set()
        self._start_time = time.monotonic()

    def _relay(self, i: int, stream: IO[bytes], prefix: str, sink: IO[str],
               is_err: bool) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            with self._lock:
                sink.write(f"{prefix} {line}\n")
                sink.flush()
                if is_err:
                    self._tails[i].append(line)
                    record = faults.parse_marker(line)
                    if record is not None:
                        self._markers[i] = record
        stream.close()

    def _report(self, message: str) -> None:
        with self._lock:
            self.err.write(f"tpustrategy.launch: {message}\n")
            self.err.flush()

    def _start(self) -> None:
        ports = [self.port or free_port()]
        while len(ports) < self.num_processes:
            port = free_port()
            if port not in ports:
                ports.append(port)
        addresses = [f"127.0.0.1:{p}" for p in ports]
        preexec = _die_with_parent(os.getpid())
        # Every process starts before any relay thread, so preexec_fn runs in a
        # single-threaded parent.
        for i in range(self.num_processes):
            env = process_env(dict(os.environ), process_id=i, num_processes=self.num_processes,
                              coordinator=addresses[0], addresses=addresses,
                              devices_per_process=self.devices_per_process)
            self._procs.append(subprocess.Popen(
                self.command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, start_new_session=True, preexec_fn=preexec))
            self._tails.append(collections.deque(maxlen=40))
            self._markers.append(None)
        for i, proc in enumerate(self._procs):
            for stream, sink, is_err in ((proc.stdout, self.out, False),
                                         (proc.stderr, self.err, True)):
                thread = threading.Thread(target=self._relay,
                                          args=(i, stream, f"[p{i}]", sink, is_err),
                                          daemon=True)
                thread.start()
                self._threads.append(thread)

    def _signal(self, proc: subprocess.Popen[bytes], sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)  # the process group this launcher created for it
        except (ProcessLookupError, PermissionError):
            pass

    def _poll(self) -> list[int | None]:
        codes = [p.poll() for p in self._procs]
        now = time.monotonic() - self._start_time
        for i, code in enumerate(codes):
            if code is not None and i not in self._exited:
                self._exited[i] = (now, code)
            elif code is None and _state(self._procs[i].pid) in ("T", "t"):
                self._seen_stopped.add(i)
        return codes

    def stop(self) -> list[int]:
        """Stops every process still running; returns their ids."""
        running = [i for i, p in enumerate(self._procs) if p.poll() is None]
        self._stopped_by_us.update(running)
        for i in running:
            stopped = _state(self._procs[i].pid) in ("T", "t")
            # A stopped process acts on SIGTERM only once continued: kill it outright.
            self._signal(self._procs[i], signal.SIGKILL if stopped else signal.SIGTERM)
        deadline = time.monotonic() + self.grace
        for i in running:
            try:
                self._procs[i].wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self._procs:
            # Kill the whole group even if the leader is gone: its children may remain.
            self._signal(proc, signal.SIGKILL)
            if proc.poll() is None:
                proc.wait()
        return running

    def run(self) -> int:
        """Runs the job; returns 0, the first failing process's code, or 124 on timeout."""
        self._start_time = time.monotonic()
        try:
            self._start()
            while True:
                codes = self._poll()
                if any(c not in (None, 0) for c in codes):
                    return self._after_failure()
                if all(c == 0 for c in codes):
                    return 0
                if self.timeout is not None and time.monotonic() - self._start_time > self.timeout:
                    running = self.stop()
                    self._report(f"timed out after {self.timeout:g} s; process(es) "
                                 f"{_ids(running)} were still running and were killed.")
                    return EXIT_TIMEOUT
                time.sleep(0.05)
        finally:
            self.stop()
            for thread in self._threads:
                thread.join(timeout=5)

    def _after_failure(self) -> int:
        """Lets the others end on their own (they name the fault), stops the rest, reports."""
        deadline = time.monotonic() + self.fault_grace
        while time.monotonic() < deadline:
            codes = self._poll()
            running = [i for i, c in enumerate(codes) if c is None
                       and _state(self._procs[i].pid) not in ("T", "t")]
            if not running:
                break
            time.sleep(0.05)
        stopped = self.stop()
        self._poll()
        for thread in self._threads:
            thread.join(timeout=2)  # the last lines (fault markers) are in
        return self._explain(stopped)

    def _explain(self, stopped: list[int]) -> int:
        failed = sorted((t, i, c) for i, (t, c) in self._exited.items()
                        if c != 0 and i not in self._stopped_by_us)
        primary = [f for f in failed if f[2] not in _SECONDARY]
        culprit = self._named_culprit(failed)
        if primary:
            t, root, code = primary[0]
            what = f"process {root} {describe_exit(code)} after {t:.1f} s{self._why(root)}"
            exit_code = code if code > 0 else 128 - code
        elif culprit is not None and culprit not in [i for _, i, _ in failed]:
            root, exit_code = culprit, failed[0][2]
            state = ("; it was stopped by a signal (state T)" if culprit in self._seen_stopped
                     else "")
            kind = (self._markers[failed[0][1]] or {}).get("kind", "")
            what = (f"process {root} {_KIND_WORDS.get(kind, 'failed')}{state}; process "
                    f"{failed[0][1]} named it after {failed[0][0]:.1f} s")
        else:
            t, root, code = failed[0]
            what = f"process {root} {describe_exit(code)} after {t:.1f} s{self._why(root)}"
            exit_code = code if code > 0 else 128 - code
        others = [f"process {i} {describe_exit(c)}" for _, i, c in failed if i != root]
        then = f"; then {', '.join(others)}" if others else ""
        killed = f"; stopped process(es) {_ids(stopped)}" if stopped else ""
        self._report(f"{what}, the first to fail{then}{killed}.")
        return exit_code

    def _named_culprit(self, failed: list[tuple[float, int, int]]) -> int | None:
        for _, i, code in failed:
            record = self._markers[i]
            if code in _SECONDARY and record and record.get("culprits"):
                return int(record["culprits"][0])
        return None

    def _why(self, i: int) -> str:
        record = self._markers[i]
        if record and record.get("error"):
            return f" ({record['error']})"
        for line in reversed(self._tails[i]):
            match = _EXCEPTION_LINE.match(line.strip())
            if match:
                return f" ({match.group(1)[:200]})"
        return ""


_KIND_WORDS = {faults.STUCK: "stopped answering its peers (stuck)",
               faults.LOST: "was lost", faults.MISSING: "never joined the job",
               faults.LEFT: "left the job early", faults.ERROR: "failed"}


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(str(i) for i in ids)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m tpustrategy.launch``."""
    p = argparse.ArgumentParser(
        prog="python -m tpustrategy.launch",
        description="Run N processes of a tpustrategy job on this machine (127.0.0.1).")
    p.add_argument("-n", "--num-processes", type=_positive_int, required=True,
                   help="number of processes")
    p.add_argument("--devices-per-process", type=_positive_int, default=None,
                   help="fake CPU devices per process (sets XLA_FLAGS and JAX_PLATFORMS=cpu)")
    p.add_argument("--timeout", type=_positive_float, default=None,
                   help="seconds the whole job may run before every process is killed")
    p.add_argument("--port", type=_positive_int, default=None,
                   help="coordinator port on 127.0.0.1 (default: a free one)")
    p.add_argument("--grace", type=float, default=3.0,
                   help="seconds between SIGTERM and SIGKILL when stopping processes")
    p.add_argument("--fault-grace", type=float, default=10.0,
                   help="seconds the other processes get to end on their own (with a named "
                        "error) after the first one fails, before they are stopped")
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the script")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m tpustrategy.launch``; returns the exit code."""
    args = parser().parse_args(argv)
    command = [sys.executable, args.script, *args.args]
    job = Job(command, args.num_processes, devices_per_process=args.devices_per_process,
              timeout=args.timeout, grace=args.grace, fault_grace=args.fault_grace,
              port=args.port)

    def on_signal(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_signal)
    try:
        return job.run()
    except KeyboardInterrupt:
        job.stop()
        job._report("interrupted; stopped every process.")
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
