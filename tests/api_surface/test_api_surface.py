"""TensorFlow 2.21's public names, looked up under their renamed tpustrategy paths.

``tf_api_surface_2.21.json`` (made by ``tools/make_api_surface.py`` from
TensorFlow's own ``dir()``) lists, for each module and class a TPU program uses,
its members and its renamed path. Every member that is not TF1-era must exist
here, or be a row of README's "TensorFlow names we do not have" table, whose
names exist as placeholders that raise an error naming the row. A row for a
name we do have is stale. Public modules export only public names.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import pathlib
import pkgutil
import re
import types

import jax
import pytest

import tpustrategy as tps
import tpustrategy.data as tpsd
from tpustrategy._src.not_provided import NotProvided, NotProvidedError, NotProvidedMember

ROOT = pathlib.Path(__file__).resolve().parents[2]
SURFACE = json.loads((pathlib.Path(__file__).parent / "tf_api_surface_2.21.json").read_text())
ENTRIES = {name: entry for name, entry in SURFACE.items() if not name.startswith("_")}
TABLE_HEADING = "## TensorFlow names we do not have"

# The input-pipeline op modules of issue 39, built by parallel sessions. Their README rows do not exist
# yet, so they are checked here without the table: every TensorFlow member is present, or a
# placeholder (NotProvided) naming it with a reason. Add ("tf.io", "tps.io"), ("tf.io.gfile",
# "tps.io.gfile") and ("tf.image", "tps.image") when those modules land; once README has their rows,
# move the modules to the table check (drop them from INPUT_OP_MODULES).
INPUT_OP_MODULES = ("tf.io", "tf.io.gfile", "tf.image", "tf.strings", "tf.sparse")
INPUT_OP_MODULES_CHECKED = (("tf.strings", "tps.strings"), ("tf.sparse", "tps.sparse"), ("tf.io", "tps.io"),
                            ("tf.io.gfile", "tps.io.gfile"), ("tf.image", "tps.image"))


def _entry_params() -> list[object]:
    return [name for name in ENTRIES if name not in INPUT_OP_MODULES]


def table_rows() -> dict[str, str]:
    """``{TensorFlow name: the row's line}`` of README's table (a row may name several, in backticks)."""
    text = (ROOT / "README.md").read_text()
    assert TABLE_HEADING in text, f"README.md has no section {TABLE_HEADING!r}"
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert lines and [c.strip() for c in lines[0].strip("|").split("|")] == [
        "TensorFlow name", "why not", "use instead"], f"the table's header row is {lines[:1]}"
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        assert len(cells) == 3 and all(cells), f"README table row needs three non-empty cells: {line!r}"
        for name in re.findall(r"`([^`]+)`", cells[0]) or [cells[0]]:
            assert name.startswith("tf."), f"README table row names {name!r}; write TensorFlow's full name"
            assert name not in rows, f"README table names {name!r} twice"
            rows[name] = line
    return rows


def _tables_entry(tf_name: str) -> tuple[str, str] | None:
    """``(entry, member)`` of the surface an README row's name belongs to (the longest entry prefix)."""
    for entry in sorted(ENTRIES, key=len, reverse=True):
        if tf_name.startswith(entry + "."):
            return entry, tf_name[len(entry) + 1:]
    return None


@pytest.fixture(scope="module")
def namespace() -> dict[str, object]:
    strategy = tps.MirroredStrategy(devices=jax.devices()[:2])
    return {"tps": tps, "tpsd": tpsd, "strategy": strategy, "ds": tpsd.Dataset.range(8).batch(4)}


def resolve(renamed: str, namespace: dict[str, object]) -> object:
    """The object a renamed path names (a dotted path, or an expression of ``tps``, ``strategy``, ...)."""
    return eval(renamed, {"__builtins__": {"iter": iter}}, dict(namespace))  # noqa: S307 - our own data file


_MISSING = object()


def lookup(obj: object, name: str) -> object:
    """``obj``'s member ``name`` without running properties or placeholders; ``_MISSING`` if absent."""
    if isinstance(obj, types.ModuleType):
        try:
            return getattr(obj, name)  # runs the lazy loader; a placeholder is returned, not raised
        except AttributeError:
            return _MISSING
    try:
        return inspect.getattr_static(obj, name)
    except AttributeError:
        pass
    cls = obj if isinstance(obj, type) else type(obj)
    if dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}:
        return getattr(obj, name, None)
    for klass in cls.__mro__:  # instance attributes declared on the class
        if name in getattr(klass, "__annotations__", {}) or name in getattr(klass, "__slots__", ()):
            return None
    return _MISSING


def is_placeholder(value: object) -> bool:
    return isinstance(value, (NotProvided, NotProvidedMember))


@pytest.mark.parametrize("entry", _entry_params())
def test_every_tensorflow_name_exists_or_is_in_the_table(entry, namespace):
    rows = table_rows()
    spec = ENTRIES[entry]
    obj = resolve(spec["renamed"], namespace)
    missing, stale = [], []
    for member in spec["members"]:
        tf_name = f"{entry}.{member}"
        value = lookup(obj, member)
        real = value is not _MISSING and not is_placeholder(value)
        if not real and tf_name not in rows:
            missing.append(f"{spec['renamed']}.{member}  ({tf_name})")
        if real and tf_name in rows:
            stale.append(tf_name)
    assert not missing and not stale, (
        f"{entry} -> {spec['renamed']}:\n"
        + (f"{len(missing)} TensorFlow name(s) neither present nor in README {TABLE_HEADING!r}:\n  "
           + "\n  ".join(missing) + "\n" if missing else "")
        + (f"{len(stale)} README row(s) for names that exist (remove the rows):\n  " + "\n  ".join(stale)
           if stale else "")
    )


