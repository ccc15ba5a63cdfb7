"""The docs' multi-process example runs as the page says: two processes started by the launcher."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.docs.docs_pages import DOCS, ROOT, blocks


@pytest.mark.timeout(300)
def test_multi_host_page_example_runs_on_two_processes(tmp_path):
    page = DOCS / "concepts" / "multi_host.md"
    [block] = [b for b in blocks(page) if b.skip and "launch" in b.code]
    assert "test_docs_multiprocess.py" in block.skip
    command = re.search(r"run with: (python -m tpustrategy\.launch .*?) train\.py", block.code).group(1).split()
    (tmp_path / "train.py").write_text(block.code)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # the launcher gives each process its devices
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run([sys.executable, *command[1:], "train.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    for rank in (0, 1):
        # stdout only: a C++ library's log lines on stderr (Gloo's, written from several threads
        # at once) can be torn into a line that is just a number.
        printed = [int(m) for m in re.findall(rf"^\[p{rank}\] (\d+)$", proc.stdout, re.M)]
        assert printed == [120, 376, 632, 888], (rank, output[-4000:])
