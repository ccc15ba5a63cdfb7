"""Inline code naming a public name links to its API entry, in every page.

`` `tps.TPUStrategy` ``, `` `tpsd.Dataset.map` ``, `` `strategy.run` ``, `` `Dataset.window` `` and
TensorFlow's `` `tf.distribute.TPUStrategy` `` (through the API reference's TensorFlow names) become
cross-references to the entry of our name, so the guides and the rename tables link to the API
without link markup. Text that names nothing of ours stays plain code.
"""

from __future__ import annotations

import importlib
import re
import sys
import types

import tps_apigen
from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform

# A class written alone before a member (`Dataset.window`, `strategy.run`) -> its public path.
_CLASS_ALIASES = {
    "strategy": ("tpustrategy.Strategy", "tpustrategy.TPUStrategy"),
    "strategy.extended": "tpustrategy.StrategyExtended",
    "extended": "tpustrategy.StrategyExtended",
    "ctx": "tpustrategy.InputContext",
    "optimizer": "tpustrategy.optimizers.Optimizer",
    "ckpt": "tpustrategy.train.Checkpoint",
    "manager": "tpustrategy.train.CheckpointManager",
    "handler": "tpustrategy.experimental.PreemptionCheckpointHandler",
    "v": "tpustrategy.Variable",
}


def _exists(path: str) -> bool:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except Exception:  # noqa: BLE001 - a placeholder raises on attribute access; a property may too
            return False
        return True
    return False


class Resolver:
    def __init__(self) -> None:
        self.tf_to_ours: dict[str, str] = {}
        self.short_classes: dict[str, str] = {}
        for full, tf in tps_apigen.TF_OF.items():
            if tf:
                self.tf_to_ours.setdefault(tf, full)
            name = full.rsplit(".", 1)[1]
            if name[:1].isupper():
                self.short_classes.setdefault(name, full)
        self.cache: dict[str, str | None] = {}

    def target(self, text: str, owner: str | None = None, module: str | None = None) -> str | None:
        """The public path ``text`` names; a bare name is looked up on ``owner`` (a class), then ``module``."""
        m = re.match(r"[A-Za-z_][\w.]*", text.strip())
        if not m:
            return None
        name = m.group(0).rstrip(".")
        if "." not in name:
            for scope in (owner, module, "tpustrategy.Strategy"):
                if scope and _exists(f"{scope}.{name}"):
                    return f"{scope}.{name}"
            return None
        if name not in self.cache:
            self.cache[name] = self._target(name)
        return self.cache[name]

    def _target(self, name: str) -> str | None:
        candidates = []
        if name.startswith("tpsd.") or name == "tpsd":
            candidates.append("tpustrategy.data" + name[4:])
        elif name.startswith("tps.") or name == "tps":
            candidates.append("tpustrategy" + name[3:])
        elif name.startswith("tpustrategy"):
            candidates.append(name)
        elif name.startswith("tf."):
            parts = name.split(".")
            for cut in range(len(parts), 1, -1):  # tf.Variable.assign -> tps.Variable + .assign
                ours = self.tf_to_ours.get(".".join(parts[:cut]))
                if ours:
                    candidates.append(".".join([ours, *parts[cut:]]))
                    break
        else:
            head, _, rest = name.partition(".")
            for alias in sorted(_CLASS_ALIASES, key=len, reverse=True):
                if name == alias or name.startswith(alias + "."):
                    owners = _CLASS_ALIASES[alias]
                    for owner in (owners,) if isinstance(owners, str) else owners:
                        candidates.append(owner + name[len(alias):])
                    break
            else:
                if rest and head in self.short_classes:
                    candidates.append(f"{self.short_classes[head]}.{rest}")
        for candidate in candidates:
            if candidate.count(".") and _exists(candidate):
                return candidate
        return None


_RESOLVER: Resolver | None = None


class AutoLink(SphinxTransform):
    default_priority = 5  # before the references are resolved

    def apply(self) -> None:
        global _RESOLVER
        if _RESOLVER is None:
            _RESOLVER = Resolver()
        resolver = _RESOLVER
        owners: dict[int, str] = {}  # a paragraph or cell -> the class its last linked member belonged to
        modules: dict[int, str] = {}  # ... and the module of its last linked module-level name
        for node in list(self.document.findall(nodes.literal)):
            if isinstance(node.parent, (nodes.reference, addnodes.pending_xref, nodes.title, addnodes.desc_signature)):
                continue
            if any(isinstance(a, (nodes.title, addnodes.desc_signature, nodes.literal_block)) for a in _ancestors(node)):
                continue
            block = node.parent
            while block is not None and not isinstance(block, (nodes.paragraph, nodes.entry)):
                block = block.parent
            target = resolver.target(node.astext(), owners.get(id(block)), modules.get(id(block)))
            if target is None:
                continue
            owner, _, member = target.rpartition(".")
            if owner and owner.rsplit(".", 1)[-1][:1].isupper() and not member[:1].isupper():
                owners[id(block)] = owner
            elif owner in sys.modules and isinstance(sys.modules[owner], types.ModuleType):
                modules[id(block)] = owner
            ref = addnodes.pending_xref("", refdomain="py", reftype="obj", reftarget=target, refexplicit=True,
                                        refwarn=False, refdoc=self.env.docname)
            ref["py:module"] = None
            ref["py:class"] = None
            ref += node.deepcopy()
            node.replace_self(ref)


def _ancestors(node: nodes.Node):  # noqa: ANN202
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def setup(app):  # noqa: ANN001, ANN201
    app.add_transform(AutoLink)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
