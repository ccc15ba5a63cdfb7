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
    {"activity"},
    {"errors", "config", "reduce_op", "lazy", "jax_shims", "not_provided", "context", "types", "background",
     "before_exit"},
    {"data", "lookup", "values", "strings", "sparse"},
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


# Contracts between packages -------------------------------------------------------------------
# Names of the standard library or of a dependency that start with "_" but are public API.
_PUBLIC_UNDERSCORE = {"_replace", "_fields", "_asdict", "_make", "_exit"}

# Cross-package private reads still to be replaced by context.contracts names: (file, name).
# Each sits in a file another change was editing when the check arrived; this list only shrinks
# (a site that is gone must leave it, see the test).
KNOWN_PRIVATE_READS: set[tuple[str, str]] = set()

# ``_src`` modules that import the public ``tpustrategy`` package (they should import ``_src``).
KNOWN_PUBLIC_IMPORTS = {
    # The demo is example code, written as a user writes it.
    "demo/model.py", "demo/dataset.py", "demo/main.py", "demo/checkpointing.py",
}

# Modules that may load modules by a computed name, and why (the declared extension tables).
LOADS_BY_NAME = {
    "context/extensions.py": "SCOPE_EXTENSIONS: integrations joined to strategy.scope() (Keras)",
    "lazy.py": "the public packages' lazily loaded attributes, a table of module names",
    "data/state_codec.py": "an iterator state names the class it restores",
    "execution/jaxpr_tools.py": "shim: JAX's collectives module by name (it moves between releases)",
    "keras/internals.py": "shim: Keras's private modules by name",
    "keras/patches.py": "shim: Keras's private modules by name",
}

# Import circles between modules of one package, and why they stay.
ALLOWED_CIRCLES = {
    "data": "the fluent API: Dataset's methods return the transformation classes, which are Datasets "
            "(the field's shape; Grain has it too)",
}


def _sources() -> dict[pathlib.Path, ast.AST]:
    return {path: ast.parse(path.read_text()) for path in SRC.rglob("*.py")}


def _top(path: pathlib.Path) -> str:
    return path.relative_to(SRC).parts[0].removesuffix(".py")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__") and name not in _PUBLIC_UNDERSCORE


def _defined_private_names(sources: dict[pathlib.Path, ast.AST]) -> dict[str, set[str]]:
    """Per package: every name it defines (functions, classes, assigned names and attributes, slots)."""
    defined: dict[str, set[str]] = {}
    for path, tree in sources.items():
        names = defined.setdefault(_top(path), set())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                    and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                names.add(node.args[1].value)
            elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__"
                                                      for t in node.targets):
                names.update(c.value for c in ast.walk(node.value)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
    return defined


def _private_reads() -> set[tuple[str, str]]:
    sources = _sources()
    defined = _defined_private_names(sources)
    reads = set()
    for path, tree in sources.items():
        package = _top(path)
        for node in ast.walk(tree):
            name = None
            if isinstance(node, ast.Attribute) and _private(node.attr):
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    name = node.attr
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) > 1
                  and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                  and _private(node.args[1].value)):
                name = node.args[1].value
            if name is None:
                continue
            if name in defined[package]:  # the package's own name (it defines or assigns it)
                continue
            if any(name in names for other, names in defined.items() if other != package):
                reads.add((str(path.relative_to(SRC)), name))
    return reads


def test_no_package_reads_another_packages_private_members():
    reads = _private_reads()
    new = sorted(reads - KNOWN_PRIVATE_READS)
    assert not new, ("reads of another package's private members (use or add a public name, e.g. in "
                     "context/contracts.py):\n" + "\n".join(f"{f}: {n}" for f, n in new))
    gone = sorted(KNOWN_PRIVATE_READS - reads)
    assert not gone, "fixed sites still in KNOWN_PRIVATE_READS (remove them):\n" + "\n".join(map(str, gone))


def test_no_relative_imports():
    found = [f"{path.relative_to(SRC)}:{node.lineno}" for path, tree in _sources().items()
             for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert not found, "relative imports (write the absolute tpustrategy._src path):\n" + "\n".join(found)


def _is_public_package(module: str) -> bool:
    return module == "tpustrategy" or (module.startswith("tpustrategy.") and not module.startswith("tpustrategy._src"))


def test_src_does_not_import_the_public_package():
    found = set()
    for path, tree in _sources().items():
        for node in ast.walk(tree):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                       else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(_is_public_package(m) for m in modules):
                found.add(str(path.relative_to(SRC)))
    new = sorted(found - KNOWN_PUBLIC_IMPORTS)
    assert not new, "tpustrategy/_src modules importing the public package (import _src):\n" + "\n".join(new)
    assert not KNOWN_PUBLIC_IMPORTS - found, f"fixed: remove {sorted(KNOWN_PUBLIC_IMPORTS - found)}"


def _static_prefix(arg: ast.AST) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value)
    return None


def test_modules_are_loaded_by_name_only_from_the_declared_tables():
    found = []
    for path, tree in _sources().items():
        rel = str(path.relative_to(SRC))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name not in ("import_module", "__import__"):
                continue
            prefix = _static_prefix(node.args[0])
            ours_or_unknown = prefix is None or prefix.startswith("tpustrategy")
            if ours_or_unknown and rel not in LOADS_BY_NAME:
                found.append(f"{rel}:{node.lineno}")
    assert not found, ("modules loaded by a computed name outside LOADS_BY_NAME (import them, or "
                       "declare the table here with its reason):\n" + "\n".join(found))


def _module_graph() -> dict[str, set[str]]:
    def name(path: pathlib.Path) -> str:
        parts = list(path.relative_to(SRC.parent.parent).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    sources = _sources()
    modules = {name(p) for p in sources}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for path, tree in sources.items():
        me = name(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[me].update(t for t in targets if t in modules and t != me)
    return graph


def _circles_by_package() -> dict[str, list[list[str]]]:
    graph = _module_graph()

    def package(m: str) -> str:
        parts = m.split(".")
        return parts[2] if len(parts) > 2 else ""

    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: dict[str, list[list[str]]] = {}

    def visit(v: str) -> None:  # Tarjan's strongly connected components, inside one package
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if package(w) != package(v):
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.setdefault(package(v), []).append(sorted(component))

    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return circles


def test_circles_inside_a_package_are_only_the_allowed_ones():
    circles = _circles_by_package()
    new = {p: c for p, c in circles.items() if p not in ALLOWED_CIRCLES}
    assert not new, "import circles inside a package (break them, or allow one with its reason):\n" + "\n".join(
        f"{p}: {c}" for p, c in new.items())
    assert not set(ALLOWED_CIRCLES) - set(circles), f"broken: remove {sorted(set(ALLOWED_CIRCLES) - set(circles))}"
