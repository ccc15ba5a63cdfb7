"""TensorFlow's ``collective_all_reduce_strategy_test.py``, ported, on 2 processes.

Each case runs in ``worker_collective_all_reduce.py`` on a job of 2 processes, with
TensorFlow's layout of one device per worker (its literal expected values) and with 2
fake CPU devices per process. Graph-mode-only cases (``update_config_proto``, session
targets, ``make_input_fn_iterator``) and the mocked collective-ops start-up have no
meaning on JAX.
"""

from __future__ import annotations

import pytest

from tests.multiprocess.harness import run_job

pytestmark = pytest.mark.timeout(240)

CASES = [
    "test_num_replicas_in_sync",
    "test_cluster_resolver_task",
    "test_minimize_loss_with_reduce_to_and_update",
    "test_variable_initialization_is_agreed_across_workers",
    "test_dataset_function_sees_its_input_context_and_reads_every_element",
    *[f"test_all_reduce_{op}{kind}_{mode}" for mode in ("eager", "tf_function")
      for op in ("sum", "mean") for kind in ("", "_gradient_tape", "_gradients")],
]


@pytest.fixture(scope="module", params=[1, 2], ids=["2x1", "2x2"])
def reports(request):
    job = run_job("worker_collective_all_reduce.py", *CASES, devices=request.param, timeout=180)
    assert job.returncode == 0, job.stderr[-4000:] + job.stdout[-2000:]
    results = job.results()
    assert sorted(results) == [0, 1], job.stdout[-3000:]
    return results


def test_every_ported_case_is_reported_by_both_processes(reports):
    for report in reports.values():
        assert sorted(report) == sorted(CASES)


@pytest.mark.parametrize("case", CASES)
def test_the_tensorflow_case_passes_on_every_process(reports, case):
    for process, report in sorted(reports.items()):
        assert report[case] == "ok", f"process {process}: {report[case]}"
