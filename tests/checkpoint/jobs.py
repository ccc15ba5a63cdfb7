"""Runs the test workers in fresh processes, with a timeout, leaving none behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.multiprocess.harness import REPO, clean_env, run_job

HERE = os.path.dirname(os.path.abspath(__file__))


def results_of(stdout: str) -> list[dict]:
    return [json.loads(line[len("RESULT "):]) for line in stdout.splitlines() if line.startswith("RESULT ")]


def run_process(script: str, *args: str, devices: int = 8, timeout: float = 240) -> dict:
    """Runs ``script`` in one new process with ``devices`` fake CPU devices; returns its RESULT."""
    env = clean_env()
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, script), *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-4000:]
    found = results_of(out)
    assert len(found) == 1, out[-2000:] + err[-2000:]
    return found[0]


def run_launched(script: str, *args: str, n: int = 2, devices: int = 4, timeout: float = 180) -> dict[int, dict]:
    """Runs ``script`` on ``n`` processes through the launcher; returns RESULT by process."""
    job = run_job(os.path.join(HERE, script), *args, n=n, devices=devices, timeout=timeout)
    assert job.returncode == 0, job.stderr[-4000:]
    results = job.results()
    assert sorted(results) == list(range(n)), job.stdout[-3000:] + job.stderr[-3000:]
    return results


def launch_and_signal(script: str, *args: str, pid_line: str, trigger: str, sig: int,
                      n: int = 2, devices: int = 4, timeout: float = 180) -> tuple[int, str, str]:
    """Runs a launched job and sends ``sig`` to one of its processes mid-run.

    The process whose output has a line starting with ``pid_line`` (e.g.
    ``"[p1] PID "``, followed by its pid) gets ``sig`` when a line starting
    with ``trigger`` appears. Returns the launcher's exit code, stdout and stderr.
    """
    cmd = [sys.executable, "-m", "tpustrategy.launch", "-n", str(n), "--devices-per-process",
           str(devices), "--timeout", str(timeout), "--grace", "1", os.path.join(HERE, script), *args]
    return signal_mid_run(cmd, clean_env(), pid_line=pid_line, trigger=trigger, sig=sig, timeout=timeout)


def process_and_signal(script: str, *args: str, trigger: str, sig: int, devices: int = 8,
                       timeout: float = 180) -> tuple[int, str, str]:
    """Runs ``script`` in one process (printing ``PID <pid>``) and signals it at ``trigger``."""
    env = clean_env()
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    env["JAX_PLATFORMS"] = "cpu"
    cmd = [sys.executable, os.path.join(HERE, script), *args]
    return signal_mid_run(cmd, env, pid_line="PID ", trigger=trigger, sig=sig, timeout=timeout)


def signal_mid_run(cmd: list[str], env: dict[str, str], *, pid_line: str, trigger: str, sig: int,
                   timeout: float) -> tuple[int, str, str]:
    import signal as signal_lib
    import tempfile
    import threading

    from tests.multiprocess.harness import stop

    with tempfile.TemporaryFile("w+") as err_file:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=err_file, text=True)
        killer = threading.Timer(timeout + 20, lambda: proc.send_signal(signal_lib.SIGKILL))
        killer.start()
        lines, pid, sent = [], None, False
        try:
            for line in proc.stdout:
                lines.append(line)
                if line.startswith(pid_line):
                    pid = int(line[len(pid_line):].split()[0])
                if not sent and pid is not None and line.startswith(trigger):
                    os.kill(pid, sig)
                    sent = True
            proc.wait()
        finally:
            killer.cancel()
            stop(proc)
        err_file.seek(0)
        return proc.returncode, "".join(lines), err_file.read()


def by_process(stdout: str) -> dict[int, dict]:
    """The ``RESULT`` line of each process of a launched job."""
    found = {}
    for line in stdout.splitlines():
        prefix, _, rest = line.partition(" ")
        if rest.startswith("RESULT "):
            found[int(prefix.strip("[p]"))] = json.loads(rest[len("RESULT "):])
    return found
