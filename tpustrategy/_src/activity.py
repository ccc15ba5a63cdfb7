"""Whether anything that changes how a call runs is active, on any thread.

Three things make a ``strategy.run`` or ``tps.function`` call take more than its
cached program: a trace frame (``variables.frames.active``), a context entry (a
scope, a replica context, a strategy's cross-replica entry: ``context.stack.push``),
and functions forced eager (``config.run_functions_eagerly(True)``). Each adds one
item to ``ANY`` while it lasts and takes it off after, so an empty ``ANY`` — the
common case of a training loop — tells the per-call fast paths, with one read, that
none of the finer checks (thread-local stacks, the eager switch) can change the
answer. ``list.append`` / ``pop`` are atomic under the GIL: threads may enter and
leave concurrently. Hot paths bind the list itself (``from tpustrategy._src.activity
import ANY``) and test ``if not ANY``.
"""

from __future__ import annotations

ANY: list[None] = []


def enter() -> None:
    ANY.append(None)


def leave() -> None:
    ANY.pop()
