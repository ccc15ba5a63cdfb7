"""The packages under ``tpustrategy/_src`` form a DAG, in the layers docs/architecture.md lists.

Every import counts, also one inside a function: a lazy import that goes up the layers
is still a cycle (it only hides it from Python's import order).
"""

from __future__ import annotations

import ast
import pathlib

SRC = pathlib.Path(__file__).resolve().parents[1] / "tpustrategy" / "_src"

# Lower layers first; a package may import only packages of earlier layers.
LAYERS = [
    {"errors", "config", "reduce_op", "lazy", "jax_shims", "not_provided", "context"},
    {"data", "lookup", "values"},
    {"devices"},
    {"cluster"},
    {"variables"},
    {"replica"},
    {"execution"},
    {"function", "outside_compilation"},
    {"input"},
    {"strategy"},
    {"losses", "metrics", "optimizers", "tape"},
    {"keras"},
    {"checkpoint"},
    {"demo", "testing"},
]


def _package(module: str) -> str | None:
    parts = module.split(".")
    if parts[:2] != ["tpustrategy", "_src"] or len(parts) < 3:
        return None
    return parts[2]


def _edges() -> dict[tuple[str, str], list[str]]:
    edges: dict[tuple[str, str], list[str]] = {}
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        source = rel.parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module]
                if node.module == "tpustrategy._src":
                    targets = [f"tpustrategy._src.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                package = _package(target)
                if package is not None and package != source:
                    edges.setdefault((source, package), []).append(f"{rel}:{node.lineno}")
    return edges


def _layer_of(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(
        f"tpustrategy/_src/{package} is in no layer of tests/test_package_graph.py; add it to LAYERS "
        "(and to the package table of docs/architecture.md)."
    )


def test_every_package_imports_only_lower_layers():
    upward = [
        f"{a} -> {b} ({', '.join(sites[:3])})"
        for (a, b), sites in sorted(_edges().items())
        if _layer_of(b) >= _layer_of(a)
    ]
    assert not upward, "imports that go up (or sideways in) the layers:\n" + "\n".join(upward)


def test_every_package_directory_is_in_a_layer():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    for package in sorted(packages | modules):
        _layer_of(package)


def test_test_modules_have_unique_names_outside_packages():
    """pytest imports test files of folders without ``__init__.py`` by basename: two equal
    basenames stop the whole run at collection ("import file mismatch")."""
    tests = pathlib.Path(__file__).resolve().parent
    seen: dict[str, pathlib.Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        if (path.parent / "__init__.py").exists():
            continue
        other = seen.setdefault(path.name, path)
        assert other == path, f"{other.relative_to(tests)} and {path.relative_to(tests)} share a basename"
