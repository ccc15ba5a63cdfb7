"""The fault matrix: kill / stop / raise / exit / never joins, through the launcher and TF_CONFIG.

Most cases run 2 processes x 2 fake CPU devices (``worker_fault_matrix.py``), a
few run 3 or 4 (process 0, the coordinator's host, among the victims); one
process suffers the fault while the others wait in a compiled cross-process
sum (or a host all-gather, or Python code). The survivor must end with a
``tps.errors`` exception naming the victim, the documented exit code (75: lost
or failed, 76: stuck or never joined), no SIGABRT and no fatal C++ log, within
15 s of the fault with tuned timeouts (``heartbeat_timeout=3``). The default
settings' timings are measured by ``tools/fault_matrix.py``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.multiprocess.harness import HERE, REPO, alive, clean_env
from tpustrategy._src.cluster import faults
from tpustrategy._src.cluster.launch import free_port

pytestmark = pytest.mark.timeout(150)
WORKER = str(HERE / "worker_fault_matrix.py")
TUNED = "3"
# Upper bounds on how long after a fault a survivor ends. They catch a hang (a survivor left
# waiting for ever, or until JAX's own heartbeat aborts it), not slowness: CI machines run other
# work, and a loaded machine has taken 21-30 s where an idle one takes 15-19 s for "never".
BOUND_S = 30.0
NEVER_EXTRA_S = 25.0  # a never-joining peer is named at the initialization timeout (14 s)
_FATAL = re.compile(r"(^|\] )F\d{4} |Check failure|was killed by SIGABRT")


@dataclasses.dataclass
class Outcome:
    """What happened to a job after its fault (times in seconds after the fault)."""

    codes: dict[int, int | None]
    ended_after: dict[int, float]
    stderr: dict[int, str]
    pids: dict[int, int]

    def marker(self, process: int) -> dict | None:
        found = [faults.parse_marker(line) for line in self.stderr[process].splitlines()]
        found = [record for record in found if record is not None]
        return found[-1] if found else None


def _pids(directory: pathlib.Path) -> dict[int, int]:
    return {int(p.stem[1:]): int(p.read_text()) for p in directory.glob("p*.pid")}


def _fault_time(directory: pathlib.Path, default: float) -> float:
    path = directory / "fault"
    return float(path.read_text()) if path.exists() else default


def _kill_groups(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def run_tf_config_job(tmp: pathlib.Path, fault: str, victim: int, heartbeat: str = TUNED,
                      where: str = "compiled", n: int = 2, limit: float = 80) -> Outcome:
    """Starts ``n`` plain processes with ``TF_CONFIG`` and waits until the survivors end."""
    ports = [free_port() for _ in range(n)]
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs, logs = [], []
    started = time.time()
    for i in range(n):
        env = clean_env()
        env.update(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker",
                                                                      "index": i}}),
                   JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2",
                   PYTHONUNBUFFERED="1")
        log = open(tmp / f"stderr{i}.txt", "w+")
        logs.append(log)
        procs.append(subprocess.Popen(
            [sys.executable, WORKER, fault, str(victim), str(tmp), heartbeat, where], cwd=REPO,
            env=env, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True))
    ended: dict[int, float] = {}
    survivors = [i for i in range(n) if i != victim or fault == "none"]
    # A victim that raises ends on its own, but may finish its own exit after a survivor (a loaded
    # machine): its exit code is waited for too, not read at the moment the survivors ended.
    awaited = survivors + ([victim] if fault == "raise" else [])
    try:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            for i, proc in enumerate(procs):
                if i not in ended and proc.poll() is not None:
                    ended[i] = time.time()
            if all(i in ended for i in awaited):
                break
            time.sleep(0.05)
        codes = {i: proc.poll() for i, proc in enumerate(procs)}
    finally:
        _kill_groups(procs)
    at = _fault_time(tmp, started)
    stderr = {}
    for i, log in enumerate(logs):
        log.seek(0)
        stderr[i] = log.read()
        log.close()
    return Outcome(codes, {i: t - at for i, t in ended.items()}, stderr, _pids(tmp))


def run_launcher_job(tmp: pathlib.Path, fault: str, victim: int, heartbeat: str = TUNED,
                     where: str = "compiled", limit: float = 80,
                     n: int = 2) -> tuple[int, str, float]:
    """Runs the job under ``python -m tpustrategy.launch``: (code, stderr, seconds after fault)."""
    cmd = [sys.executable, "-m", "tpustrategy.launch", "-n", str(n), "--devices-per-process", "2",
           "--timeout", str(limit), "--grace", "1", "--fault-grace", "3", WORKER, fault,
           str(victim), str(tmp), heartbeat, where]
    started = time.time()
    proc = subprocess.Popen(cmd, cwd=REPO, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=limit + 20)
    finally:
        _kill_groups([proc])
    return proc.returncode, err, time.time() - _fault_time(tmp, started)


def _assert_clean(text: str) -> None:
    assert not _FATAL.search(text), text[-3000:]


def _assert_no_process_left(tmp: pathlib.Path) -> None:
    time.sleep(0.2)
    assert not [p for p in _pids(tmp).values() if alive(p)]


# -- through the launcher ----------------------------------------------------------------

LAUNCHER_CASES = [
    # fault, victim, launcher exit code, what the launcher says first, survivor's exit code
    ("kill", 1, 128 + signal.SIGKILL, "process 1 was killed by SIGKILL", 75),
    ("kill", 0, 128 + signal.SIGKILL, "process 0 was killed by SIGKILL", 75),
    ("stop", 1, 76, "process 1 stopped answering its peers (stuck); it was stopped", 76),
    ("raise", 1, 1, "process 1 exited with code 1 after", 75),
    ("exit", 1, 3, "process 1 exited with code 3 after", 75),
    ("sysexit", 1, 3, "process 1 exited with code 3 after", 75),
    ("never", 1, 76, "process 1 never joined the job", 76),
]


def check_launcher_outcome(returncode: int, err: str, seconds: float, fault: str, victim: int,
                           code: int, first: str, survivor_code: int, n: int = 2) -> None:
    """Every survivor names the victim with its code; the launcher blames the victim first."""
    assert returncode == code, err[-3000:]
    report = [line for line in err.splitlines() if line.startswith("tpustrategy.launch:")]
    assert len(report) == 1 and first in report[0], report
    for survivor in (i for i in range(n) if i != victim):
        found = report[0].find(f"process {survivor} ")
        assert report[0].index(f"process {victim} ") < found, report
        assert f"process {survivor} exited with code {survivor_code}" in report[0], report
        markers = [faults.parse_marker(line[len(f"[p{survivor}] "):]) for line in err.splitlines()
                   if line.startswith(f"[p{survivor}] {faults.MARKER}")]
        assert markers and markers[-1]["culprits"] == [victim], err[-3000:]
        assert markers[-1]["exit_code"] == survivor_code
        error = "UnavailableError" if survivor_code == 75 else "DeadlineExceededError"
        assert (f"[p{survivor}] tpustrategy._src.errors.{error}: process {victim} of {n} "
                "(127.0.0.1:") in err, err[-3000:]
    if fault == "raise":
        assert f"(ValueError: boom in process {victim})" in report[0]
        assert f"its own code raised ValueError: boom in process {victim}" in err
    _assert_clean(err)
    assert seconds < BOUND_S + (NEVER_EXTRA_S if fault == "never" else 0), report


@pytest.mark.parametrize("fault,victim,code,first,survivor_code", LAUNCHER_CASES,
                         ids=[f"{c[0]}-p{c[1]}" for c in LAUNCHER_CASES])
def test_through_the_launcher_the_survivor_names_the_victim_and_the_launcher_blames_it(
        tmp_path, fault, victim, code, first, survivor_code):
    returncode, err, seconds = run_launcher_job(tmp_path, fault, victim)
    check_launcher_outcome(returncode, err, seconds, fault, victim, code, first, survivor_code)
    _assert_no_process_left(tmp_path)


def launcher_expectation(fault: str, victim: int) -> tuple[int, str, int]:
    """(launcher exit code, what it says first, survivors' exit code) for any job size."""
    return {
        "kill": (128 + signal.SIGKILL, f"process {victim} was killed by SIGKILL", 75),
        "stop": (76, f"process {victim} stopped answering its peers (stuck); it was stopped", 76),
        "raise": (1, f"process {victim} exited with code 1 after", 75),
        "exit": (3, f"process {victim} exited with code 3 after", 75),
        "never": (76, f"process {victim} never joined the job", 76),
    }[fault]


# A few cases of 3 and 4 processes, process 0 (the coordinator's host) among the victims;
# tools/fault_matrix.py --processes 3,4 measures every fault of every process.
BIG_LAUNCHER_CASES = [("kill", 0, 3), ("stop", 0, 3), ("never", 1, 3), ("raise", 3, 4)]


@pytest.mark.parametrize("fault,victim,n", BIG_LAUNCHER_CASES,
                         ids=[f"{c[0]}-p{c[1]}-of-{c[2]}" for c in BIG_LAUNCHER_CASES])
def test_with_three_or_four_processes_every_survivor_names_the_victim(tmp_path, fault, victim, n):
    returncode, err, seconds = run_launcher_job(tmp_path, fault, victim, n=n, limit=100)
    code, first, survivor_code = launcher_expectation(fault, victim)
    check_launcher_outcome(returncode, err, seconds, fault, victim, code, first, survivor_code, n=n)
    _assert_no_process_left(tmp_path)


# -- plain processes with TF_CONFIG ------------------------------------------------------

TF_CONFIG_CASES = [
    ("kill", 1, "compiled", 75), ("kill", 0, "allgather", 75), ("stop", 1, "compiled", 76),
    ("stop", 1, "sleep", 76), ("raise", 0, "compiled", 75),
]


@pytest.mark.parametrize("fault,victim,where,code", TF_CONFIG_CASES,
                         ids=[f"{c[0]}-p{c[1]}-{c[2]}" for c in TF_CONFIG_CASES])
def test_with_tf_config_the_survivor_ends_with_a_named_error_and_its_code(
        tmp_path, fault, victim, where, code):
    outcome = run_tf_config_job(tmp_path, fault, victim, where=where)
    survivor = 1 - victim
    text = outcome.stderr[survivor]
    assert outcome.codes[survivor] == code, text[-3000:]
    marker = outcome.marker(survivor)
    assert marker is not None and marker["culprits"] == [victim], text[-3000:]
    assert f"process {victim} of 2 (worker:{victim}, 127.0.0.1:" in text
    _assert_clean(text)
    limit = BOUND_S + (NEVER_EXTRA_S if fault == "never" else 0)
    assert outcome.ended_after[survivor] < limit, outcome.ended_after
    if fault == "raise":
        assert outcome.codes[victim] == 1
        assert "ValueError: boom in process 0" in outcome.stderr[victim]
        _assert_clean(outcome.stderr[victim])
    _assert_no_process_left(tmp_path)


def test_a_never_joining_peer_ends_initialize_within_the_initialization_timeout(tmp_path):
    outcome = run_tf_config_job(tmp_path, "never", 1)
    # worker_fault_matrix.py sets initialization_timeout = 3 * heartbeat + 5 = 14 s.
    text = outcome.stderr[0]
    assert "tps.initialize()" in text or "tps.initialize(**settings)" in text
    assert "did not join the job within initialization_timeout=14 s" in text
    assert 13 < outcome.ended_after[0] < 14 + NEVER_EXTRA_S, outcome.ended_after


def test_with_default_settings_a_killed_peer_is_named_at_once(tmp_path):
    outcome = run_tf_config_job(tmp_path, "kill", 1, heartbeat="default")
    assert outcome.codes[0] == faults.EXIT_UNAVAILABLE, outcome.stderr[0][-3000:]
    assert outcome.marker(0)["culprits"] == [1]
    _assert_clean(outcome.stderr[0])
    assert outcome.ended_after[0] < BOUND_S


def test_three_processes_all_name_the_one_that_failed_first(tmp_path):
    outcome = run_tf_config_job(tmp_path, "kill", 2, n=3)
    for survivor in (0, 1):
        assert outcome.codes[survivor] == faults.EXIT_UNAVAILABLE
        assert outcome.marker(survivor)["culprits"] == [2], outcome.stderr[survivor][-2000:]
        _assert_clean(outcome.stderr[survivor])


def check_tf_config_outcome(outcome: Outcome, fault: str, victim: int, n: int) -> None:
    """Every survivor ends with its code, names the victim by task name, without SIGABRT, in time."""
    code = 76 if fault in ("stop", "never") else 75
    for survivor in (i for i in range(n) if i != victim):
        text = outcome.stderr[survivor]
        assert outcome.codes[survivor] == code, text[-3000:]
        marker = outcome.marker(survivor)
        assert marker is not None and marker["culprits"] == [victim], text[-3000:]
        assert f"process {victim} of {n} (worker:{victim}, 127.0.0.1:" in text, text[-3000:]
        _assert_clean(text)
        limit = BOUND_S + (NEVER_EXTRA_S if fault == "never" else 0)
        assert outcome.ended_after[survivor] < limit, outcome.ended_after


BIG_TF_CONFIG_CASES = [("kill", 0, 3), ("never", 0, 3), ("stop", 2, 4)]


@pytest.mark.parametrize("fault,victim,n", BIG_TF_CONFIG_CASES,
                         ids=[f"{c[0]}-p{c[1]}-of-{c[2]}" for c in BIG_TF_CONFIG_CASES])
def test_with_tf_config_and_three_or_four_processes_every_survivor_names_the_victim(
        tmp_path, fault, victim, n):
    outcome = run_tf_config_job(tmp_path, fault, victim, n=n, limit=100)
    check_tf_config_outcome(outcome, fault, victim, n)
    _assert_no_process_left(tmp_path)


def test_a_program_that_catches_the_fault_keeps_its_own_exit_code(tmp_path):
    outcome = run_tf_config_job(tmp_path, "catch", 1)
    assert outcome.codes[0] == 42, outcome.stderr[0][-3000:]
    assert "caught UnavailableError" in outcome.stderr[0]
    assert outcome.marker(0)["culprits"] == [1] and outcome.marker(0)["exit_code"] == 42
    _assert_clean(outcome.stderr[0])


def test_multi_worker_mirrored_strategy_joins_the_tf_config_job_by_itself(tmp_path):
    outcome = run_tf_config_job(tmp_path, "none", 0, heartbeat="strategy")
    assert outcome.codes == {0: 0, 1: 0}, {i: t[-2000:] for i, t in outcome.stderr.items()}
    for i in (0, 1):
        assert json.loads((tmp_path / f"joined{i}").read_text()) == [2, 4]


def test_a_job_without_faults_ends_cleanly_with_code_zero(tmp_path):
    outcome = run_tf_config_job(tmp_path, "none", 0)
    assert outcome.codes == {0: 0, 1: 0}, {i: t[-2000:] for i, t in outcome.stderr.items()}
    for text in outcome.stderr.values():
        assert faults.MARKER not in text
        _assert_clean(text)
