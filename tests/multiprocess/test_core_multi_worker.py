"""TensorFlow's multi-worker patterns on 2 processes x 4 fake CPU devices (8 replicas)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.multiprocess.harness import run_job

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def core():
    job = run_job("worker_core.py", timeout=120)
    assert job.returncode == 0, job.stderr[-4000:] + job.stdout[-2000:]
    results = job.results()
    assert sorted(results) == [0, 1], job.stdout[-3000:]
    return results


def _single_process_readme():
    """The same 4 steps on one device: full-batch-equivalent SGD on each global batch of 16."""
    import jax
    import jax.numpy as jnp

    x = np.arange(64, dtype=np.float32).reshape(32, 2) / 32
    y = x @ np.array([[1.0], [-1.0]], np.float32)
    w, losses = jnp.zeros((2, 1)), []
    for step in range(4):
        xb, yb = x[(step % 2) * 16:(step % 2) * 16 + 16], y[(step % 2) * 16:(step % 2) * 16 + 16]
        parts = [(xb[i * 2:(i + 1) * 2], yb[i * 2:(i + 1) * 2]) for i in range(8)]
        grads = [jax.grad(lambda w, a=a, b=b: jnp.mean((a @ w - b) ** 2))(w) for a, b in parts]
        losses.append(float(np.mean([float(jnp.mean((a @ w - b) ** 2)) for a, b in parts])))
        w = w - 0.1 * sum(grads) / 8
    return losses, np.asarray(w).ravel().tolist()


def test_the_readme_pattern_runs_with_next_inside_tps_function_on_every_process(core):
    losses, w = _single_process_readme()
    for result in core.values():
        np.testing.assert_allclose(result["readme_losses"], losses, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(result["readme_w"], w, rtol=1e-5, atol=1e-7)


def test_a_get_next_as_optional_loop_inside_tps_function_sees_every_example(core):
    assert [r["optional_total"] for r in core.values()] == [float(sum(range(20)))] * 2


def test_uneven_per_process_data_runs_ragged_inside_tps_function(core):
    # Process 0: 12 examples in 6 batches of 2; process 1: 5 examples (2, 2, 1). Each process has 4
    # replicas taking consecutive batches; a step ends when neither process has data.
    step0 = (0 + 1) + (2 + 3) + (4 + 5) + (6 + 7) + (0 + 1) + (2 + 3) + 4
    step1 = (8 + 9) + (10 + 11)
    for result in core.values():
        assert result["uneven_totals"] == [float(step0), float(step1)]


def test_gather_returns_every_replica_on_every_process(core):
    for result in core.values():
        assert result["gather0"] == [float(r) for r in range(8) for _ in range(2)]
        assert result["gather1_shape"] == [1, 16]


def test_host_built_per_replica_values_reduce_inside_tps_function(core):
    for result in core.values():
        assert result["reduce_host_values_in_function"] == [28.0, 28.0]


def test_a_variable_made_outside_scope_gets_every_replicas_update_on_every_process(core):
    assert [r["plain_after_run"] for r in core.values()] == [8.0, 8.0]


def test_twenty_epochs_of_uneven_input_across_processes_never_crash():
    job = run_job("worker_uneven_stress.py", timeout=150)
    assert job.returncode == 0, job.stderr[-4000:] + job.stdout[-2000:]
    results = job.results()
    expected = 2 * 8 * (sum(range(9)) + sum(range(3)))  # run's all-reduce + the reduce, 8 features each
    for result in results.values():
        assert result["epochs"] == [float(expected)] * 20


def test_a_kept_old_value_of_a_written_variable_stays_valid_on_every_process(core):
    """The step donates a copy of a value the user kept (across both processes' devices)."""
    for result in core.values():
        assert result["kept_value"] == [3.0] * 4
        assert result["counter_after"] == [6.0] * 4
