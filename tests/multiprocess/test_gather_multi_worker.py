"""TensorFlow's GatherTest (``strategy_gather_test.py``) on a 2-process MultiWorkerMirroredStrategy.

The cases live in ``tests/strategy/test_gather.py`` (they also run there on one
process); ``worker_gather.py`` runs each in both of TensorFlow's modes, on 2
processes with 1 device each (TensorFlow's ``multi_worker_mirrored_2x1``) and with 4.
"""

from __future__ import annotations

import pytest

from tests.multiprocess.harness import run_job
from tests.strategy.test_gather import CASES

pytestmark = pytest.mark.timeout(240)

KEYS = [f"{name}/{mode}" for name in CASES for mode in ("pure_eager", "tps.function")]


@pytest.fixture(scope="module", params=[1, 4], ids=["2x1", "2x4"])
def reports(request):
    job = run_job("worker_gather.py", devices=request.param, timeout=180)
    assert job.returncode == 0, job.stderr[-4000:] + job.stdout[-2000:]
    results = job.results()
    assert sorted(results) == [0, 1], job.stdout[-3000:]
    return results


def test_every_gather_case_is_reported_by_both_processes(reports):
    for report in reports.values():
        assert sorted(report) == sorted(KEYS)


@pytest.mark.parametrize("key", KEYS)
def test_the_tensorflow_gather_case_passes_on_every_process(reports, key):
    for process, report in sorted(reports.items()):
        assert report[key] == "ok", f"process {process}: {report[key]}"
