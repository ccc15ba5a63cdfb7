"""Test configuration: fake CPU devices (8, or ``--devices N``), set before JAX starts.

``pytest --devices 1`` runs the suite as a one-GPU or laptop user has it: one device,
one replica. A test that needs more devices says so with ``@pytest.mark.devices(n)``
and is skipped on fewer (with the count in the reason).
"""

import os

DEFAULT_DEVICES = 8

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


def pytest_addoption(parser):
    parser.addoption("--devices", type=int, default=DEFAULT_DEVICES,
                     help="number of fake CPU devices JAX starts with (default 8; 1: a one-device user)")


def pytest_configure(config):
    # Test modules import JAX only when collected, after this: the flag is in place before it starts.
    count = config.getoption("--devices")
    if count < 1:
        raise pytest.UsageError(f"--devices must be at least 1. Received: --devices {count}.")
    flag = "--xla_force_host_platform_device_count"
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if not f.startswith(flag + "=")]
    os.environ["XLA_FLAGS"] = " ".join([*flags, f"{flag}={count}"])
    config.addinivalue_line("markers", "devices(n): the test needs at least n devices (skipped on fewer)")


def pytest_collection_modifyitems(config, items):
    count = config.getoption("--devices")
    for item in items:
        marker = item.get_closest_marker("devices")
        if marker is not None and count < marker.args[0]:
            item.add_marker(pytest.mark.skip(
                reason=f"needs {marker.args[0]} devices; this run has {count} (--devices {count})"))
