"""The API reference, generated at every build from the package itself.

Every public module is found from ``tpustrategy._SUBMODULES`` (walking their public
sub-packages), every public name from the module's ``dir()`` (which lists the lazily
loaded ``_LAZY`` names too), so a new module or name appears without editing the docs.
Each name gets an autodoc entry (its docstring) and TensorFlow's name beside ours, found in
``tests/api_surface/tf_api_surface_2.21.json`` (TensorFlow's own ``dir()``, with the
renamed path of each module and class) or in the porting guide's rename tables.

The pages are written to ``docs/api/`` (ignored by git) before Sphinx reads the sources.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import pathlib
import pkgutil
import re
import types
from dataclasses import dataclass

DOCS = pathlib.Path(__file__).resolve().parents[1]
ROOT = DOCS.parent
SURFACE = ROOT / "tests" / "api_surface" / "tf_api_surface_2.21.json"
PORTING = DOCS / "porting.md"

# Our module -> the TensorFlow modules its names may come from (checked against TensorFlow's names).
TF_MODULES: dict[str, tuple[str, ...]] = {
    "tpustrategy": ("tf.distribute", "tf"),
    "tpustrategy.experimental": ("tf.distribute.experimental",),
    "tpustrategy.cluster_resolver": ("tf.distribute.cluster_resolver",),
    "tpustrategy.data": ("tf.data", "tf.data.experimental", "tf.train", "tf.io"),
    "tpustrategy.data.experimental": ("tf.data.experimental",),
    "tpustrategy.train": ("tf.train", "tf.distribute.experimental"),
    "tpustrategy.metrics": ("tf.keras.metrics",),
    "tpustrategy.optimizers": ("tf.keras.optimizers",),
    "tpustrategy.nn": ("tf.nn",),
    "tpustrategy.lookup": ("tf.lookup",),
    "tpustrategy.errors": ("tf.errors",),
    "tpustrategy.tpu": ("tf.tpu", "tf.tpu.experimental"),
    "tpustrategy.tpu.experimental": ("tf.tpu.experimental",),
    "tpustrategy.config": ("tf.config",),
    "tpustrategy.config.experimental": ("tf.config.experimental",),
    "tpustrategy.config.threading": ("tf.config.threading",),
}


def short(module: str) -> str:
    """``tpustrategy.data.experimental`` -> ``tpsd.experimental``; ``tpustrategy.train`` -> ``tps.train``."""
    if module == "tpustrategy.data" or module.startswith("tpustrategy.data."):
        return "tpsd" + module[len("tpustrategy.data"):]
    return "tps" + module[len("tpustrategy"):]


def public_modules() -> list[str]:
    """``tpustrategy`` and every public (sub-)package reachable from its ``_SUBMODULES``."""
    import tpustrategy

    found: list[str] = ["tpustrategy"]

    def walk(name: str) -> None:
        if name in found:
            return
        found.append(name)
        module = importlib.import_module(name)
        for info in pkgutil.iter_modules(getattr(module, "__path__", [])):
            if info.ispkg and not info.name.startswith("_"):
                walk(f"{name}.{info.name}")

    for sub in tpustrategy._SUBMODULES:
        walk(f"tpustrategy.{sub}")
    return found


def public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    return sorted(
        n for n in dir(module)
        if not n.startswith("_") and not isinstance(getattr(module, n), types.ModuleType)
    )


def tensorflow_names() -> set[str]:
    """TensorFlow's names we know of: the surface data's members and the porting guide's tables."""
    names: set[str] = set()
    surface = json.loads(SURFACE.read_text())
    for entry, spec in surface.items():
        if not entry.startswith("_"):
            names.add(entry)
            names.update(f"{entry}.{m}" for m in spec["members"])
    if PORTING.exists():
        for line in PORTING.read_text().splitlines():
            if not line.startswith("| `tf") and not line.startswith("| the `tf"):
                continue
            first = re.split(r"(?<!\\)\|", line)[1]  # `\|` is a pipe inside a cell
            prefix = None
            for token in re.findall(r"`([^`]+)`", first):
                token = token.split("(")[0].strip()
                if token.startswith("tf."):
                    names.add(token)
                    prefix = token.rsplit(".", 1)[0]
                elif prefix and re.fullmatch(r"[A-Za-z_]\w*", token):
                    names.add(f"{prefix}.{token}")
    return names


