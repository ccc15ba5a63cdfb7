"""Every "install a supported JAX" fix names the range pyproject.toml pins."""

from __future__ import annotations

import pathlib
import re
import tomllib

from tpustrategy._src.jax_shims import runtime_service, supported

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_range_is_the_one_pyproject_pins():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert supported.JAX_RANGE in deps


def test_the_installed_jax_is_inside_the_range():
    from importlib.metadata import version

    from packaging.specifiers import SpecifierSet

    assert version("jax") in SpecifierSet(supported.JAX_RANGE.removeprefix("jax"))


def test_no_source_file_spells_another_range():
    # runtime_service.py is loaded by path by the coordination helper and spells it itself.
    spelled = {}
    for path in (ROOT / "tpustrategy").rglob("*.py"):
        for found in re.findall(r"jax>=[0-9.]+,<[0-9.]+", path.read_text()):
            spelled.setdefault(found, []).append(str(path.relative_to(ROOT)))
    assert set(spelled) == {supported.JAX_RANGE}, spelled
    assert supported.JAX_RANGE in runtime_service.__loader__.get_source(runtime_service.__name__)
