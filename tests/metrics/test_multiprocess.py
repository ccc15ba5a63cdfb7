"""Metrics and optimizers across 2 processes x 4 fake CPU devices (8 global replicas).

The values each replica holds are in ``worker_metrics.py``; the expected
numbers below are computed from them by hand.
"""

from __future__ import annotations

import pathlib

import pytest

from tests.multiprocess.harness import run_job

pytestmark = pytest.mark.timeout(150)

# Per mode: the mean after the replica step (values [r, r + 1]: 64 / 16; ragged values
# 1, 2, 3, 4, 5, 6, 7: 28 / 7), after a cross-replica update with 100, after a compiled
# step adding each replica's r (0 + ... + 7 = 28 over 8 more values).
EXPECTED_MEANS = {
    "uniform": (64 / 16, 164 / 17, 192 / 25),
    "ragged": (28 / 7, 128 / 8, 156 / 16),
}
MODES = [
    pytest.param(("uniform", "build"), id="uniform"),
    pytest.param(("uniform", "lazy"), id="uniform_state_created_in_the_step"),
    pytest.param(("ragged", "build"), id="ragged"),
]


@pytest.fixture(scope="module", params=MODES)
def job(request):
    mode, state = request.param
    job = run_job(str(pathlib.Path(__file__).with_name("worker_metrics.py")), mode, state, timeout=90)
    assert job.returncode == 0, job.stderr[-3000:]
    found = job.results()
    assert sorted(found) == [0, 1], job.stdout[-3000:]
    return mode, found


def test_replica_updates_from_both_processes_count_once(job):
    mode, results = job
    # Row 0 always matches, row 1 on the 4 odd replicas: 12 of 16.
    for result in results.values():
        assert result["after_step"]["mean"] == pytest.approx(EXPECTED_MEANS[mode][0])
        assert result["after_step"]["accuracy"] == 0.75
        assert result["after_step"]["in_replica"] == pytest.approx([EXPECTED_MEANS[mode][0]] * 4)


def test_a_cross_replica_update_on_every_process_counts_once(job):
    mode, results = job
    for result in results.values():
        assert result["after_cross"] == pytest.approx(EXPECTED_MEANS[mode][1])


def test_a_compiled_step_adds_every_replicas_value(job):
    mode, results = job
    for result in results.values():
        assert result["after_compiled"] == pytest.approx(EXPECTED_MEANS[mode][2])
        assert result["after_reset"] == 0.0


def test_the_optimizer_sums_gradients_over_both_processes(job):
    # SGD(0.5, momentum=0.5) with summed gradient 28: trace 28 then 42; w = 1 - 14 - 21.
    _, results = job
    for result in results.values():
        assert result["after_step"]["w"] == [-13.0] * 3
        assert result["after_compiled_w"] == [-34.0] * 3
        assert result["iterations"] == 2
