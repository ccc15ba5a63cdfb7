"""The backend shim: backends started and TPU chips attached, without starting JAX."""

from __future__ import annotations

import subprocess
import sys

from tpustrategy._src.jax_shims import backend


def test_the_private_helpers_exist():
    backend.check()


def test_backends_started_turns_true_only_once_jax_starts():
    code = ("from tpustrategy._src.jax_shims import backend\n"
            "before = backend.backends_started()\n"
            "import jax; jax.devices()\n"
            "print(before, backend.backends_started())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env={"JAX_PLATFORMS": "cpu", "PATH": "/usr/bin:/bin"})
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]


def test_a_cpu_machine_has_no_tpu_chips_and_a_broken_helper_falls_back(monkeypatch):
    from jax._src import hardware_utils

    assert backend.tpu_chips_attached() == 0

    def broken():
        raise AttributeError("moved")

    monkeypatch.setattr(hardware_utils, "num_available_tpu_chips_and_device_id", broken)
    assert backend.tpu_chips_attached() == 0
