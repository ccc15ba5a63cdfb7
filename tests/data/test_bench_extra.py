"""The tf.data benchmark rows' TensorFlow: pyproject's ``bench`` extra and the Makefile agree."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_make_bench_installs_the_bench_extra_into_its_own_venv():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["bench"]
    make = (ROOT / "Makefile").read_text()
    spec = re.search(r"^TF_SPEC := (.+)$", make, re.M).group(1).strip()
    assert extra == [spec] == ["tensorflow-cpu>=2.21,<2.22"]
    assert "--tf-python $(TFVENV)/bin/python" in make and "$(TFVENV)/.installed" in make


def test_the_benchmark_skips_its_rows_without_tensorflow(tmp_path):
    out = tmp_path / "rows.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "data_vs_tfdata.py"), "--quick",
                           "--tf-python", str(tmp_path / "missing-python"), "--json", str(out)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    rows = json.loads(out.read_text())
    assert len(rows) == 8 and all(r["skipped"] and "--tf-python" in r["skipped"] for r in rows)
