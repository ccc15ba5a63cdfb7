"""The spec of an element whose leaves are datasets (``window``, ``group_by_window``'s windows).

TensorFlow describes such a leaf with ``tf.data.DatasetSpec(element_spec)``.
`dataset_spec_nest` builds that nest with the package's `DatasetSpec` (from
``dataset_spec.py``, the sources module) when it exists, and with the small
stand-in below otherwise, so ``window(...).element_spec`` always answers.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tpustrategy._src.data.structure import map_structure


@dataclasses.dataclass(frozen=True)
class WindowSpec:
    """The type of a dataset-valued leaf: the spec of the dataset's elements.

    Attributes:
      element_spec: the `TensorSpec` (nest) of the inner dataset's elements.
    """

    element_spec: Any

    def __repr__(self) -> str:
        return f"DatasetSpec({self.element_spec!r})"


def _spec_class() -> Any:
    try:
        from tpustrategy._src.data.dataset_spec import DatasetSpec  # the sources module's class
    except ImportError:
        return WindowSpec
    return DatasetSpec


def dataset_spec_nest(spec: Any) -> Any:
    """``spec`` with every `TensorSpec` leaf replaced by the spec of a dataset of it."""
    cls = _spec_class()
    return map_structure(lambda s: cls(s), spec)