@pytest.mark.parametrize("entry, renamed", INPUT_OP_MODULES_CHECKED)
def test_every_input_op_name_exists_or_is_a_placeholder_with_a_reason(entry, renamed, namespace):
    spec = ENTRIES[entry]
    assert spec["renamed"] == renamed
    obj = resolve(renamed, namespace)
    missing, unexplained = [], []
    for member in spec["members"]:
        value = lookup(obj, member)
        if value is _MISSING:
            missing.append(f"{renamed}.{member}  ({entry}.{member})")
        elif is_placeholder(value) and (value.tf_name != f"{entry}.{member}" or not value.reason or not value.instead):
            unexplained.append(f"{renamed}.{member}: placeholder {value!r}")
    assert not missing and not unexplained, (
        f"{entry} -> {renamed}:\n{len(missing)} TensorFlow name(s) neither present nor a placeholder:\n  "
        + "\n  ".join(missing) + "\n" + "\n".join(unexplained))


def _row_params() -> list[object]:
    return list(table_rows())


@pytest.mark.parametrize("tf_name", _row_params())
def test_every_table_row_is_a_name_that_raises_naming_its_row(tf_name, namespace):
    owner = _tables_entry(tf_name)
    assert owner is not None, f"README row {tf_name!r} is not a member of any module or class in the surface data"
    entry, member = owner
    obj = resolve(ENTRIES[entry]["renamed"], namespace)
    value = lookup(obj, member)
    assert is_placeholder(value), (
        f"README row {tf_name!r}: {ENTRIES[entry]['renamed']}.{member} must exist as a placeholder "
        f"(tpustrategy._src.not_provided.NotProvided / NotProvidedMember) that raises naming the row; "
        f"found {value if value is not _MISSING else 'nothing'!r}")
    assert value.tf_name == tf_name
    with pytest.raises(NotProvidedError, match=re.escape(repr(tf_name))):
        if isinstance(value, NotProvidedMember):
            getattr(obj if not isinstance(obj, type) else object.__new__(obj), member)
        else:
            value()


def test_the_table_sits_after_where_we_differ():
    text = (ROOT / "README.md").read_text()
    assert text.index("## Where we differ from TensorFlow (on purpose)") < text.index(TABLE_HEADING)


def test_a_placeholder_raises_on_call_and_attribute_but_not_for_dunders():
    p = NotProvided("tf.x.y", "it is a graph-mode name.", "tps.z")
    for use in (lambda: p(), lambda: p.anything, lambda: setattr(p, "a", 1)):
        with pytest.raises(NotProvidedError, match=r"tf\.x\.y has no counterpart in tpustrategy: it is a graph"):
            use()
    with pytest.raises(AttributeError):
        p.__wrapped__  # noqa: B018 - inspect and copy must see an ordinary object
    assert "Use instead: tps.z" in str(p.error()) and "TensorFlow names we do not have" in str(p.error())


# --- public modules export only public names ---------------------------------------------------------


def _public_packages() -> list[str]:
    names = ["tpustrategy"]
    for info in pkgutil.walk_packages(tps.__path__, "tpustrategy."):
        if info.ispkg and "._" not in info.name and not info.name.split(".")[-1].startswith("_"):
            names.append(info.name)
    return sorted(names)


def declared_exports(module: types.ModuleType) -> set[str]:
    """Names a public ``__init__`` declares: ``from x import Y as Y`` (or ``as Z``), the lazy table, assignments."""
    tree = ast.parse(pathlib.Path(module.__file__).read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names |= {a.asname for a in node.names if a.asname}  # `Y as Y`, or TF's other name `Y as Z`
        elif isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.asname and a.name.endswith("." + a.asname)}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names.add(target.id)
                    if target.id in ("_LAZY", "_SUBMODULES") and node.value is not None:
                        value = ast.literal_eval(node.value)
                        names |= set(value)
    return names


@pytest.mark.parametrize("package", _public_packages())
def test_public_modules_export_only_public_names(package):
    module = importlib.import_module(package)
    declared = declared_exports(module)
    leaked = []
    for name in dir(module):
        if name.startswith("_"):
            continue
        value = getattr(module, name)
        if isinstance(value, types.ModuleType) and value.__name__ == f"{package}.{name}":
            continue  # a sub-package, bound by importing it
        if name not in declared:
            leaked.append(f"{package}.{name} ({type(value).__name__})")
    assert not leaked, (
        "public modules must export only their public names (re-exports in the `from x import Y as Y` form or "
        "the lazy table); these are helpers: " + ", ".join(leaked)
        + ". Fix: import them under a private name (`from typing import TYPE_CHECKING as _TYPE_CHECKING`) "
        "or drop the import.")


@pytest.mark.parametrize("name", ["annotations", "TYPE_CHECKING", "loader"])
@pytest.mark.parametrize("package", ["tpustrategy", "tpustrategy.experimental"])
def test_the_helpers_the_issue_names_are_not_attributes(package, name):
    assert not hasattr(importlib.import_module(package), name)


def test_every_registered_placeholder_has_its_row_with_the_same_reason():
    from tpustrategy._src.not_provided import REASONS

    rows = table_rows()
    for name, (reason, instead) in REASONS.items():
        assert name in rows, f"{name} has a placeholder (not_provided.REASONS) but no README row"
        _, why, use = [c.strip() for c in rows[name].strip().strip("|").split("|")]
        assert (why, use) == (reason, instead), f"README row {name!r} differs from not_provided.REASONS"
