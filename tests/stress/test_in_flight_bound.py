"""The bound on programs in flight holds when Keras-style programs donate the outputs it keeps.

XLA's CPU client aborts the process when more than ~32 programs queue behind a running one
(see ``tpustrategy/_src/execution/dispatch.py``). Each case runs ``donated_chain.py`` in a
fresh process (an abort kills only that process): 80 programs, each donating its input to the
next, queued behind a long program with an all-reduce, every one recorded with
``dispatch.track``. The process must exit 0 with the chain's sum computed by hand.
"""

import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).with_name("donated_chain.py")


@pytest.mark.parametrize("limit", [None, "1"], ids=["default-limit", "limit-1"])
def test_donating_chain_behind_a_long_collective_program_finishes(limit):
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    flag = "--xla_force_host_platform_device_count=8"
    if flag not in env.get("XLA_FLAGS", ""):
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flag).strip()
    env.pop("TPS_MAX_IN_FLIGHT", None)
    if limit is not None:
        env["TPS_MAX_IN_FLIGHT"] = limit
    steps = 80
    try:
        proc = subprocess.run([sys.executable, str(SCRIPT), str(steps), "300"], env=env,
                              capture_output=True, text=True, timeout=240)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the chain did not finish within 240 s\nstdout:\n{e.stdout}\nstderr:\n{e.stderr}")
    assert proc.returncode == 0, (
        f"exit {proc.returncode} (134: XLA's CPU all-reduce rendezvous timed out)\n"
        f"stderr:\n{proc.stderr[-6000:]}")
    results = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    # One warm-up step and `steps` more, each adding the 8x4 ones (32).
    assert results and float(results[-1].split()[1]) == 32.0 * (steps + 1), proc.stdout
