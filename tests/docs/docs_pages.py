"""The docs pages' Python blocks, with the markers that say how each is run.

A block runs in a fresh process. A block preceded by ``<!-- docs-test: continues -->`` runs
after the blocks before it (their code first, in one process); one preceded by
``<!-- docs-test: skip (reason) -->`` is not run here: the reason names what it needs (several
processes, files written by TensorFlow) and the test that runs it instead.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# Generated (api/), built (_build/), or notes for the lead (pending/): not pages with examples.
NOT_PAGES = ("_build", "api", "pending", "_generated", "_ext")

_FENCE = re.compile(
    r"(?P<marker><!--\s*docs-test:\s*(?P<kind>skip|continues)\s*(?:\((?P<reason>.*?)\))?\s*-->\s*\n)?"
    r"(?P<indent>[ \t]*)```python[^\n]*\n(?P<code>.*?)\n(?P=indent)```",
    re.S,
)


@dataclasses.dataclass(frozen=True)
class Block:
    page: str      # relative to the repository root
    line: int      # of the opening fence
    code: str      # what runs: the block, after the blocks it continues
    skip: str | None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[pathlib.Path]:
    return sorted(p for p in DOCS.rglob("*.md") if not set(p.relative_to(DOCS).parts) & set(NOT_PAGES))


def blocks(path: pathlib.Path) -> list[Block]:
    text = path.read_text()
    out: list[Block] = []
    chain = ""
    for m in _FENCE.finditer(text):
        indent = m.group("indent")
        code = "\n".join(line[len(indent):] if line.startswith(indent) else line
                         for line in m.group("code").splitlines()) + "\n"
        line = text.count("\n", 0, m.start("indent")) + 1
        kind = m.group("kind")
        if kind == "skip":
            reason = (m.group("reason") or "").strip()
            if not reason:
                raise ValueError(f"{path}:{line}: a skipped block must say why: <!-- docs-test: skip (reason) -->")
            out.append(Block(str(path.relative_to(ROOT)), line, code, reason))
            continue
        chain = chain + code if kind == "continues" else code
        out.append(Block(str(path.relative_to(ROOT)), line, chain, None))
    return out


def all_blocks() -> list[Block]:
    return [b for p in pages() for b in blocks(p)]
