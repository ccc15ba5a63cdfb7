"""Smoke test of the benchmark scripts' contract: ``--quick --json PATH`` writes usable rows.

Only run_overhead.py runs here (the others take longer; ``make bench`` runs them
all). No timing is asserted: performance claims live in ``benchmarks/``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = {"name", "ours", "ours_spread", "baseline", "baseline_spread", "ratio", "unit", "higher_is_better", "note"}


def test_run_overhead_quick_writes_rows_with_every_key_and_positive_numbers(tmp_path):
    out = tmp_path / "rows.json"
    proc = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "run_overhead.py"), "--quick", "--json", str(out)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())
    assert isinstance(rows, list) and rows
    for row in rows:
        assert KEYS <= set(row), f"missing {KEYS - set(row)} in {row}"
        assert isinstance(row["name"], str) and row["name"] and row["unit"]
        for key in ("ours", "baseline", "ratio"):
            assert math.isfinite(row[key]) and row[key] > 0, (key, row)
        for key in ("ours_spread", "baseline_spread"):
            lo, hi = row[key]
            assert 0 < lo <= hi, (key, row)
        assert row["ours_spread"][0] <= row["ours"] <= row["ours_spread"][1]
        assert math.isclose(row["ratio"], row["ours"] / row["baseline"], rel_tol=1e-9)
