"""Walking and rewriting the dataset graph.

A dataset graph is a DAG of `Dataset` nodes linked by ``inputs``. `walk`
visits every node once, outputs first; `rewrite` rebuilds the graph bottom-up
through a user function, copying only the nodes above a change. The auto-shard
pass uses these to find readers (``node.is_reader``) and to insert a ``shard``
on their ``filenames`` or to resize a ``batch``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from tpustrategy._src.data.core.dataset import Dataset


def walk(dataset: Dataset) -> Iterator[Dataset]:
    """Yields every node reachable from ``dataset`` (depth first, outputs first)."""
    seen: set[int] = set()
    stack = [dataset]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed(node.inputs))


def rewrite(dataset: Dataset, fn: Callable[[Dataset], Dataset | None]) -> Dataset:
    """Rebuilds the graph bottom-up; ``fn(node)`` returns a replacement or None.

    ``fn`` sees each node after its inputs were rewritten. Nodes whose inputs
    did not change and for which ``fn`` returns None are kept as they are.

    Example:
      >>> def shard_files(node):
      ...     if node.is_reader:
      ...         return node.with_inputs(node.filenames.shard(2, 0))
      >>> rewrite(ds, shard_files)
    """
    memo: dict[int, Dataset] = {}

    def visit(node: Dataset) -> Dataset:
        key = id(node)
        if key in memo:
            return memo[key]
        new_inputs = tuple(visit(i) for i in node.inputs)
        current = node
        if any(a is not b for a, b in zip(new_inputs, node.inputs)):
            current = node.with_inputs(*new_inputs)
        replaced = fn(current)
        out = current if replaced is None else replaced
        memo[key] = out
        return out

    return visit(dataset)


def find_readers(dataset: Dataset) -> list[Dataset]:
    """The reader nodes (``is_reader``) reachable through ``inputs``."""
    return [n for n in walk(dataset) if n.is_reader]
