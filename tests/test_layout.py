"""The test tree's own layout: pytest imports a test module by its basename
when its folder is not a package, so two such modules with one name stop the
whole run at collection ("import file mismatch")."""

from __future__ import annotations

import collections
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _rootless_modules() -> dict[str, list[Path]]:
    """Basename -> files, for test modules whose folder has no __init__.py."""
    found: dict[str, list[Path]] = collections.defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if "__pycache__" in path.parts or path.name in ("__init__.py", "conftest.py"):
            continue
        if (path.parent / "__init__.py").exists():
            continue
        found[path.name].append(path.relative_to(TESTS))
    return found


def test_module_basenames_are_unique_outside_packages():
    clashes = {name: paths for name, paths in _rootless_modules().items() if len(paths) > 1}
    assert not clashes, (
        "test modules in folders without __init__.py share a basename, so pytest "
        f"cannot import both: {clashes}; rename one (e.g. test_<topic>_<folder>.py)"
    )


def test_the_check_sees_the_tree():
    # The check above would pass vacuously if the walk found nothing.
    modules = _rootless_modules()
    assert "test_layout.py" in modules
    assert len(modules) > 50
