"""Every Python block of the docs pages runs, each in a fresh process with 8 fake CPU devices.

A block that ``continues`` the one before runs with it; a block marked ``skip`` names the test
that runs it instead (tests/docs/docs_pages.py describes the markers).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.docs.docs_pages import ROOT, all_blocks, pages

BLOCKS = all_blocks()
# A block some later block continues runs as part of that one: run only the last of each chain.
RUN = [b for i, b in enumerate(BLOCKS)
       if b.skip or not any(later.page == b.page and later.skip is None and later.code.startswith(b.code)
                            and later is not b for later in BLOCKS[i + 1:])]


def test_the_pages_have_examples_to_run():
    assert len(pages()) >= 10, [str(p) for p in pages()]
    ran = [b for b in RUN if b.skip is None]
    assert len(ran) >= 10, [b.id for b in ran]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_docs_example_runs(block, tmp_path):
    if block.skip:
        pytest.skip(f"{block.id}: {block.skip}")
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    env["JAX_PLATFORMS"] = "cpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.setdefault("KERAS_BACKEND", "jax")
    script = tmp_path / "example.py"
    script.write_text(block.code)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=540)
    assert proc.returncode == 0, (
        f"the example at {block.id} failed (exit {proc.returncode}):\n--- code ---\n{block.code}\n"
        f"--- stdout ---\n{proc.stdout[-3000:]}\n--- stderr ---\n{proc.stderr[-6000:]}")
