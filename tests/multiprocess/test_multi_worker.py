"""MultiWorkerMirroredStrategy over 2 processes x 4 fake CPU devices (8 global replicas).

Each test runs a job with ``python -m tpustrategy.launch``; the workers call
``tps.initialize()`` with no arguments (the launcher's ``TPS_*`` variables).
"""

from __future__ import annotations

import pytest

import tpustrategy.data as tpsd
from tests.multiprocess.harness import run_job

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def collectives():
    job = run_job("worker_collectives.py", timeout=60)
    assert job.returncode == 0, job.stderr[-3000:]
    results = job.results()
    assert sorted(results) == [0, 1], job.stdout[-3000:]
    return results


def test_each_process_knows_the_job_from_the_launcher(collectives):
    for pid, result in collectives.items():
        assert (result["process_index"], result["process_count"]) == (pid, 2)
        assert result["sources"] == {"coordinator_address": "TPS_COORDINATOR_ADDRESS",
                                     "num_processes": "TPS_NUM_PROCESSES",
                                     "process_id": "TPS_PROCESS_ID"}


def test_replica_ids_are_global_across_processes(collectives):
    assert collectives[0]["num_replicas"] == collectives[1]["num_replicas"] == 8
    assert collectives[0]["replica_ids"] == [0, 1, 2, 3]
    assert collectives[1]["replica_ids"] == [4, 5, 6, 7]


def test_all_reduce_sums_and_averages_across_processes(collectives):
    # sum(rid + 1 for rid in range(8)) = 36, mean 4.5 (golden mwms: 3.0 / 1.5 for 2 replicas)
    for result in collectives.values():
        assert result["all_reduce_sum"] == [36.0] * 4
        assert result["all_reduce_mean"] == [4.5] * 4
        assert result["reduce_sum"] == 28.0


def test_reduce_with_axis_of_run_outputs_spans_processes(collectives):
    # Replica r returns [r, r]: the mean over all 16 elements is 3.5 on both processes.
    for result in collectives.values():
        assert result["reduce_mean_axis0_run"] == 3.5


def test_reduce_mean_of_a_partial_batch_over_processes_is_the_true_mean(collectives):
    # Golden mwms: MEAN with axis=0 of [0, 1, 2, 3] (worker 0) and [4, 5] (worker 1) is 2.5.
    for result in collectives.values():
        assert result["reduce_mean_axis0"] == 2.5
        assert result["reduce_sum_axis0"] == 15.0


def test_reduce_of_values_from_function_spans_processes(collectives):
    for result in collectives.values():
        assert result["reduce_mean_axis0_host"] == 3.5


def _write_files(directory, sizes):
    values = {}
    for f, size in enumerate(sizes):
        path = directory / f"f{f}.tfrecord"
        values[f] = [100 * (f + 1) + i for i in range(size)]
        with tpsd.TFRecordWriter(str(path)) as writer:
            for v in values[f]:
                writer.write(str(v).encode())
    return values


def test_file_sharded_tfrecords_are_seen_exactly_once_and_end_together(tmp_path):
    # 3 files over 2 processes: process 0 reads files 0 and 2, process 1 reads file 1
    # and runs out first, then feeds empty pieces until process 0 is done.
    files = _write_files(tmp_path, [6, 6, 6])
    job = run_job("worker_dataset.py", str(tmp_path), "8", timeout=60)
    assert job.returncode == 0, job.stderr[-3000:]
    results = job.results()
    steps = {pid: results[pid]["steps"] for pid in (0, 1)}
    assert len(steps[0]) == len(steps[1]) == 3
    seen = {pid: [v for step in steps[pid] for piece in step for v in piece] for pid in (0, 1)}
    assert sorted(seen[0]) == files[0] + files[2]
    assert sorted(seen[1]) == files[1]
    assert sorted(seen[0] + seen[1]) == sorted(v for vs in files.values() for v in vs)
    assert steps[1][2] == [[], [], [], []]  # process 1 ran out first
    for pid in (0, 1):
        assert "applied='FILE'" in results[pid]["decision"]
        assert results[pid]["warnings"] == []


def test_a_ragged_step_runs_eagerly_on_every_process_with_collectives_across_them():
    job = run_job("worker_ragged.py", timeout=90)
    assert job.returncode == 0, job.stderr[-3000:]
    results = job.results()
    assert sorted(results) == [0, 1], job.stdout[-3000:]
    for pid, result in results.items():
        ragged, even = result["steps"]
        # Sum of 0..5 over all 8 replicas. d/dw all_reduce(SUM, w * s_r) on replica r is the
        # SUM of the 8 upstream ones times s_r: 8 * s_r (s = 0, 1, 2, 3 | 4, 5, 0, 0).
        assert ragged["sum"] == [15.0] * 4
        assert ragged["grad"] == ([0.0, 8.0, 16.0, 24.0] if pid == 0 else [32.0, 40.0, 0.0, 0.0])
        assert all(g == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] for g in ragged["gathered"])
        assert ragged["reduce_mean_axis0"] == 2.5
        assert even["sum"] == [120.0] * 4


def test_a_process_ends_cleanly_while_its_background_threads_wait_in_the_coordination_service():
    # Process 1's prefetch thread is inside the coordination service's blocking get (for
    # process 0's arrival at step 1, which never comes), and both processes' open
    # PreemptionWatchers poll it, when the processes end: the exit lets those threads go
    # instead of aborting from C++ (SIGABRT, "FATAL: exception not rethrown") when the
    # interpreter finalizes.
    job = run_job("worker_exit_with_waiting_threads.py", devices=1, timeout=90)
    assert job.returncode == 0, job.stderr[-3000:]
    assert "exception not rethrown" not in job.stderr
    results = job.results()
    assert results == {0: {"steps": 1, "pid": 0}, 1: {"steps": 1, "pid": 1}}, job.stdout[-2000:]
