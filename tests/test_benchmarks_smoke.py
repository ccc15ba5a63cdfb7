"""Smoke tests of the benchmarks' contract; no timing is asserted (claims live in ``benchmarks/``).

- ``tiny_step.py --quick --json PATH`` (the fastest script) writes rows with every key;
- ``_common.wait`` really waits on what a step returns, DistributedValues included,
  and refuses what it cannot wait on;
- a missing optional dependency gives "skipped (reason)" rows and exit status 0;
- ``run_all.py`` fails (status 1, naming the script) when a script fails, and keeps
  skipped rows as skipped.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tpustrategy as tps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "benchmarks")
KEYS = {"name", "ours", "ours_spread", "baseline", "baseline_spread", "ratio", "paired_ratio",
        "paired_ratio_spread", "paired_ratio_iqr", "rounds", "unit", "higher_is_better", "note", "skipped"}

sys.path.insert(0, BENCH)
import _common  # noqa: E402
import run_all  # noqa: E402


def test_tiny_step_quick_writes_rows_with_every_key_and_positive_numbers(tmp_path):
    out = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(BENCH, "tiny_step.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=180, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert isinstance(rows, list) and rows
    for row in rows:
        assert KEYS <= set(row), f"missing {KEYS - set(row)} in {row}"
        assert isinstance(row["name"], str) and row["name"] and row["unit"]
        assert row["skipped"] is None
        for key in ("ours", "baseline", "ratio", "paired_ratio"):
            assert math.isfinite(row[key]) and row[key] > 0, (key, row)
        for key in ("ours_spread", "baseline_spread", "paired_ratio_spread", "paired_ratio_iqr"):
            lo, hi = row[key]
            assert 0 < lo <= hi, (key, row)
        assert row["ours_spread"][0] <= row["ours"] <= row["ours_spread"][1]
        lo, q1, q3, hi = *row["paired_ratio_spread"][:1], *row["paired_ratio_iqr"], row["paired_ratio_spread"][1]
        assert lo <= q1 <= row["paired_ratio"] <= q3 <= hi, row
        assert math.isclose(row["ratio"], row["ours"] / row["baseline"], rel_tol=1e-9)
        run_all.normalise("tiny_step.py", row)  # the table accepts it


def test_wait_blocks_on_distributed_values_and_pytrees_of_them():
    strategy = tps.MirroredStrategy()
    n = strategy.num_replicas_in_sync
    x = tps.PerReplica([jnp.full((256, 256), float(i)) for i in range(n)])

    def heavy(v):
        for _ in range(20):
            v = jnp.tanh(v @ v)
        return v, tps.get_replica_context().all_reduce("SUM", v)

    out = strategy.run(heavy, (x,))
    assert _common.wait({"step": out, "count": 3, "host": np.ones(2)}) is not None
    assert _common.all_ready(out)
    assert _common.all_ready(jax.tree.leaves(out))


def test_wait_refuses_what_it_cannot_wait_on():
    with pytest.raises(TypeError, match="cannot wait on"):
        _common.wait([object()])


def test_timed_loop_waits_on_every_result_in_both_modes():
    seen = []

    def step():
        seen.append(len(seen))
        return jnp.ones(3) * len(seen)

    assert _common.timed_sync(step, 3) > 0
    assert _common.timed_pipelined(step, 5, depth=2) > 0
    assert seen == list(range(8))
    with pytest.raises(ValueError, match="depth"):
        _common.timed_loop(step, 1, depth=-1)


def test_a_missing_optional_dependency_gives_skipped_rows_and_status_zero(tmp_path):
    out = tmp_path / "rows.json"
    hide_optax = ("import runpy, sys; sys.modules['optax'] = None; "
                  f"sys.argv = [{os.path.join(BENCH, 'train_step.py')!r}, '--json', {str(out)!r}]; "
                  "runpy.run_path(sys.argv[0], run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", hide_optax], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert rows and all(r["skipped"] == "optax not installed" and r["ours"] is None for r in rows)
    assert all(r["note"] == "skipped (optax not installed)" for r in rows)
    assert all(run_all.normalise("train_step.py", r)["skipped"] for r in rows)


def test_run_all_fails_and_names_the_script_that_raised(tmp_path, monkeypatch, capsys):
    preamble = f"import sys; sys.path.insert(0, {BENCH!r}); import _common\n"
    (tmp_path / "boom.py").write_text(preamble + "_common.parser('x').parse_args(); raise RuntimeError('kaput')\n")
    (tmp_path / "skips.py").write_text(
        preamble + "a = _common.parser('x').parse_args()\n"
        "_common.finish([_common.skipped_row('needs tf', 'no TensorFlow')], a.json)\n")
    monkeypatch.setattr(run_all, "HERE", str(tmp_path))
    monkeypatch.setattr(run_all, "RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(run_all, "device_info", lambda env: "test")
    monkeypatch.setattr(sys, "argv", ["run_all.py", "--quick"])
    with pytest.raises(SystemExit) as exit_info:
        run_all.main()
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert "FAILED: boom.py: exit status 1: RuntimeError: kaput" in captured.err
    assert "skips.py" not in captured.err
    table = (tmp_path / "results" / "latest.md").read_text()
    assert "boom: FAILED" in table and "skips: needs tf" in table and "skipped (no TensorFlow)" in table


def test_run_all_rejects_a_row_without_numbers_that_is_not_marked_skipped():
    row = _common.skipped_row("x", "reason")
    row["skipped"] = None
    with pytest.raises(ValueError, match="not marked skipped"):
        run_all.normalise("s.py", row)


def test_the_simulated_pod_counts_two_requests_per_process_per_step_against_p_plus_two():
    import coordinator_requests

    result = coordinator_requests.simulate(6, 4, legacy=True)
    assert result["ours_requests"] == 2 * 6  # one increment + one get (or the result) each
    # the previous protocol: a set and 6 gets per process and step, a delete from step 2 on
    assert result["legacy_requests"] == 6 * (1 + 6 + 2 / 4)
    for key in ("ours_cpu", "legacy_cpu", "ours_wall", "legacy_wall"):
        assert result[key] >= 0 and math.isfinite(result[key])
    row = _common.row("simulated pod", [result["ours_requests"]], [result["legacy_requests"]],
                      "requests/step", interleaved=False)
    run_all.normalise("coordinator_requests.py", row)


def test_checkpoint_loop_saves_every_few_steps_and_records_the_time_blocked_in_each_save():
    import checkpoint_async

    ckpt, step = checkpoint_async.build(32)
    before = np.asarray(ckpt.w.read_value()).copy()
    steps = 2 * checkpoint_async.EVERY
    blocked: list[float] = []
    assert checkpoint_async.loop(ckpt, step, steps, "sync", blocked) > 0
    assert checkpoint_async.loop(ckpt, step, steps, "async", blocked) > 0
    assert checkpoint_async.loop(ckpt, step, steps, "none", blocked) > 0
    assert len(blocked) == 2 and all(ms > 0 for ms in blocked)  # one median per loop that saved
    assert not np.allclose(np.asarray(ckpt.w.read_value()), before)  # the steps trained
