"""TensorFlow's error for per-replica values that cannot be concatenated (gather, all_gather).

Used by ``strategy.gather``, ``ReplicaContext.all_gather`` on the eager path and the
multi-host gather of host-built values, so it lives below all three.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.errors import InvalidArgumentError


def shape_mismatch_error(api: str, shapes: Any, axis: Any) -> InvalidArgumentError | None:
    """TensorFlow's error when per-replica values of ``shapes`` cannot be concatenated along ``axis``.

    Returns None when they can. The message holds the phrases of TensorFlow's
    concat and collective errors ("Shape mismatch", "Ranks of all input tensors
    should match", "Shape must be rank r but is rank s", "Dimension d in both
    shapes must be equal"), which programs and tests match on.
    """
    shapes = [tuple(int(d) for d in s) for s in shapes]
    first = shapes[0]
    for i, s in enumerate(shapes[1:], start=1):
        if len(s) != len(first):
            return InvalidArgumentError(
                f"{api}: Shape mismatch: Ranks of all input tensors should match: replica 0 has shape "
                f"{list(first)} and replica {i} has shape {list(s)} (Shape must be rank {len(first)} but is "
                f"rank {len(s)}).\nFix: give every replica's value the same rank (reshape it, or add an "
                "axis with x[None])."
            )
    if not first or not isinstance(axis, (int, np.integer)) or not -len(first) <= axis < len(first):
        return None  # the axis check names what is wrong with it
    a = int(axis) % len(first)
    for i, s in enumerate(shapes[1:], start=1):
        for d, (x, y) in enumerate(zip(first, s)):
            if d != a and x != y:
                return InvalidArgumentError(
                    f"{api}: Shape mismatch: Dimension {d} in both shapes must be equal, but are {x} and {y}: "
                    f"replica 0 has shape {list(first)} and replica {i} has shape {list(s)}; per-replica "
                    f"values may differ only along the gathered axis {a}.\nFix: make the replicas' values "
                    f"equal in every dimension but axis {a} (pad or slice them), or gather along the "
                    "dimension that differs."
                )
    return None
