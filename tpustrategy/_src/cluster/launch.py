"""The local launcher: run a job of N processes on 127.0.0.1 and supervise it.

``python -m tpustrategy.launch -n 2 --devices-per-process 4 script.py [args]``
starts ``script.py`` N times with ``TPS_COORDINATOR_ADDRESS`` (a free loopback
port), ``TPS_NUM_PROCESSES`` and ``TPS_PROCESS_ID`` set, so ``tps.initialize()``
needs no arguments, and with ``--devices-per-process`` fake CPU devices each.
Every output line is prefixed with ``[p<i>]``. When a process fails, or the
timeout passes, the others are stopped (SIGTERM, then SIGKILL) and the launcher
exits non-zero, saying which process failed and how. No process outlives it.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO

_DEVICE_FLAG = "--xla_force_host_platform_device_count"
EXIT_TIMEOUT = 124


def free_port(host: str = "127.0.0.1") -> int:
    """Returns a TCP port on ``host`` that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def process_env(base: dict[str, str], *, process_id: int, num_processes: int,
                coordinator: str, devices_per_process: int | None) -> dict[str, str]:
    """Returns the environment of one process of the job."""
    env = {k: v for k, v in base.items() if not k.lower().endswith("_proxy")}
    env.update(TPS_COORDINATOR_ADDRESS=coordinator, TPS_NUM_PROCESSES=str(num_processes),
               TPS_PROCESS_ID=str(process_id), PYTHONUNBUFFERED="1")
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


class Job:
    """N supervised processes; ``run()`` returns the launcher's exit code.

    Args:
      command: the program and its arguments (run once per process).
      num_processes: N.
      devices_per_process: fake CPU devices per process (None: leave XLA_FLAGS).
      timeout: seconds the whole job may run (None: no limit).
      grace: seconds between SIGTERM and SIGKILL when stopping processes.
      out: where prefixed stdout lines go; err: where stderr lines and reports go.
    """

    def __init__(self, command: Sequence[str], num_processes: int, *,
                 devices_per_process: int | None = None, timeout: float | None = None,
                 grace: float = 3.0, port: int | None = None,
                 out: IO[str] | None = None, err: IO[str] | None = None):
        self.command = list(command)
        self.num_processes = num_processes
        self.devices_per_process = devices_per_process
        self.timeout = timeout
        self.grace = grace
        self.port = port
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self._lock = threading.Lock()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._threads: list[threading.Thread] = []

    def _relay(self, stream: IO[bytes], prefix: str, sink: IO[str]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip("\n")
            with self._lock:
                sink.write(f"{prefix} {line}\n")
                sink.flush()
        stream.close()

    def _report(self, message: str) -> None:
        with self._lock:
            self.err.write(f"tpustrategy.launch: {message}\n")
            self.err.flush()

    def _start(self) -> None:
        coordinator = f"127.0.0.1:{self.port or free_port()}"
        for i in range(self.num_processes):
            env = process_env(dict(os.environ), process_id=i, num_processes=self.num_processes,
                              coordinator=coordinator,
                              devices_per_process=self.devices_per_process)
            proc = subprocess.Popen(self.command, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
            self._procs.append(proc)
            for stream, sink in ((proc.stdout, self.out), (proc.stderr, self.err)):
                thread = threading.Thread(target=self._relay, args=(stream, f"[p{i}]", sink),
                                          daemon=True)
                thread.start()
                self._threads.append(thread)

    def _signal(self, proc: subprocess.Popen[bytes], sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)  # the process group this launcher created for it
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self) -> list[int]:
        """Stops every process still running; returns their ids."""
        running = [i for i, p in enumerate(self._procs) if p.poll() is None]
        for i in running:
            self._signal(self._procs[i], signal.SIGTERM)
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
        """Runs the job; returns 0, the failing process's code, or 124 on timeout."""
        start = time.monotonic()
        try:
            self._start()
            while True:
                codes = [p.poll() for p in self._procs]
                failed = [i for i, c in enumerate(codes) if c not in (None, 0)]
                if failed:
                    first = failed[0]
                    code = codes[first]
                    assert code is not None
                    elapsed = time.monotonic() - start
                    others = self.stop()
                    killed = f"; stopped process(es) {_ids(others)}" if others else ""
                    self._report(f"process {first} {describe_exit(code)} after {elapsed:.1f} s"
                                 f"{killed}.")
                    return code if code > 0 else 128 - code
                if all(c == 0 for c in codes):
                    return 0
                if self.timeout is not None and time.monotonic() - start > self.timeout:
                    running = self.stop()
                    self._report(f"timed out after {self.timeout:g} s; process(es) "
                                 f"{_ids(running)} were still running and were killed.")
                    return EXIT_TIMEOUT
                time.sleep(0.05)
        finally:
            self.stop()
            for thread in self._threads:
                thread.join(timeout=5)


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
    p.add_argument("script", help="the Python script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the script")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m tpustrategy.launch``; returns the exit code."""
    args = parser().parse_args(argv)
    command = [sys.executable, args.script, *args.args]
    job = Job(command, args.num_processes, devices_per_process=args.devices_per_process,
              timeout=args.timeout, grace=args.grace, port=args.port)

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
