"""Import hygiene: the tf.data surface does not start JAX; public names resolve."""

from __future__ import annotations

import subprocess
import sys

import tpustrategy as tps


def test_importing_the_data_package_does_not_import_jax():
    code = "import sys, tpustrategy.data as tpsd; tpsd.Dataset.range(3); print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_every_lazy_public_name_resolves():
    for name in dir(tps):
        if not name.startswith("_"):
            assert getattr(tps, name) is not None


def test_unknown_attribute_is_an_attribute_error():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        tps.Nope  # noqa: B018
