"""XLA flags are set only on jaxlib versions known to accept them, and this jaxlib accepts them."""

from __future__ import annotations

import os
import subprocess
import sys

from tpustrategy._src.jax_shims import backend_flags


def test_the_installed_jaxlib_is_in_the_range_the_flag_was_checked_on():
    assert backend_flags.accepts_collective_timeout(), backend_flags.jaxlib_version()


def test_the_flag_is_accepted_by_this_jaxlib_when_the_backend_starts():
    # An unknown XLA flag aborts the process at start-up: this fails loudly when it goes away.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "JAX_PLATFORMS": "cpu",
           "XLA_FLAGS": f"{backend_flags.COLLECTIVE_TIMEOUT}=17"}
    out = subprocess.run([sys.executable, "-c", "import jax; print(float(jax.numpy.ones(2).sum()))"],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "2.0", out.stderr[-2000:]


def test_versions_outside_the_checked_range_are_refused():
    assert not backend_flags.accepts_collective_timeout((0, 10, 1))
    assert not backend_flags.accepts_collective_timeout((0, 11, 0))
    assert not backend_flags.accepts_collective_timeout((0, 12, 3))
    assert backend_flags.accepts_collective_timeout((0, 10, 9))


def test_the_flag_is_added_once_and_never_over_the_users_value(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=4")
    assert backend_flags.set_collective_timeout(45) is True
    assert os.environ["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=4",
                                               f"{backend_flags.COLLECTIVE_TIMEOUT}=45"]
    assert backend_flags.set_collective_timeout(9) is False
    monkeypatch.setenv("XLA_FLAGS", "")
    assert backend_flags.set_collective_timeout(None) is False and os.environ["XLA_FLAGS"] == ""


def test_an_unknown_jaxlib_gets_no_flag(monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setattr(backend_flags, "jaxlib_version", lambda: (0, 12, 0))
    assert backend_flags.set_collective_timeout(30) is False
    assert os.environ["XLA_FLAGS"] == ""