def tensorflow_name(module_name: str, name: str, known: set[str], surface_map: dict[str, str]) -> str | None:
    full = f"{module_name}.{name}"
    if full in surface_map:
        return surface_map[full]
    # A module not listed (a new tps.io, tps.image, ...) is looked up under tf.<the same path>.
    default = ("tf" + module_name[len("tpustrategy"):],)
    for tf_module in TF_MODULES.get(module_name, default):
        candidate = f"{tf_module}.{name}"
        if candidate in known:
            return candidate
    return None


def surface_renames() -> dict[str, str]:
    """``{our full name: TensorFlow's}`` from the surface data's renamed paths."""
    out: dict[str, str] = {}
    surface = json.loads(SURFACE.read_text())
    for entry, spec in surface.items():
        if entry.startswith("_"):
            continue
        renamed = spec["renamed"]
        if not re.fullmatch(r"tpsd?(\.\w+)*", renamed):
            continue  # an expression (an instance's type): not a public path
        ours = "tpustrategy.data" + renamed[4:] if renamed.startswith("tpsd") else "tpustrategy" + renamed[3:]
        out.setdefault(ours, entry)
        for member in spec["members"]:
            out.setdefault(f"{ours}.{member}", f"{entry}.{member}")
    return out


@dataclass
class Entry:
    module: str
    name: str
    obj: object
    tf_name: str | None
    alias_of: str | None  # the full name this object is documented under, when not here

    @property
    def full(self) -> str:
        return f"{self.module}.{self.name}"


def _is_placeholder(obj: object) -> bool:
    return type(obj).__name__ in ("NotProvided", "NotProvidedMember")


def _is_proto(obj: object) -> bool:
    return isinstance(obj, type) and type(obj).__name__ in ("MessageMeta", "GeneratedProtocolMessageType")


def collect() -> dict[str, list[Entry]]:
    known = tensorflow_names()
    surface_map = surface_renames()
    documented: dict[int, str] = {}
    pages: dict[str, list[Entry]] = {}
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        entries = []
        for name in public_names(module_name):
            obj = getattr(module, name)
            full = f"{module_name}.{name}"
            alias_of = None
            if isinstance(obj, (type, types.FunctionType)) or callable(obj) and not _is_placeholder(obj):
                alias_of = documented.setdefault(id(obj), full)
                if alias_of == full:
                    alias_of = None
            entries.append(Entry(module_name, name, obj, tensorflow_name(module_name, name, known, surface_map),
                                 alias_of))
        pages[module_name] = entries
    return pages


