"""What the execution core needs of a strategy: ``context.contracts.StrategyContract``.

The execution package sits below ``strategy/`` (tests/test_package_graph.py): it builds
and calls programs over a strategy's mesh and never imports the user-facing classes. The
contract is defined once, at the bottom of the package graph; ``ReplicaStrategy`` is the
execution core's name for it.
"""

from __future__ import annotations

from tpustrategy._src.context.contracts import StrategyContract as ReplicaStrategy

__all__ = ["ReplicaStrategy"]
