"""XLA flags are set only when the installed jaxlib knows them, and this jaxlib accepts them."""

from __future__ import annotations

import os
import subprocess
import sys

from tpustrategy._src.jax_shims import backend_flags


def _start_backend_with(flag: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": flag}
    return subprocess.run([sys.executable, "-c", "import jax; print(float(jax.numpy.ones(2).sum()))"],
                          capture_output=True, text=True, timeout=120, env=env)


def test_the_installed_jaxlib_knows_the_collective_timeout():
    assert backend_flags.accepts_collective_timeout()
    assert backend_flags.jaxlib_knows(backend_flags.COLLECTIVE_TIMEOUT.lstrip("-"))


def test_the_flag_is_accepted_by_this_jaxlib_when_the_backend_starts():
    # An unknown XLA flag aborts the process at start-up: this fails loudly when XLA stops
    # accepting the flag while its name stays in the binary.
    out = _start_backend_with(f"{backend_flags.COLLECTIVE_TIMEOUT}=17")
    assert out.returncode == 0 and out.stdout.strip() == "2.0", out.stderr[-2000:]


def test_a_flag_jaxlib_does_not_know_is_found_unknown_and_would_abort_the_backend():
    made_up = "--xla_tps_made_up_flag_for_this_test"
    assert not backend_flags.jaxlib_knows(made_up)
    # The premise of the check: XLA refuses such a flag when the backend starts.
    out = _start_backend_with(f"{made_up}=1")
    assert out.returncode != 0 and "2.0" not in out.stdout


def test_only_whole_flag_names_are_known():
    # A prefix of a real flag's name is not a flag (the name is matched up to its NUL).
    assert not backend_flags.jaxlib_knows("--xla_cpu_collective_timeout_sec")
    assert backend_flags.jaxlib_knows("--xla_force_host_platform_device_count=8")


def test_the_flag_is_added_once_and_never_over_the_users_value(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    assert backend_flags.set_collective_timeout(45) is True
    assert os.environ["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=4",
                                               f"{backend_flags.COLLECTIVE_TIMEOUT}=45"]
    assert backend_flags.set_collective_timeout(9) is False
    monkeypatch.setenv("XLA_FLAGS", "")
    assert backend_flags.set_collective_timeout(None) is False and os.environ["XLA_FLAGS"] == ""


def test_a_jaxlib_without_the_flag_gets_no_flag(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setattr(backend_flags, "jaxlib_knows", lambda flag: False)
    assert backend_flags.set_collective_timeout(30) is False
    assert os.environ["XLA_FLAGS"] == ""