def _summary(obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    if isinstance(obj, (int, float, str, bool)) or not doc:
        return ""
    line = doc.strip().split("\n\n")[0].replace("\n", " ")
    sentence = re.match(r"(.+?[.;])(\s|$)", line)  # the first sentence
    line = sentence.group(1) if sentence and len(sentence.group(1)) < len(line) else line
    if len(line) > 160 or line.count("`") % 2:
        line = line[:157].rsplit(" ", 1)[0] + " …" if len(line) > 160 else line
        if line.count("``") % 2 or line.replace("``", "").count("`") % 2:
            line = re.sub(r"`+", "", line)  # a code span cut in half would swallow the row
    return line.replace("|", "\\|")


def _role(entry: Entry) -> str:
    obj = entry.obj
    if _is_placeholder(obj) or not callable(obj):
        return "py:data"
    if isinstance(obj, type):
        return "py:exc" if issubclass(obj, BaseException) else "py:class"
    return "py:func"


def _plain(text: str) -> str:
    """``text`` as reStructuredText that shows it as written (``lower(*args)`` is no emphasis)."""
    return re.sub(r"([\\*`|]|_(?!\w))", r"\\\1", str(text))


def _rst_entry(entry: Entry) -> list[str]:
    obj, full = entry.obj, entry.full
    here = entry.name  # hand-written directives sit under the page's ``py:module``
    tf = f"TensorFlow: ``{entry.tf_name}``." if entry.tf_name else "TensorFlow: no counterpart (ours only)."
    if _is_placeholder(obj):
        get = object.__getattribute__
        return [f".. py:data:: {here}", "", f"   TensorFlow: ``{get(obj, 'tf_name')}`` — **not provided**.",
                "", f"   Why not: {_plain(get(obj, 'reason'))}", "",
                f"   Use instead: {_plain(get(obj, 'instead'))}", ""]
    if entry.alias_of:
        kind = {"py:class": "py:class", "py:exc": "py:exception", "py:func": "py:function"}.get(_role(entry), "py:data")
        target = _role(entry).split(":")[1]
        return [f".. {kind}:: {here}", "", f"   {tf} The same object as :py:{target}:`{entry.alias_of}`.", ""]
    if _is_proto(obj):
        return [f".. py:class:: {here}", "", f"   {tf} The protocol buffer message class (the fields of",
                "   TensorFlow's ``example.proto`` / ``feature.proto``; built with the ``protobuf`` extra).", ""]
    if not callable(obj):
        return [f".. py:data:: {here}", f"   :value: {obj!r}", "", f"   {tf}", ""]
    if isinstance(obj, type):
        directive = "autoexception" if issubclass(obj, BaseException) else "autoclass"
        lines = [f".. {directive}:: {full}", "   :members:", "   :inherited-members:", "   :show-inheritance:"]
        if issubclass(obj, enum.Enum):
            lines.append("   :undoc-members:")
        return lines + [""]
    return [f".. autofunction:: {full}", ""]


def page(module_name: str, entries: list[Entry]) -> str:
    module = importlib.import_module(module_name)
    title = short(module_name)
    doc = (inspect.getdoc(module) or "").strip()
    lines = [f"# `{title}`", "", f"`{module_name}`" + (f" — {doc.splitlines()[0]}" if doc else ""), ""]
    lines += ["```{table}", ":class: api-summary", "", "| tpustrategy | TensorFlow | summary |", "|---|---|---|"]
    for e in entries:
        tf = f"`{e.tf_name}`" if e.tf_name else "—"
        lines.append(f"| {{{_role(e)}}}`{short(e.module)}.{e.name} <{e.full}>` | {tf} | {_summary(e.obj)} |")
    lines += ["```", "", "```{eval-rst}", f".. py:module:: {module_name}", ""]
    for e in entries:
        lines += _rst_entry(e)
    lines += ["```", ""]
    return "\n".join(lines)


def index(pages: dict[str, list[Entry]]) -> str:
    lines = [
        "# API reference", "",
        "Every public name of `tpustrategy` (`import tpustrategy as tps`) and `tpustrategy.data`",
        "(`import tpustrategy.data as tpsd`), generated from the docstrings at each build, with",
        "TensorFlow's name beside ours. The modules are found from the package itself",
        "(`tpustrategy._SUBMODULES`), so a new module appears here without editing the docs.", "",
        "| module | TensorFlow | names |", "|---|---|---|",
    ]
    for module_name, entries in pages.items():
        tf = " / ".join(f"`{m}`" for m in TF_MODULES.get(module_name, ())) or "—"
        lines.append(f"| [`{short(module_name)}`]({module_name}.md) | {tf} | {len(entries)} |")
    lines += ["", "```{toctree}", ":hidden:", ""] + list(pages) + ["```", ""]
    return "\n".join(lines)


def write_pages(out: pathlib.Path) -> list[str]:
    """Writes ``out/index.md`` and one page per module; returns the full names documented."""
    pages = collect()
    out.mkdir(parents=True, exist_ok=True)
    wanted = {"index.md": index(pages)}
    for module_name, entries in pages.items():
        wanted[f"{module_name}.md"] = page(module_name, entries)
    for stale in out.glob("*.md"):
        if stale.name not in wanted:
            stale.unlink()
    for name, text in wanted.items():
        path = out / name
        if not path.exists() or path.read_text() != text:  # unchanged pages stay unchanged: incremental builds
            path.write_text(text)
    return [e.full for entries in pages.values() for e in entries]


TF_OF: dict[str, str | None] = {}


def _builder_inited(app) -> None:  # noqa: ANN001 - Sphinx's application
    pages = collect()
    for entries in pages.values():
        for e in entries:
            TF_OF[e.full] = e.tf_name
    write_pages(DOCS / "api")


def _process_docstring(app, what, name, obj, options, lines) -> None:  # noqa: ANN001
    if name in TF_OF and what in ("class", "exception", "function"):
        tf = TF_OF[name]
        lines[:0] = [f"TensorFlow: ``{tf}``." if tf else "TensorFlow: no counterpart (ours only).", ""]


# docutils' own role and directive lookups, captured before Sphinx patches them while reading
# (docutils comes with Sphinx; the page generator above works without it, for tests/docs).
try:
    from docutils.parsers.rst import directives as _directives
    from docutils.parsers.rst import roles as _roles
except ImportError:  # pragma: no cover - only the Sphinx build needs it
    _directives = _roles = None  # type: ignore[assignment]
else:
    _DOCUTILS_ROLE, _DOCUTILS_DIRECTIVE = _roles.role, _directives.directive
_RAW: dict[tuple[str, str], list[str]] = {}
FALLBACKS: set[str] = set()  # docstrings shown as written: listed in _build/docstring-fallbacks.txt
_SPHINX_ONLY = ("Unknown interpreted text role", "Unknown directive type", "No role entry", "No directive entry",
                'Trying "', "No Python role", "Unknown target name")


def docutils_problems(text: str) -> list[str]:
    """The docutils warnings and errors a reStructuredText docstring raises (Sphinx's own roles aside)."""
    import io

    import docutils.core
    import docutils.utils

    patched = _roles.role, _directives.directive
    _roles.role, _directives.directive = _DOCUTILS_ROLE, _DOCUTILS_DIRECTIVE
    try:
        tree = docutils.core.publish_doctree(
            text, settings_overrides={"report_level": 5, "halt_level": 5, "warning_stream": io.StringIO(),
                                      "file_insertion_enabled": False, "raw_enabled": False})
    finally:
        _roles.role, _directives.directive = patched
    problems = []
    for node in tree.findall(docutils.nodes.system_message):
        message = node.astext()
        if node["level"] >= 2 and not any(s in message for s in _SPHINX_ONLY):
            problems.append(message.splitlines()[0] if message else "")
    return problems


def _keep_raw(app, what, name, obj, options, lines) -> None:  # noqa: ANN001
    _RAW[(what, name)] = list(lines)


def _fall_back_to_plain_text(app, what, name, obj, options, lines) -> None:  # noqa: ANN001
    """A docstring that is not valid reStructuredText is shown as written (a literal block), not mangled."""
    raw = _RAW.get((what, name))
    prefix = re.match(r"([^:]*?):(\s|$)", raw[0]) if raw else None
    if what in ("property", "attribute") and prefix and re.search(r"\s", prefix.group(1).strip()):
        # napoleon reads "Logical cores (devices) per replica: 1" as "<type>: <text>": keep the prose.
        lines[:] = raw
    if not lines or not docutils_problems("\n".join(lines)):
        return
    FALLBACKS.add(name)
    raw = raw or list(lines)
    head = [raw[0], ""] if raw and raw[0].startswith("TensorFlow: ") else []
    body = raw[len(head):] if head else raw
    lines[:] = head + ["::", ""] + ["   " + line for line in body] + [""]


def _skip_foreign_members(app, what, name, obj, skip, options):  # noqa: ANN001
    """Inherited members are shown when they are ours (mixins, base strategies), not Python's or protobuf's."""
    target = getattr(obj, "fget", None) or getattr(obj, "__func__", None) or obj
    module = getattr(target, "__module__", None) or ""
    routine = callable(obj) or isinstance(obj, property) or inspect.isdatadescriptor(obj)
    if what in ("class", "exception") and routine and not isinstance(obj, type) and not module.startswith("tpustrategy"):
        return True
    return None


def _list_fallbacks(app, exception) -> None:  # noqa: ANN001
    """Names whose docstring is not valid reStructuredText, for whoever fixes them (after a full build)."""
    if exception is None and FALLBACKS:
        out = pathlib.Path(app.outdir).parent / "docstring-fallbacks.txt"
        out.write_text("".join(f"{name}\n" for name in sorted(FALLBACKS)))


def setup(app):  # noqa: ANN001, ANN201
    app.connect("builder-inited", _builder_inited)
    app.connect("build-finished", _list_fallbacks)
    app.connect("autodoc-skip-member", _skip_foreign_members)
    app.connect("autodoc-process-docstring", _process_docstring, priority=400)
    app.connect("autodoc-process-docstring", _keep_raw, priority=450)  # before napoleon (500)
    app.connect("autodoc-process-docstring", _fall_back_to_plain_text, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
