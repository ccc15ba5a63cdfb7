"""Test configuration: 8 fake CPU devices, set before JAX starts."""

import os

_flag = "--xla_force_host_platform_device_count=8"
if _flag not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _flag).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")
for _proxy in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
    os.environ.pop(_proxy, None)

import pytest  # noqa: E402


@pytest.fixture(params=["compiled", "eager"])
def path(request):
    """Runs a test once on the compiled path and once on the eager path of ``strategy.run``."""
    import tpustrategy as tps

    tps.config.run_functions_eagerly(request.param == "eager")
    yield request.param
    tps.config.run_functions_eagerly(False)
