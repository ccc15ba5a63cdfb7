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
    {"sparse"},
    {"data", "lookup", "values", "io", "strings"},
    {"image"},
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
    "data/core/state_codec.py": "an iterator state names the class it restores",
    "jax_shims/primitives.py": "shim: the JAX modules whose primitives the invariance rules classify, by name (they move between releases)",
    "keras/internals.py": "shim: Keras's private modules by name",
    "keras/patches.py": "shim: Keras's private modules by name",
}

# Import circles between modules of one package, and why they stay.
ALLOWED_CIRCLES = {
    "data": "the fluent API: Dataset's methods return the transformation classes, which are Datasets "
            "(the field's shape; Grain has it too) -- the only one: see FLUENT_MODULES below",
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


def test_private_jax_is_imported_only_by_the_jax_shims():
    # Every private JAX name sits behind one shim in jax_shims/ with a test that fails when it moves
    # (Keras's private names: keras/internals.py and keras/patches.py, checked by their own tests).
    found = []
    for path, tree in _sources().items():
        if path.relative_to(SRC).parts[0] == "jax_shims":
            continue
        for node in ast.walk(tree):
            modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                       else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            # also a module named by a string (importlib.import_module("jax._src.lax.lax"))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and " " not in node.value:
                modules = [node.value]
            # jax.interpreters: JAX's rule tables for custom primitives (jax_shims/rule_tables)
            if any(m in ("jax._src", "jax.interpreters") or m.startswith(("jax._src.", "jaxlib.", "jax.interpreters."))
                   for m in modules):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not found, "private JAX imported outside tpustrategy/_src/jax_shims:\n" + "\n".join(found)


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


# Inside ``data``: subpackages in layers, one declared circle -----------------------------------
DATA = SRC / "data"

# Lower first; a module of ``data`` imports only modules of its own subpackage or of earlier ones.
DATA_LAYERS = ["core", "parallel", "transformations", "sources", "parsing"]

# The one declared circle: `Dataset`'s fluent methods build the node of their transformation or
# source, importing its module inside the method (every such module imports ``core.dataset``).
# Imports inside functions of these modules may go anywhere in ``data``; nothing else may.
FLUENT_MODULES = {"core/dataset.py", "core/dataset_more.py", "core/dataset_sources.py"}

# Imports under ``if TYPE_CHECKING:`` (never run; annotations only) that close a circle.
TYPING_ONLY_EDGES = {
    ("core/iterator.py", "tpustrategy._src.data.core.dataset"),
    ("core/dataset_more.py", "tpustrategy._src.data.core.dataset"),
    ("core/dataset_sources.py", "tpustrategy._src.data.core.dataset"),
}

# Leaves that layers outside ``data`` import (the wire format: checkpoint/tf_format, devices).
DATA_LEAVES = {"parsing/wire.py"}


def _data_imports() -> list[tuple[str, str, int, str]]:
    """``(module file under data/, imported data module, line, kind)``; kind: top, function, typing."""
    modules = {".".join(p.relative_to(SRC.parent.parent).with_suffix("").parts).removesuffix(".__init__")
               for p in DATA.rglob("*.py")}
    found = []
    for path in sorted(DATA.rglob("*.py")):
        rel = str(path.relative_to(DATA))
        tree = ast.parse(path.read_text())
        kinds: dict[int, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for inner in ast.walk(node):
                    kinds.setdefault(id(inner), "function")
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for inner in ast.walk(node):
                    kinds.setdefault(id(inner), "typing")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                targets = [f"{node.module}.{a.name}" for a in node.names]
                targets = [t if t in modules else node.module for t in targets]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in dict.fromkeys(targets):
                if target in modules:
                    found.append((rel, target, node.lineno, kinds.get(id(node), "top")))
    return found


def _subpackage(module: str) -> str:
    parts = module.split(".")  # tpustrategy._src.data.<sub>.<module>
    return parts[3] if len(parts) > 4 else ""


def test_data_modules_live_in_the_declared_subpackages():
    loose = [str(p.relative_to(DATA)) for p in DATA.glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"modules at data/'s top level (put each in one of {DATA_LAYERS}): {loose}"
    subs = {p.name for p in DATA.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert subs == set(DATA_LAYERS), f"data/'s subpackages {sorted(subs)} differ from DATA_LAYERS {DATA_LAYERS}"


def test_data_subpackages_import_only_their_own_or_lower_layers():
    upward = []
    for rel, target, line, kind in _data_imports():
        me = rel.split("/")[0]
        fluent = rel in FLUENT_MODULES and kind == "function"
        if _subpackage(target) and DATA_LAYERS.index(_subpackage(target)) > DATA_LAYERS.index(me) and not fluent:
            upward.append(f"data/{rel}:{line} -> {target} ({kind})")
    assert not upward, "data imports that go up its layers " + str(DATA_LAYERS) + ":\n" + "\n".join(upward)


def test_data_leaves_import_nothing_of_ours():
    for rel in DATA_LEAVES:
        tree = ast.parse((DATA / rel).read_text())
        ours = [ast.unparse(n) for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                and "tpustrategy" in ast.unparse(n)]
        assert not ours, f"data/{rel} is imported from outside data and must stay a leaf: {ours}"


def test_data_has_no_circle_but_the_fluent_methods():
    """Without the fluent methods' in-method imports and the declared typing-only imports, the
    modules of ``data`` form a DAG; both declarations are exact (each typing edge exists)."""
    edges = _data_imports()
    typing_seen = {(rel, target) for rel, target, _, kind in edges if kind == "typing"}
    assert not TYPING_ONLY_EDGES - typing_seen, f"gone: remove {sorted(TYPING_ONLY_EDGES - typing_seen)}"
    graph: dict[str, set[str]] = {}
    for rel, target, _, kind in edges:
        me = "tpustrategy._src.data." + rel.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        if kind == "function" and rel in FLUENT_MODULES:
            continue
        if (rel, target) in TYPING_ONLY_EDGES:
            continue
        if target != me:
            graph.setdefault(me, set()).add(target)
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return path[path.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (circle := visit(v)):
            raise AssertionError("an import circle in data outside the fluent methods:\n  " + " -> ".join(circle))


def test_the_map_of_data_modules_before_the_subpackages_is_exact():
    """``core.module_paths.MOVED`` keeps old iterator states and snapshot fingerprints valid: each flat
    name maps to a module that exists, and every module of data is either mapped or new since."""
    from tpustrategy._src.data.core import module_paths

    now = {".".join(p.relative_to(DATA).with_suffix("").parts) for p in DATA.rglob("*.py") if p.name != "__init__.py"}
    missing = sorted(set(module_paths.MOVED.values()) - now)
    assert not missing, f"MOVED names modules that are gone: {missing}"
    new_since = {"core.module_paths", "parsing.wire", "parsing._batch_scan", "transformations.dummy_element",
                 "core.binding", "parallel.processes", "parallel.parking", "parallel.channel", "parallel.sendable",
                 "transformations.parallel_map", "transformations.calling", "parsing._batch_walk",
                 "parsing._batch_templates", "parsing.dtypes", "parsing.feature_kinds", "parsing.composite",
                 "parsing.sequence_example", "parsing._sequence_walk", "transformations.map_batch",
                 "sources.record_spans", "sources.record_feeds", "parallel.worker"}
    unmapped = sorted(now - set(module_paths.MOVED.values()) - new_since)
    assert not unmapped, f"data modules neither in MOVED nor new since the split: {unmapped}"
    for old, new in module_paths.MOVED.items():
        path = f"tpustrategy._src.data.{new}"
        assert module_paths.stable_module(path) == f"tpustrategy._src.data.{old}"
        assert module_paths.current_module(f"tpustrategy._src.data.{old}") == path
