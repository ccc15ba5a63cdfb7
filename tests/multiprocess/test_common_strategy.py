"""TensorFlow's common strategy tests (``strategy_common_test.py``), ported by renaming, on 2 processes.

Each case runs in ``worker_common_strategy.py`` on a job of 2 processes, both with
TensorFlow's own layout (1 device per worker, so its literal expected values) and
with 4 fake CPU devices per process (8 replicas). Each process reports every case.
"""

from __future__ import annotations

import pytest

from tests.multiprocess.harness import run_job

pytestmark = pytest.mark.timeout(240)

CASES = [
    "test_capture_replica_id",
    "test_merge_call_init_scope",
    "test_local_result_for_dictionary",
    "test_local_result_for_list",
    "test_local_result_for_tuple",
    "test_local_result_for_nested_struct",
    "test_local_result_for_nested_struct_without_tensor",
    "test_local_result_for_scalar_value",
    "test_local_result_for_dictionary_different_replicas",
    "test_local_result_for_tensor",
    "test_reduce_basic",
    "test_reduce_axis",
    *[f"test_dense_update_{fn}_{mode}" for fn in ("assign", "assign_add", "assign_sub")
      for mode in ("tf_function", "eager")],
    *[f"test_{name}_{mode}" for mode in ("tf_function", "eager")
      for name in ("replica_ctx_all_reduce_dense", "sync_on_read_variable_input", "all_reduce_dense",
                   "all_reduce_nested_dense")],
    "test_dataset_from_function",
    "test_simple_input_from_dataset_last_partial_batch",
    "test_simple_input_from_fn_last_partial_batch",
    "test_reduce_host_tensor",
    "test_reduce_to_host_tensor",
    "test_batch_reduce_to_host_tensor",
    "test_reduce_device_tensors",
    "test_reduce_to_device_tensors",
    "test_batch_reduce_to_device_tensors",
    "test_reduce_of_a_partial_last_batch_is_a_tensor",
    "test_reduce_of_a_partial_last_batch_from_run_is_a_tensor",
    "test_reduce_of_a_partial_last_batch_inside_tps_function_is_a_tensor",
    "test_reduce_of_a_partial_last_batch_from_function_is_a_tensor",
    "test_reduce_of_a_host_built_value_inside_tps_function",
    "test_batch_reduce_to_a_host_device_gives_floats",
    "test_extended_values_on_a_multi_worker_job",
    "test_extended_update_of_a_sync_on_read_variable_on_every_process",
    "test_eager_collectives_combine_every_process",
    "test_cluster_resolver_property",
]


@pytest.fixture(scope="module", params=[1, 4], ids=["2x1", "2x4"])
def reports(request):
    job = run_job("worker_common_strategy.py", *CASES, devices=request.param, timeout=180)
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
