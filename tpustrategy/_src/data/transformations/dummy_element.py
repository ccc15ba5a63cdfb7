"""Placeholder elements of a spec, for tracing a dataset function once to learn its output spec.

`map`, `flat_map`, `scan` and `group_by_reducer` call the user's function on
such an element (with two sizes for unknown dimensions, so that a dimension
that follows the input's stays unknown). A dataset-valued leaf (``window``'s
elements) becomes an empty `WindowContent` of that spec, which is why this
lives with the transformations and not in ``core.structure``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpustrategy._src.data.core.structure import OBJECT, TensorSpec, map_structure
from tpustrategy._src.data.transformations.window import WindowContent


def dummy_element(spec: Any, unknown: int, fill: int = 0) -> Any:
    """Placeholder values shaped like ``spec``, ``unknown`` for None dimensions.

    Numbers are ``fill``; strings are ``b""`` for fill 0 and ``fill`` bytes
    of ``\\x01`` otherwise.
    """

    def make(s: TensorSpec) -> Any:
        if not isinstance(s, TensorSpec) and hasattr(s, "element_spec"):
            # A dataset-valued leaf (window): an empty dataset of that spec.
            return WindowContent([], s.element_spec)
        shape = tuple(unknown if d is None else d for d in s.shape)
        if s.dtype == OBJECT:
            text = b"\x01" * fill
            if not shape:
                return text
            out = np.empty(shape, dtype=OBJECT)
            out.reshape(-1)[:] = [text] * out.size
            return out
        return s.dtype.type(fill) if not shape else np.full(shape, fill, s.dtype)

    return map_structure(make, spec)
