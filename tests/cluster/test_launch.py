"""python -m tpustrategy.launch, with plain-Python scripts (no JAX, so each run is fast)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tpustrategy._src.cluster.faults import Fault
from tpustrategy._src.cluster.launch import describe_exit, process_env

pytestmark = pytest.mark.timeout(60)


def alive(pid: int) -> bool:
    try:
        state = pathlib.Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


def launch(tmp_path, body: str, *args: str, timeout: float = 30):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    cmd = [sys.executable, "-m", "tpustrategy.launch", *args, str(script), str(tmp_path)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "https_proxy": "http://proxy:1"})


def pids(tmp_path) -> list[int]:
    return [int(p.read_text()) for p in sorted(tmp_path.glob("*.pid"))]


def test_every_process_gets_its_id_devices_and_a_prefix(tmp_path):
    out = launch(tmp_path, """
        import os
        print(os.environ["TPS_PROCESS_ID"], os.environ["TPS_NUM_PROCESSES"],
              os.environ["TPS_COORDINATOR_ADDRESS"].split(":")[0], os.environ["XLA_FLAGS"],
              os.environ["JAX_PLATFORMS"], "https_proxy" in os.environ)
    """, "-n", "3", "--devices-per-process", "4")
    assert out.returncode == 0, out.stderr
    lines = sorted(out.stdout.splitlines())
    assert lines == [f"[p{i}] {i} 3 127.0.0.1 --xla_force_host_platform_device_count=4 cpu False"
                     for i in range(3)]


def test_stderr_lines_are_prefixed_too(tmp_path):
    out = launch(tmp_path, "import sys; sys.stderr.write('oops\\n')", "-n", "2")
    assert out.returncode == 0
    assert sorted(line for line in out.stderr.splitlines() if "oops" in line) == [
        "[p0] oops", "[p1] oops"]


def test_a_failing_process_stops_the_others_and_is_named(tmp_path):
    start = time.monotonic()
    out = launch(tmp_path, """
        import os, sys, time, pathlib
        pid = int(os.environ["TPS_PROCESS_ID"])
        pathlib.Path(sys.argv[1], f"p{pid}.pid").write_text(str(os.getpid()))
        if pid == 1:
            time.sleep(0.3)
            sys.exit(3)
        time.sleep(600)
    """, "-n", "2", "--grace", "0.5", "--fault-grace", "0.5")
    assert time.monotonic() - start < 20
    assert out.returncode == 3
    assert "tpustrategy.launch: process 1 exited with code 3 after" in out.stderr
    assert "the first to fail; stopped process(es) 0." in out.stderr
    assert not any(alive(p) for p in pids(tmp_path))


def test_a_process_killed_by_a_signal_is_reported_by_signal_name(tmp_path):
    out = launch(tmp_path, """
        import os, signal, time
        if os.environ["TPS_PROCESS_ID"] == "0":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(600)
    """, "-n", "2", "--grace", "0.5")
    assert out.returncode == 128 + signal.SIGKILL
    assert "process 0 was killed by SIGKILL" in out.stderr


def test_the_timeout_kills_every_process_and_their_children(tmp_path):
    out = launch(tmp_path, """
        import os, subprocess, sys, time, pathlib
        pid = os.environ["TPS_PROCESS_ID"]
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pathlib.Path(sys.argv[1], f"c{pid}.pid").write_text(str(child.pid))
        pathlib.Path(sys.argv[1], f"p{pid}.pid").write_text(str(os.getpid()))
        time.sleep(600)
    """, "-n", "2", "--timeout", "2", "--grace", "0.5")
    assert out.returncode == 124
    assert "timed out after 2 s; process(es) 0, 1 were still running and were killed" in (
        out.stderr)
    assert len(pids(tmp_path)) == 4
    assert not any(alive(p) for p in pids(tmp_path))


def test_a_terminated_launcher_leaves_no_process_behind(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time, pathlib
        pathlib.Path(sys.argv[1], f"p{os.environ['TPS_PROCESS_ID']}.pid").write_text(
            str(os.getpid()))
        time.sleep(600)
    """))
    proc = subprocess.Popen([sys.executable, "-m", "tpustrategy.launch", "-n", "2", "--grace",
                             "0.5", str(script), str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while len(pids(tmp_path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "interrupted" in err
    assert not any(alive(p) for p in pids(tmp_path))


def test_script_arguments_are_passed_through(tmp_path):
    out = launch(tmp_path, "import sys; print(sys.argv[2:])", "-n", "1")
    # launch() appends tmp_path; the script's own extra arguments follow it.
    assert out.stdout.strip() == "[p0] []"
    script = tmp_path / "script.py"
    out = subprocess.run([sys.executable, "-m", "tpustrategy.launch", "-n", "1", str(script),
                          "x", "--flag", "-n", "7"], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "[p0] ['--flag', '-n', '7']"


def test_a_bad_process_count_is_a_usage_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "tpustrategy.launch", "-n", "0", "x.py"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "must be a positive int" in out.stderr


def test_process_env_replaces_an_existing_device_count_and_drops_proxies():
    env = process_env({"XLA_FLAGS": "--a=1 --xla_force_host_platform_device_count=8",
                       "HTTPS_PROXY": "x", "JAX_PLATFORMS": "cpu,gpu"},
                      process_id=1, num_processes=2, coordinator="127.0.0.1:5",
                      devices_per_process=4)
    assert env["XLA_FLAGS"] == "--a=1 --xla_force_host_platform_device_count=4"
    assert "HTTPS_PROXY" not in env and env["JAX_PLATFORMS"] == "cpu,gpu"
    assert (env["TPS_PROCESS_ID"], env["TPS_NUM_PROCESSES"]) == ("1", "2")


def test_exit_descriptions():
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-6) == "was killed by SIGABRT"


def _marker(kind: str, culprit: int, reporter: int) -> str:
    return Fault(kind=kind, culprits=(culprit,), described=("x",), addresses=(None,),
                 detail="d", reporter=reporter).marker()


def test_the_first_failure_is_blamed_even_when_a_survivor_reports_it_first(tmp_path):
    # Process 0 notices the fault and exits with 75 before process 1's death is observed.
    out = launch(tmp_path, f"""
        import os, signal, sys, time
        if os.environ["TPS_PROCESS_ID"] == "0":
            time.sleep(0.2)
            sys.stderr.write({_marker("lost", 1, 0)!r} + "\\n")
            sys.exit(75)
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)
    """, "-n", "2", "--grace", "0.5", "--fault-grace", "5")
    assert out.returncode == 128 + signal.SIGKILL
    report = [line for line in out.stderr.splitlines() if line.startswith("tpustrategy.launch")]
    assert len(report) == 1
    assert report[0].startswith("tpustrategy.launch: process 1 was killed by SIGKILL after")
    assert "the first to fail; then process 0 exited with code 75." in report[0]


def test_a_stopped_process_named_by_its_peer_is_blamed_and_killed(tmp_path):
    out = launch(tmp_path, f"""
        import os, pathlib, signal, sys, time
        pid = os.environ["TPS_PROCESS_ID"]
        pathlib.Path(sys.argv[1], f"p{{pid}}.pid").write_text(str(os.getpid()))
        if pid == "1":
            os.kill(os.getpid(), signal.SIGSTOP)
        time.sleep(0.5)
        sys.stderr.write({_marker("stuck", 1, 0)!r} + "\\n")
        sys.exit(76)
    """, "-n", "2", "--grace", "0.5", "--fault-grace", "5")
    assert out.returncode == 76
    assert ("tpustrategy.launch: process 1 stopped answering its peers (stuck); it was stopped "
            "by a signal (state T); process 0 named it after") in out.stderr
    assert "stopped process(es) 1." in out.stderr
    assert not any(alive(p) for p in pids(tmp_path))


def test_an_exception_is_the_reason_given_for_a_failed_process(tmp_path):
    out = launch(tmp_path, """
        import os, time
        if os.environ["TPS_PROCESS_ID"] == "1":
            raise ValueError("bad batch")
        time.sleep(600)
    """, "-n", "2", "--grace", "0.5", "--fault-grace", "0.5")
    assert out.returncode == 1
    assert "process 1 exited with code 1 after" in out.stderr
    assert "(ValueError: bad batch), the first to fail" in out.stderr


def test_children_die_with_a_killed_launcher(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time, pathlib
        pathlib.Path(sys.argv[1], f"p{os.environ['TPS_PROCESS_ID']}.pid").write_text(
            str(os.getpid()))
        time.sleep(600)
    """))
    proc = subprocess.Popen([sys.executable, "-m", "tpustrategy.launch", "-n", "2",
                             str(script), str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while len(pids(tmp_path)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.kill()  # SIGKILL: the launcher cannot clean up
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pids(tmp_path)) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        for pid in pids(tmp_path):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert len(pids(tmp_path)) == 2 and not any(alive(p) for p in pids(tmp_path))


def test_every_process_is_given_every_address_and_the_launcher_pid(tmp_path):
    out = launch(tmp_path, """
        import os
        addresses = os.environ["TPS_PROCESS_ADDRESSES"].split(",")
        print(len(addresses), addresses[0] == os.environ["TPS_COORDINATOR_ADDRESS"],
              len(set(addresses)), os.environ["TPS_LAUNCHER_PID"] == str(os.getppid()))
    """, "-n", "3")
    assert sorted(out.stdout.splitlines()) == [f"[p{i}] 3 True 3 True" for i in range(3)]
