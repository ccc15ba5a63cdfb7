"""A peer that dies, hangs or never joins ends the job with a clear error in bounded time."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.multiprocess.harness import HERE, REPO, alive, clean_env, run_job, stop
from tpustrategy._src.cluster.launch import free_port

pytestmark = pytest.mark.timeout(120)


def _pids(directory):
    return {int(p.stem[1:]): int(p.read_text()) for p in directory.glob("p*.pid")}


def test_a_peer_that_dies_is_named_and_the_survivor_ends_with_a_named_error(tmp_path):
    start = time.monotonic()
    job = run_job("worker_fail.py", "die", str(tmp_path), timeout=60)
    assert time.monotonic() - start < 45
    assert job.returncode == 3, job.stderr[-3000:]
    assert "tpustrategy.launch: process 1 exited with code 3" in job.stderr
    assert "the first to fail; then process 0 exited with code 75" in job.stderr
    assert "[p0] tpustrategy._src.errors.UnavailableError: process 1 of 2" in job.stderr
    pids = _pids(tmp_path)
    assert sorted(pids) == [0, 1] and not any(alive(p) for p in pids.values())


def test_a_hung_job_is_killed_at_the_launcher_timeout(tmp_path):
    start = time.monotonic()
    job = run_job("worker_fail.py", "hang", str(tmp_path), timeout=6)
    assert time.monotonic() - start < 30
    assert job.returncode == 124
    assert "timed out after 6 s; process(es) 0, 1 were still running and were killed" in (
        job.stderr)
    assert not any(alive(p) for p in _pids(tmp_path).values())


def _spawn(process_id: int, port: int, *args: str, num_processes: int = 2):
    env = clean_env()
    env.update(TPS_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", TPS_NUM_PROCESSES=str(num_processes),
               TPS_PROCESS_ID=str(process_id), JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=4")
    return subprocess.Popen([sys.executable, *args], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def test_a_peer_that_never_joins_ends_start_up_with_a_clear_message(tmp_path):
    code = "import tpustrategy as tps; tps.initialize(initialization_timeout=3); print('joined')"
    proc = _spawn(0, free_port(), "-c", code)
    start = time.monotonic()
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        stop(proc)
    assert time.monotonic() - start < 40
    assert proc.returncode == 76 and "joined" not in out
    assert "DeadlineExceededError: process 1 of 2 did not join the job within " \
           "initialization_timeout=3 s (waited by process 0 of 2)" in err
    assert "Fix:" in err and "Check failure" not in err


def test_without_the_launcher_a_dead_peer_is_named_by_the_survivor_at_once(tmp_path):
    # Process 1 exits after start-up; process 0 waits in a collective and ends with
    # UnavailableError naming process 1 (its link closed), exit code 75, no SIGABRT.
    port = free_port()
    procs = [_spawn(i, port, str(HERE / "worker_fail.py"), "die", str(tmp_path), "5")
             for i in (0, 1)]
    start = time.monotonic()
    try:
        _, err0 = procs[0].communicate(timeout=60)
        procs[1].communicate(timeout=10)
    finally:
        for proc in procs:
            stop(proc)
    assert time.monotonic() - start < 30
    assert procs[1].returncode == 3
    assert procs[0].returncode == 75, err0[-3000:]
    assert "UnavailableError: process 1 of 2" in err0 and "Check failure" not in err0
