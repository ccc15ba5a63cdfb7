"""Runs a job under ``python -m tpustrategy.launch`` and never leaves a process behind."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import signal
import subprocess
import sys

HERE = pathlib.Path(__file__).parent
REPO = HERE.parent.parent


@dataclasses.dataclass
class JobResult:
    returncode: int
    stdout: str
    stderr: str

    def results(self) -> dict[int, dict]:
        """The ``RESULT <json>`` line of each process, by process id."""
        found = {}
        for line in self.stdout.splitlines():
            prefix, _, rest = line.partition(" ")
            if rest.startswith("RESULT "):
                found[int(prefix.strip("[p]"))] = json.loads(rest[len("RESULT "):])
        return found


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.lower().endswith("_proxy") and not k.startswith(("TPS_", "TF_CONFIG"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("XLA_FLAGS", None)  # the launcher sets the device count
    return env


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the launcher then stops its processes), then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_job(script: str, *args: str, n: int = 2, devices: int = 4, timeout: float = 60,
            extra: tuple[str, ...] = ()) -> JobResult:
    """Runs ``script`` on ``n`` processes; the launcher's own timeout is ``timeout``."""
    cmd = [sys.executable, "-m", "tpustrategy.launch", "-n", str(n), "--devices-per-process",
           str(devices), "--timeout", str(timeout), "--grace", "1", *extra,
           str(HERE / script), *args]
    proc = subprocess.Popen(cmd, cwd=REPO, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout + 20)
    finally:
        stop(proc)
    return JobResult(proc.returncode, out, err)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        status = pathlib.Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status
